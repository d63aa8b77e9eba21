"""Cluster hash slots and multi-key deletes that respect them.

A multi-key command on a cluster must name keys of one hash slot (``CROSSSLOT``
otherwise), so deleting many keys in few commands means grouping them by slot; on a
single server any keys go together. The slot is Valkey's: CRC16 (XMODEM) of the key's
hash tag (the text between the first ``{`` and the next ``}``, when not empty) or of
the whole key, modulo 16384 (https://valkey.io/topics/cluster-spec/, "Keys hash tags").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["DELETE_CHUNK", "deletes", "key_slot"]

#: The most keys one ``DEL`` names: a multi-key DEL runs to the end before the server
#: serves anyone else, so a very long one is cut into commands of this many keys.
DELETE_CHUNK = 1024

SLOTS = 16384


def _table() -> tuple[int, ...]:
    out = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        out.append(crc & 0xFFFF)
    return tuple(out)


_CRC16 = _table()


def key_slot(key: str | bytes) -> int:
    """The cluster hash slot of ``key`` (0..16383), hash tags honoured."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    crc = 0
    for byte in raw:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


def _grouped(keys: Iterable[str], cluster: bool) -> list[list[str]]:
    if not cluster:
        group = list(keys)
        return [group] if group else []
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(key_slot(key), []).append(key)
    return list(groups.values())


def deletes(
    counted: Sequence[str], rest: Sequence[str] = (), *, cluster: bool, verb: str = "DEL"
) -> tuple[list[tuple[str, ...]], int]:
    """Multi-key deletes of ``counted`` then of ``rest``: (commands, how many lead).

    The first ``n`` commands delete ``counted`` only, so the sum of their replies is
    how many of those keys existed; the others delete ``rest`` (keys whose existence
    nobody asks about, such as a memory's access counter). One command per slot on a
    cluster, one for all on a single server, at most ``DELETE_CHUNK`` keys each.
    """
    out: list[tuple[str, ...]] = []
    lead = 0
    for keys, is_counted in ((counted, True), (rest, False)):
        for group in _grouped(keys, cluster):
            for i in range(0, len(group), DELETE_CHUNK):
                out.append((verb, *group[i : i + DELETE_CHUNK]))
                lead += is_counted
    return out, lead
