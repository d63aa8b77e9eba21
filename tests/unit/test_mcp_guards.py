"""The MCP server's two guards without a server: the fixed scope and the bearer-token check.

``adapters._mcp_scope`` and ``adapters._mcp_auth`` are pure (the middleware is driven
here with hand-made ASGI events); the real HTTP server and store are exercised in
``tests/integration/test_adapter_mcp_auth.py``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from betterdb_memory import ConfigurationError, MemoryItem, PermissionDeniedError, ValidationError
from betterdb_memory._cli_mcp import TOKEN_ENV_VAR, McpLaunch, resolve_token
from betterdb_memory.adapters._mcp_auth import (
    MIN_TOKEN_LENGTH,
    TOKEN_INVALID,
    TOKEN_REQUIRED,
    BearerAuth,
    check_token,
    is_loopback,
    require_token,
)
from betterdb_memory.adapters._mcp_scope import SCOPE_DENIED, FixedScope

TOKEN = "s3cr3t-token-for-tests_0123456789"


def item(**scope: str | None) -> MemoryItem:
    return MemoryItem(
        id="a" * 32, content="x", importance=0.5, created_at=0, last_accessed_at=0, access_count=0, **scope
    )  # type: ignore[arg-type]


# -- FixedScope ---------------------------------------------------------------------------------


def test_an_inactive_scope_lets_every_argument_and_memory_pass() -> None:
    guard = FixedScope()
    assert not guard.active and guard.as_dict() == {}
    assert guard.args("recall", namespace="any", agent_id=None) == {"namespace": "any", "agent_id": None}
    guard.check_memory("forget", item(namespace="other"))
    guard.check_sessions("store_turn")


def test_left_out_arguments_take_the_fixed_values_and_equal_ones_pass() -> None:
    guard = FixedScope(namespace="acme", agent_id="bot")
    assert guard.args("list", namespace=None, agent_id=None) == {"namespace": "acme", "agent_id": "bot"}
    assert guard.args("list", namespace="acme", agent_id="bot") == {"namespace": "acme", "agent_id": "bot"}
    assert guard.args("store_turn", agent_id=None) == {"agent_id": "bot"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "other"),
        ("namespace", "ACME"),
        ("namespace", "acme "),
        ("agent_id", "bot2"),
        ("agent_id", ""),
    ],
)
def test_another_value_is_refused_not_rewritten(field: str, value: str) -> None:
    guard = FixedScope(namespace="acme", agent_id="bot")
    with pytest.raises(PermissionDeniedError) as info:
        guard.args("recall", **{field: value})
    assert info.value.code == SCOPE_DENIED
    assert info.value.details == {"tool": "recall", "argument": field, "allowed": getattr(guard, field)}


def test_an_unfixed_field_stays_free() -> None:
    guard = FixedScope(namespace="acme")
    assert guard.args("recall", namespace=None, agent_id="anyone") == {
        "namespace": "acme",
        "agent_id": "anyone",
    }


@pytest.mark.parametrize(
    "scope",
    [{"namespace": "other", "agent_id": "bot"}, {"namespace": "acme", "agent_id": None}, {"namespace": None}],
)
def test_a_memory_outside_the_scope_is_refused(scope: dict[str, Any]) -> None:
    guard = FixedScope(namespace="acme", agent_id="bot")
    with pytest.raises(PermissionDeniedError) as info:
        guard.check_memory("forget", item(**scope))
    assert info.value.code == SCOPE_DENIED and info.value.details["id"] == "a" * 32


def test_a_memory_inside_the_scope_or_missing_passes() -> None:
    guard = FixedScope(namespace="acme")
    guard.check_memory("forget", item(namespace="acme", agent_id="any", thread_id="t"))
    guard.check_memory("forget", None)


def test_sessions_under_a_fixed_namespace_need_a_fixed_agent() -> None:
    """L1 turns are keyed by (agent, thread): a namespace alone cannot confine them."""
    with pytest.raises(PermissionDeniedError) as info:
        FixedScope(namespace="acme").check_sessions("retrieve_context")
    assert info.value.details["reason"] == "sessions_need_agent_id"
    FixedScope(namespace="acme", agent_id="bot").check_sessions("retrieve_context")
    FixedScope(agent_id="bot").check_sessions("store_turn")


@pytest.mark.parametrize("bad", ["", " ", "a,b", " acme"])
def test_a_fixed_value_the_store_would_refuse_is_refused_at_start(bad: str) -> None:
    with pytest.raises(ValidationError):
        FixedScope(namespace=bad)


# -- the token ----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "localhost", "LOCALHOST", "::1", "[::1]"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "", "localhost.evil"]
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_a_non_loopback_bind_without_a_token_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        require_token("0.0.0.0", None)
    assert info.value.code == TOKEN_REQUIRED and info.value.details == {"host": "0.0.0.0"}
    assert require_token("127.0.0.1", None) is None
    assert require_token("0.0.0.0", TOKEN) == TOKEN


def test_token_rules() -> None:
    assert check_token(f"  {TOKEN}\n", source="s") == TOKEN
    assert check_token("QUJDREVGR0hJSktMTU5PUA==", source="s") == "QUJDREVGR0hJSktMTU5PUA=="
    for bad in ("x" * (MIN_TOKEN_LENGTH - 1), "has a space in it!!", "é" * 20, "a=b" * 8, ""):
        with pytest.raises(ConfigurationError) as info:
            check_token(bad, source="the test")
        assert info.value.code == TOKEN_INVALID
        assert not bad.strip() or bad.strip() not in str(info.value)  # the value is never echoed


def _args(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"token_file": None, "http": True}
    return argparse.Namespace(**{**base, **kw})


def test_token_file_wins_over_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    other = "another-token-0123456789"
    assert resolve_token(_args(token_file=str(path)), {TOKEN_ENV_VAR: other}) == (
        TOKEN,
        f"--token-file {path}",
    )
    assert resolve_token(_args(), {TOKEN_ENV_VAR: other}) == (other, f"${TOKEN_ENV_VAR}")
    assert resolve_token(_args(), {TOKEN_ENV_VAR: "  "}) == (None, None)
    assert resolve_token(_args(http=False), {TOKEN_ENV_VAR: other}) == (None, None)  # stdio: nothing to check


def test_token_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_token(_args(token_file=str(tmp_path / "absent")), {})
    assert info.value.code == TOKEN_INVALID
    with pytest.raises(ValidationError) as usage:
        resolve_token(_args(token_file=str(tmp_path / "absent"), http=False), {})
    assert usage.value.code == "validation.usage"


def test_the_launch_never_shows_its_token() -> None:
    assert TOKEN not in repr(McpLaunch(token=TOKEN, scope=FixedScope()))


# -- the middleware -----------------------------------------------------------------------------


def _request(app: BearerAuth, headers: list[tuple[bytes, bytes]], kind: str = "http") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app({"type": kind, "headers": headers, "path": "/mcp"}, receive, send))  # type: ignore[arg-type]
    return sent


def _inner() -> tuple[BearerAuth, list[str]]:
    reached: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        assert all(k.lower() != b"authorization" for k, _ in scope.get("headers", []))  # the secret stays out

    return BearerAuth(inner, TOKEN), reached


@pytest.mark.parametrize(
    ("headers", "challenge"),
    [
        ([], b'Bearer realm="betterdb-memory"'),
        (
            [(b"authorization", b"Bearer wrong-token-0123456789")],
            b'Bearer realm="betterdb-memory", error="invalid_token"',
        ),
        (
            [(b"authorization", b"Bearer " + TOKEN.encode() + b"x")],
            b'Bearer realm="betterdb-memory", error="invalid_token"',
        ),
        (
            [(b"authorization", b"Bearer " + TOKEN[:-1].encode())],
            b'Bearer realm="betterdb-memory", error="invalid_token"',
        ),
        (
            [(b"authorization", b"Basic " + TOKEN.encode())],
            b'Bearer realm="betterdb-memory", error="invalid_token"',
        ),
        ([(b"authorization", TOKEN.encode())], b'Bearer realm="betterdb-memory", error="invalid_token"'),
    ],
)
def test_requests_without_the_token_get_401_and_never_reach_the_app(
    headers: list[tuple[bytes, bytes]], challenge: bytes
) -> None:
    app, reached = _inner()
    start, body = _request(app, headers)
    assert start["status"] == 401 and (b"www-authenticate", challenge) in start["headers"]
    assert TOKEN.encode() not in body["body"] and reached == []


@pytest.mark.parametrize(
    "value", [b"Bearer " + TOKEN.encode(), b"bearer " + TOKEN.encode(), b"BEARER  " + TOKEN.encode()]
)
def test_the_right_token_reaches_the_app(value: bytes) -> None:
    app, reached = _inner()
    assert _request(app, [(b"host", b"x"), (b"Authorization", value)]) == [] and reached == ["http"]


def test_lifespan_passes_and_websockets_are_closed() -> None:
    app, reached = _inner()
    assert _request(app, [], kind="lifespan") == [] and reached == ["lifespan"]
    assert _request(app, [], kind="websocket") == [{"type": "websocket.close", "code": 1008}]
    assert reached == ["lifespan"]
