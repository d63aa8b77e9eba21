"""Helpers shared by the L1 integration tests (this module holds no tests).

Stores come from the ``make_store`` fixture (conftest); here: key listing, summary
listing, and a real HTTP server speaking the chat-completions wire format.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


async def keys_of(client: Any, name: str) -> set[str]:
    """Every key of store ``name`` (SCAN, fine for a test's few thousand keys)."""
    out: set[str] = set()
    async for k in client.scan_iter(match=f"{name}:*", count=1000):
        out.add(k.decode() if isinstance(k, bytes) else k)
    return out


async def summaries_of(store: Any, thread_id: str, agent_id: str | None = None) -> list[Any]:
    """Every L2 summary of a thread (``kind == "summary"``), oldest range first."""
    items: list[Any] = []
    cursor = None
    while True:
        page = await store.list(thread_id=thread_id, agent_id=agent_id, limit=1000, cursor=cursor)
        items.extend(i for i in page.items if i.kind == "summary")
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return sorted(items, key=lambda i: i.metadata["turn_range"][0])


class ChatServer:
    """A real HTTP server speaking the chat-completions wire format, on a free local port.

    ``reply(body) -> str`` makes the assistant message of each ``POST /v1/chat/completions``;
    requests are recorded in ``requests``. Use as a context manager (``base_url`` inside).
    """

    def __init__(self, reply: Callable[[dict[str, Any]], str]) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                out = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": outer.reply(body)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                raw = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
