"""OpenAISummarizer and OpenAIFactExtractor: ``async with``, the SDK's retries, our error mapping.

The endpoint is a stdlib HTTP server on 127.0.0.1 speaking the chat-completions wire
format; the openai SDK talks real HTTP to it, nothing leaves the machine. The server
records the retry counter the SDK stamps on each request (``x-stainless-retry-count``)
and can be told to fail the next requests with a status (and ``retry-after-ms: 1``, so
the SDK's backoff does not slow the suite).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="needs the 'openai' extra")

from betterdb_memory import Turn  # noqa: E402
from betterdb_memory.errors import BetterDBMemoryError, ConfigurationError  # noqa: E402
from betterdb_memory.extraction import OpenAIFactExtractor  # noqa: E402
from betterdb_memory.summarizers import OpenAISummarizer  # noqa: E402

TURNS = [Turn(id="1", thread_id="t", user_message="I live in Lisbon.", assistant_message="Noted.")]
FACTS_REPLY = json.dumps({"facts": [{"content": "The user lives in Lisbon.", "importance": 0.8}]})


@dataclass
class Stub:
    """State shared with the handler thread."""

    url: str = ""
    retry_counts: list[str | None] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, status: int, times: int = 1) -> None:
        with self.lock:
            self.failures.extend([status] * times)


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def do_POST(self) -> None:
        stub: Stub = self.server.stub  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with stub.lock:
            stub.retry_counts.append(self.headers.get("x-stainless-retry-count"))
            status = stub.failures.pop(0) if stub.failures else None
        if status is not None:
            payload: dict[str, Any] = {"error": {"message": f"forced {status}", "type": "test"}}
            return self._reply(status, payload, {"retry-after-ms": "1"})
        # The fact extractor asks for structured output; the summariser does not.
        content = FACTS_REPLY if "response_format" in body else "The user lives in Lisbon."
        self._reply(
            200,
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "m"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:  # quiet test output
        pass


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.stub = state  # type: ignore[attr-defined]
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


LLMS = [OpenAISummarizer, OpenAIFactExtractor]


async def _use(llm: Any) -> Any:
    """One call of whichever seam ``llm`` implements."""
    if isinstance(llm, OpenAISummarizer):
        return await llm.summarize(TURNS)
    return await llm.extract(TURNS)


@pytest.mark.parametrize("cls", LLMS)
async def test_async_with_closes_the_client_it_created(stub: Stub, cls: Any) -> None:
    async with cls("m", api_key="k", base_url=stub.url) as llm:
        result = await _use(llm)
        assert not llm._chat._client.is_closed()
    assert llm._chat._client.is_closed()
    assert result  # a summary text, or a non-empty list of facts


@pytest.mark.parametrize("cls", LLMS)
async def test_async_with_leaves_a_callers_client_open(stub: Stub, cls: Any) -> None:
    """client=: the caller's to close; it still works after the seam's ``async with`` ended."""
    caller = openai.AsyncOpenAI(api_key="k", base_url=stub.url, max_retries=0)
    try:
        async with cls("m", client=caller) as llm:
            await _use(llm)
        assert not caller.is_closed()
        async with cls("m", client=caller) as again:
            await _use(again)
        assert len(stub.retry_counts) == 2
    finally:
        await caller.close()


@pytest.mark.parametrize("cls", LLMS)
@pytest.mark.parametrize("max_retries", [0, 2])
async def test_retries_are_the_sdks_and_bounded(stub: Stub, cls: Any, max_retries: int) -> None:
    """A persistent 5xx: exactly max_retries + 1 requests, then server.llm_http_error with the status."""
    stub.fail_next(503, times=10)
    async with cls("m", api_key="k", base_url=stub.url, max_retries=max_retries) as llm:
        with pytest.raises(BetterDBMemoryError) as info:
            await _use(llm)
    assert info.value.code == "server.llm_http_error" and info.value.details["status"] == 503
    assert stub.retry_counts == [str(i) for i in range(max_retries + 1)]


async def test_a_retry_that_succeeds_returns_the_summary(stub: Stub) -> None:
    stub.fail_next(429, times=2)
    async with OpenAISummarizer("m", api_key="k", base_url=stub.url, max_retries=2) as llm:
        assert await llm.summarize(TURNS) == "The user lives in Lisbon."
    assert stub.retry_counts == ["0", "1", "2"]


@pytest.mark.parametrize("cls", LLMS)
@pytest.mark.parametrize(
    ("status", "code"), [(401, "configuration.llm_auth"), (404, "configuration.llm_model")]
)
async def test_auth_and_model_errors_are_configuration_errors_not_retried(
    stub: Stub, cls: Any, status: int, code: str
) -> None:
    stub.fail_next(status)
    async with cls("m", api_key="k", base_url=stub.url, max_retries=3) as llm:
        with pytest.raises(ConfigurationError) as info:
            await _use(llm)
    assert info.value.code == code
    assert stub.retry_counts == ["0"]


async def test_unreachable_endpoint_is_a_connection_error() -> None:
    async with OpenAIFactExtractor("m", api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0) as llm:
        with pytest.raises(BetterDBMemoryError) as info:
            await llm.extract(TURNS)
    assert info.value.code == "server.llm_unreachable"
