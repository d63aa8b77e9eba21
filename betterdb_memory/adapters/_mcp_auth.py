"""Bearer-token authentication of the MCP server's HTTP transport.

Bound to anything but loopback, an unauthenticated server lets whoever reaches the port
read and delete every memory, so ``serve`` refuses to listen there without a token
(``configuration.mcp_token_required``). A loopback bind may run without one, as before;
with one it checks it too.

Why a middleware of our own and not the SDK's auth: the SDK's is OAuth 2.1 (an
authorization server or token verifier, protected-resource metadata, scopes), more than
a self-hosted memory server needs and nothing a user can set up with one secret. The
middleware wraps the SDK's ASGI app and checks ``Authorization: Bearer <token>`` on
every HTTP request, whatever its path or method, before the SDK sees it; ASGI lifespan
events pass through (the SDK's session manager starts there).

The comparison is constant-time (``hmac.compare_digest``) over SHA-256 digests, so it
leaks neither a matching prefix nor the token's length. The token never reaches a log
or an error message: only where it came from does.

Pure ASGI (no Starlette import at run time), so the helpers here are unit-tested without
the ``mcp`` extra.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
from typing import TYPE_CHECKING

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "MIN_TOKEN_LENGTH",
    "TOKEN_INVALID",
    "TOKEN_REQUIRED",
    "BearerAuth",
    "check_token",
    "is_loopback",
    "require_token",
]

#: Error codes (``ConfigurationError``): no token for a non-loopback bind / a token unfit for use.
TOKEN_REQUIRED = "configuration.mcp_token_required"
TOKEN_INVALID = "configuration.mcp_token_invalid"

#: A shorter secret could be guessed by trying; the server does not rate-limit attempts.
MIN_TOKEN_LENGTH = 16

# RFC 6750 section 2.1, b64token: the characters a bearer credential may hold in a header.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_REALM = 'Bearer realm="betterdb-memory"'


def is_loopback(host: str) -> bool:
    """True for an address only local clients reach: ``localhost``, 127.0.0.0/8, ``::1``.

    Any other name counts as non-loopback: it may resolve to a public address, and
    ``0.0.0.0`` / ``::`` listen on every interface.
    """
    name = host.strip().lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str, *, source: str) -> str:
    """``token`` without outer whitespace, if fit to be a bearer token.

    Args:
        token: the secret as read (a file's trailing newline is fine).
        source: where it came from, for the error (never the value itself).

    Raises:
        ConfigurationError: ``configuration.mcp_token_invalid``: shorter than
            ``MIN_TOKEN_LENGTH`` or holding characters a bearer token cannot carry.
    """
    value = token.strip()
    if len(value) < MIN_TOKEN_LENGTH or not _B64TOKEN.fullmatch(value):
        raise ConfigurationError(
            f"the MCP token from {source} must be at least {MIN_TOKEN_LENGTH} characters of "
            "A-Z a-z 0-9 - . _ ~ + / (then = padding); make one with: "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"',
            code=TOKEN_INVALID,
            details={"source": source, "min_length": MIN_TOKEN_LENGTH},
        )
    return value


def require_token(host: str, token: str | None) -> str | None:
    """The token the HTTP server checks, or None for an open loopback server.

    Raises:
        ConfigurationError: ``configuration.mcp_token_required``: ``host`` is not a
            loopback address and no token was given.
    """
    if token is None and not is_loopback(host):
        raise ConfigurationError(
            f"the MCP server would listen on {host!r}, reachable from other machines, without "
            "authentication: give it a bearer token (--token-file PATH or $BETTERDB_MEMORY_MCP_TOKEN), "
            "or bind 127.0.0.1",
            code=TOKEN_REQUIRED,
            details={"host": host},
        )
    return token


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class BearerAuth:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` gets a 401.

    Missing credentials answer ``WWW-Authenticate: Bearer realm=...``; wrong ones add
    ``error="invalid_token"`` (RFC 6750 section 3). A WebSocket handshake is closed
    (403) the same way; lifespan events pass. An accepted request reaches the app
    without its ``Authorization`` header.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = _digest(token.encode("ascii"))

    def verdict(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        """None when the request carries the token, else ``"missing"`` or ``"invalid"``."""
        values = [v for k, v in headers if k.lower() == b"authorization"]
        if not values:
            return "missing"
        scheme, _, credentials = values[0].strip().partition(b" ")
        if len(values) > 1 or scheme.lower() != b"bearer":
            return "invalid"
        # Compare digests: constant time whatever the lengths, unlike comparing the raw values.
        ok = hmac.compare_digest(_digest(credentials.strip()), self._expected)
        return None if ok else "invalid"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = list(scope.get("headers", []))
        verdict = self.verdict(headers)
        if verdict is None:
            # The SDK never needs the secret: drop it, so no log or debug page downstream can echo it.
            kept = [(k, v) for k, v in headers if k.lower() != b"authorization"]
            await self.app({**scope, "headers": kept}, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _unauthorized(send, verdict)


async def _unauthorized(send: Send, verdict: str) -> None:
    challenge = _REALM if verdict == "missing" else f'{_REALM}, error="invalid_token"'
    body = json.dumps(
        {
            "error": "invalid_token" if verdict == "invalid" else "unauthorized",
            "error_description": "a bearer token is required"
            if verdict == "missing"
            else "the bearer token is not this server's",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
