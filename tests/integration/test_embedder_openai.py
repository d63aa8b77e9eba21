"""OpenAIEmbedder against a real local HTTP server speaking the embeddings wire format.

The server (stdlib ``http.server`` in a thread) answers ``POST /v1/embeddings`` with
deterministic vectors (hashing vectors scaled by 3, so the client's normalisation is
exercised too), records every request, and can be told to fail the next requests
with a given status and headers. The SDK talks real HTTP to it; nothing is mocked.

Retries are the SDK's own: the server reads the retry counter the SDK stamps on each
request (``x-stainless-retry-count``), so the tests see how many attempts were made and
that no second retry loop of ours multiplies them. Failures carry ``retry-after-ms: 1``
where the test is not about the delay, so the SDK's backoff does not slow the suite.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
import valkey.asyncio as avalkey

pytest.importorskip("openai", reason="needs the 'openai' extra")

from betterdb_memory.embedders import OpenAIEmbedder, default_threshold_of
from betterdb_memory.embedders.hashing import HashingEmbedder
from betterdb_memory.errors import ConfigurationError, EmbeddingError, ValidationError

pytestmark = pytest.mark.integration

NATIVE = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "local-model": 48}


def expected(texts: list[str], dims: int) -> np.ndarray:
    """What the server returns, normalised: what the embedder must hand back."""
    return HashingEmbedder(dims).embed_sync(texts)


@dataclass
class FakeAPI:
    """State shared with the handler thread."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, status: int, headers: dict[str, str] | None = None, times: int = 1) -> None:
        with self.lock:
            self.failures.extend([(status, headers or {})] * times)

    @property
    def inputs(self) -> list[list[str]]:
        return [r["input"] for r in self.requests]

    @property
    def retry_counts(self) -> list[str | None]:
        return [r["retry_count"] for r in self.requests]


class Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def do_POST(self) -> None:
        api: FakeAPI = self.server.api  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with api.lock:
            api.requests.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "retry_count": self.headers.get("x-stainless-retry-count"),
                    **body,
                }
            )
            failure = api.failures.pop(0) if api.failures else None
        if self.path != "/v1/embeddings":
            return self.reply(404, {"error": {"message": "no such route", "type": "invalid_request_error"}})
        if failure:
            status, headers = failure
            return self.reply(status, {"error": {"message": f"forced {status}", "type": "test"}}, headers)
        inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if any(t == "" for t in inputs):
            return self.reply(
                400, {"error": {"message": "'$.input' is invalid", "type": "invalid_request_error"}}
            )
        dims = body.get("dimensions") or NATIVE[body["model"]]
        vectors = expected(inputs, dims) * 3.0
        b64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else v.tolist(),
            }
            for i, v in enumerate(vectors)
        ]
        self.reply(
            200,
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    state = FakeAPI()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.api = state  # type: ignore[attr-defined]
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
async def make(api: FakeAPI) -> AsyncIterator[Any]:
    """Factory for embedders pointed at the fake API; all closed after the test."""
    made: list[OpenAIEmbedder] = []

    def factory(model: str = "text-embedding-3-small", **kwargs: Any) -> OpenAIEmbedder:
        emb = OpenAIEmbedder(model, api_key="sk-test", base_url=api.url, **kwargs)
        made.append(emb)
        return emb

    yield factory
    for emb in made:
        await emb.aclose()


async def test_embeds_over_http_and_normalises(api: FakeAPI, make: Any) -> None:
    """Known model: 1536 dims before any call; vectors match the server's, normalised."""
    emb = make()
    assert emb.dimensions == 1536
    assert emb.model_id == "openai:text-embedding-3-small"
    assert default_threshold_of(emb) == 0.70
    texts = ["hello world", "你好，世界", "Привет, мир"]
    out = await emb.embed(texts)
    np.testing.assert_allclose(out, expected(texts, 1536), atol=1e-6)
    assert api.requests[0]["auth"] == "Bearer sk-test"
    assert "dimensions" not in api.requests[0]  # native size: not sent


async def test_429_is_retried_after_retry_after(api: FakeAPI, make: Any) -> None:
    """A 429 with Retry-After is slept through by the SDK, then the request succeeds with the right vectors."""
    api.fail_next(429, {"Retry-After": "0.2"})
    emb = make()
    start = time.monotonic()
    out = await emb.embed(["one", "two"])
    assert time.monotonic() - start >= 0.2
    assert api.inputs == [["one", "two"], ["one", "two"]]
    assert api.retry_counts == ["0", "1"]
    np.testing.assert_allclose(out, expected(["one", "two"], 1536), atol=1e-6)


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_5xx_retries_are_the_sdks_and_bounded(api: FakeAPI, make: Any, max_retries: int) -> None:
    """Exactly max_retries + 1 requests (the SDK's retries, no loop of ours on top); the count is in details."""
    api.fail_next(500, {"retry-after-ms": "1"}, times=10)
    with pytest.raises(EmbeddingError) as info:
        await make(max_retries=max_retries).embed(["x"])
    assert info.value.code == "embedder.unavailable"
    assert info.value.details["attempts"] == max_retries + 1
    assert info.value.details["status"] == 500
    assert api.retry_counts == [str(i) for i in range(max_retries + 1)]


async def test_a_retry_that_succeeds_returns_the_vectors(api: FakeAPI, make: Any) -> None:
    api.fail_next(503, {"retry-after-ms": "1"}, times=2)
    out = await make(max_retries=2).embed(["x"])
    np.testing.assert_allclose(out, expected(["x"], 1536), atol=1e-6)
    assert api.retry_counts == ["0", "1", "2"]


async def test_exhausted_429_is_rate_limited(api: FakeAPI, make: Any) -> None:
    api.fail_next(429, {"retry-after-ms": "1"}, times=5)
    with pytest.raises(EmbeddingError) as info:
        await make(max_retries=1).embed(["x"])
    assert info.value.code == "embedder.rate_limited"
    assert info.value.details["attempts"] == 2
    assert len(api.requests) == 2


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (400, ValidationError, "validation.embedder_rejected"),
        (401, ConfigurationError, "configuration.embedder_auth"),
        (404, ConfigurationError, "configuration.embedder_model"),
    ],
)
async def test_client_errors_are_not_retried(
    api: FakeAPI, make: Any, status: int, error: type[Exception], code: str
) -> None:
    api.fail_next(status)
    with pytest.raises(error) as info:
        await make().embed(["x"])
    assert getattr(info.value, "code", None) == code
    assert getattr(info.value, "details", {})["attempts"] == 1
    assert len(api.requests) == 1


async def test_unreachable_endpoint_is_retried_then_reported() -> None:
    """Connection errors are retried by the SDK too; what is left is embedder.connection_failed."""
    async with OpenAIEmbedder(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=1) as emb:
        with pytest.raises(EmbeddingError) as info:
            await emb.embed(["x"])
    assert info.value.code == "embedder.connection_failed"
    assert info.value.details["attempts"] == 2


async def test_a_callers_client_keeps_its_own_retries_and_stays_open(api: FakeAPI) -> None:
    """client=: used as it is (its max_retries, not ours) and never closed by the embedder."""
    openai = pytest.importorskip("openai")
    caller = openai.AsyncOpenAI(api_key="sk-caller", base_url=api.url, max_retries=1)
    try:
        api.fail_next(500, {"retry-after-ms": "1"}, times=10)
        async with OpenAIEmbedder(client=caller, max_retries=5) as emb:
            with pytest.raises(EmbeddingError) as info:
                await emb.embed(["x"])
        assert info.value.details["attempts"] == 2 and len(api.requests) == 2
        assert not caller.is_closed()
        api.failures.clear()
        async with OpenAIEmbedder(client=caller) as again:  # still usable after the first one closed
            assert (await again.embed(["y"])).shape == (1, 1536)
        assert api.requests[-1]["auth"] == "Bearer sk-caller"
    finally:
        await caller.close()


async def test_async_with_closes_the_client_it_created(api: FakeAPI) -> None:
    async with OpenAIEmbedder(api_key="k", base_url=api.url) as emb:
        await emb.embed(["x"])
        assert not emb._client.is_closed()
    assert emb._client.is_closed()


async def test_batches_and_deduplicates(api: FakeAPI, make: Any) -> None:
    """Ten distinct texts at batch_size 4 are three requests; repeats are sent once."""
    texts = [f"text {i}" for i in range(10)]
    out = await make(batch_size=4).embed([*texts, "text 3", "text 0"])
    assert sorted(len(i) for i in api.inputs) == [2, 4, 4]
    assert sorted(t for i in api.inputs for t in i) == sorted(texts)
    np.testing.assert_allclose(out, expected([*texts, "text 3", "text 0"], 1536), atol=1e-6)


async def test_shortened_dimensions_are_requested(api: FakeAPI, make: Any) -> None:
    out = await make(dimensions=256).embed(["short"])
    assert api.requests[0]["dimensions"] == 256
    assert out.shape == (1, 256)


async def test_unknown_model_dimension_is_discovered_on_first_call(api: FakeAPI, make: Any) -> None:
    emb = make("local-model")
    with pytest.raises(ConfigurationError):
        _ = emb.dimensions
    assert default_threshold_of(emb) is None
    out = await emb.embed(["a", "b"])
    assert emb.dimensions == 48 and out.shape == (2, 48)
    assert "dimensions" not in api.requests[0]  # never sent to a non-OpenAI model


async def test_wrong_dimension_from_server_is_an_embedding_error(make: Any) -> None:
    with pytest.raises(EmbeddingError) as info:
        await make("local-model", dimensions=64).embed(["a"])
    assert info.value.code == "embedder.bad_shape"


async def test_empty_text_is_sent_as_a_space(api: FakeAPI, make: Any) -> None:
    """The API refuses "", so it is sent as " " and still gets a unit vector."""
    out = await make().embed(["", "x"])
    assert api.inputs == [[" ", "x"]]
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)


async def test_cache_serves_repeats_without_http(
    api: FakeAPI, make: Any, client: avalkey.Valkey, unique_name: str
) -> None:
    """Second call: no request; a new text alone is fetched; keys carry model, dims and hash."""
    prefix = f"{unique_name}:emb"
    emb = make(cache_client=client, cache_prefix=prefix, cache_ttl_seconds=60)
    first = await emb.embed(["alpha", "beta"])
    assert len(api.requests) == 1
    again = await emb.embed(["beta", "alpha"])
    assert len(api.requests) == 1
    np.testing.assert_array_equal(again, first[::-1])
    await emb.embed(["alpha", "gamma"])
    assert api.inputs[-1] == ["gamma"]
    keys = sorted([k.decode() async for k in client.scan_iter(match=f"{prefix}:*")])
    assert len(keys) == 3
    assert all(k.startswith(f"{prefix}:openai:text-embedding-3-small:1536:") for k in keys)
    assert 0 < await client.ttl(keys[0]) <= 60
    assert len(await client.get(keys[0])) == 1536 * 4
    await client.delete(*keys)


async def test_cache_key_includes_the_dimension(
    api: FakeAPI, make: Any, client: avalkey.Valkey, unique_name: str
) -> None:
    """The same text at 256 and 512 dims are two entries: neither is served for the other."""
    prefix = f"{unique_name}:emb"
    small = await make(dimensions=256, cache_client=client, cache_prefix=prefix).embed(["same text"])
    large = await make(dimensions=512, cache_client=client, cache_prefix=prefix).embed(["same text"])
    assert len(api.requests) == 2
    assert small.shape == (1, 256) and large.shape == (1, 512)
    keys = [k async for k in client.scan_iter(match=f"{prefix}:*")]
    assert len(keys) == 2
    await client.delete(*keys)


async def test_cached_vector_of_wrong_length_is_ignored_and_replaced(
    api: FakeAPI, make: Any, client: avalkey.Valkey, unique_name: str
) -> None:
    prefix = f"{unique_name}:emb"
    emb = make(cache_client=client, cache_prefix=prefix)
    key = emb._key("stale", 1536)
    await client.set(key, np.ones(256, dtype="<f4").tobytes())
    out = await emb.embed(["stale"])
    assert len(api.requests) == 1
    np.testing.assert_allclose(out, expected(["stale"], 1536), atol=1e-6)
    assert len(await client.get(key)) == 1536 * 4
    await client.delete(key)


async def test_cache_failure_does_not_fail_embedding(api: FakeAPI, make: Any) -> None:
    """With Valkey unreachable the texts are embedded anyway (the cache is an optimisation)."""
    dead = avalkey.Valkey(host="127.0.0.1", port=9, socket_connect_timeout=0.5)
    try:
        out = await make(cache_client=dead).embed(["still works"])
    finally:
        await dead.aclose()
    assert out.shape == (1, 1536)
    assert len(api.requests) == 1


async def test_a_decoding_cache_client_is_refused(text_client: avalkey.Valkey) -> None:
    with pytest.raises(ConfigurationError) as info:
        OpenAIEmbedder(api_key="k", base_url="http://127.0.0.1:9/v1", cache_client=text_client)
    assert info.value.code == "configuration.cache_client"
