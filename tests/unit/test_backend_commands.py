"""backend.commands: what the backend hands valkey-py."""

from __future__ import annotations


def test_unbuffered_sends_large_bytes_as_views_and_the_same_bytes_go_on_the_wire() -> None:
    """valkey-py copies a bytes argument again at every later one; a view goes out as its own chunk."""
    from valkey.asyncio.connection import Connection

    from betterdb_memory.backend.commands import unbuffered

    vector = bytes(range(256)) * 6  # 1,536 bytes: a 384-d float32 vector
    command = ("HSET", "m:1", "content", "hi", "vector", vector, "importance", "0.5", "small", b"abc")
    sent = unbuffered(command)
    assert isinstance(sent[5], memoryview) and sent[9] == b"abc" and type(sent[9]) is bytes
    assert sent == command  # equal value for value: a view equals its bytes
    plain = ("DEL", "m:1", b"x" * 256)  # nothing over 256 bytes: the command itself
    assert unbuffered(plain) is plain
    conn = Connection()
    assert b"".join(bytes(c) for c in conn.pack_command(*sent)) == b"".join(conn.pack_command(*command))
