"""Embeddings from the OpenAI API or any server speaking its wire format, extra ``openai``.

Three things the plain SDK call does not give a memory store:

* **One error mapping.** Retries are the SDK's own (``max_retries`` is handed to the
  client this embedder creates): 408/409/429/5xx and connection errors, the server's
  ``Retry-After`` honoured, else exponential backoff with jitter. A second, hand-written
  retry loop on top would multiply the attempts and drift from the SDK's rules (it once
  did: two policies, two sets of delays). What still fails after the SDK gave up is
  translated here, in one place, into this library's typed errors, with the number of
  attempts the SDK made.
* **Batching.** Texts go ``batch_size`` per request, identical texts once, a few
  requests in flight at a time.
* **A Valkey cache.** Key ``<prefix>:<model_id>:<dimensions>:<sha256(text)>``,
  value the raw little-endian float32 bytes, looked up with one ``MGET`` and
  stored with one pipelined ``SET ... EX``. The model id *and* the dimension are
  in the key because a text-only key once served 256-d vectors to a 384-d model;
  a cached value of the wrong length is ignored and overwritten. The cache is an
  optimisation: if Valkey fails, the texts are embedded anyway and a warning logged.

``dimensions`` is known up front when given, else from the table of OpenAI models,
else after the first response (reading ``.dimensions`` before then raises).
``dimensions`` is sent to the API only for ``text-embedding-3*`` models and only
when it differs from the native size; for other models it is what responses are
checked against. The API refuses empty strings, so ``""`` is sent as ``" "``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import valkey.exceptions as vexc

from ..core.validation import check_int
from ..errors import BetterDBMemoryError, ConfigurationError, EmbeddingError, ValidationError
from .base import FloatMatrix, _check_positive_int, check_texts, validate_embeddings

if TYPE_CHECKING:
    import valkey.asyncio as avalkey

__all__ = ["KNOWN_DIMENSIONS", "OpenAIEmbedder"]

log = logging.getLogger(__name__)

_EXTRA = "openai"
KNOWN_DIMENSIONS: Mapping[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_RETRY_STATUSES = frozenset({408, 409, 429})  # plus every 5xx: what the SDK retries

# Similarity thresholds on the (1 + cos) / 2 scale. NOT measured here: this environment has
# no network, so the calibration pairs (tests/unit/test_embedder_calibration.py) could not be
# sent to the API. They are estimates from these models' usual cosine ranges: text-embedding-3
# puts unrelated text near cos 0.0-0.2 and paraphrases at 0.6+, so cos 0.4 -> 0.70; ada-002
# squeezes everything into cos 0.7-1.0 (unrelated about 0.72), so cos 0.8 -> 0.90. Other
# models (a compatible server) get no default: the store then needs an explicit threshold.
# Measure with tests/unit/test_embedder_calibration.report() against the real API to replace them.
_ESTIMATED_THRESHOLDS: Mapping[str, float] = {
    "text-embedding-3-small": 0.70,
    "text-embedding-3-large": 0.70,
    "text-embedding-ada-002": 0.90,
}


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint as an ``Embedder``.

    Args:
        model: the model name sent to the API.
        dimensions: vector length, if known (see the module docstring).
        api_key: the API key; ``None`` lets the SDK read ``OPENAI_API_KEY``.
        base_url: the API root (``http://host:port/v1``) for compatible servers.
        batch_size: texts per request (the API accepts up to 2048).
        max_retries: the SDK's retries of 408/409/429/5xx and connection faults (extra
            attempts after the first), passed to the client this embedder creates.
        timeout: seconds per request.
        cache_client: a ``valkey.asyncio.Valkey`` with ``decode_responses=False``, or ``None``.
        cache_ttl_seconds: cache entry lifetime; ``None`` keeps entries until evicted.
        cache_prefix: first part of every cache key.
        model_id: overrides ``openai:<model>`` as the name of the vector space (for
            two servers serving different models under one name).
        client: an ``openai.AsyncOpenAI`` to use as it is (its own ``max_retries`` apply);
            ``api_key``, ``base_url``, ``timeout`` and ``max_retries`` are then ignored.
            Not closed by ``aclose``.
        max_concurrent_requests: requests in flight at once for one ``embed`` call.

    Raises:
        ConfigurationError: the ``openai`` extra is missing (``configuration.missing_extra``),
            no API key is available (``configuration.embedder_auth``), the cache client
            decodes responses, or an argument is out of range.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 128,
        max_retries: int = 5,
        timeout: float = 30.0,
        cache_client: avalkey.Valkey | None = None,
        cache_ttl_seconds: int | None = 7 * 86400,
        cache_prefix: str = "betterdb:embcache",
        model_id: str | None = None,
        client: Any = None,
        max_concurrent_requests: int = 4,
    ) -> None:
        if dimensions is not None:
            _check_positive_int("dimensions", dimensions)
        _check_positive_int("batch_size", batch_size)
        _check_positive_int("max_concurrent_requests", max_concurrent_requests)
        if cache_ttl_seconds is not None:
            _check_positive_int("cache_ttl_seconds", cache_ttl_seconds)
        check_int(max_retries, "max_retries", minimum=0, setting=True)
        if cache_client is not None and _decodes_responses(cache_client):
            raise ConfigurationError(
                "cache_client must be created with decode_responses=False (vectors are raw bytes)",
                code="configuration.cache_client",
                details={"argument": "cache_client"},
            )
        self._openai = _import_openai()
        try:
            if client is not None:
                self._client = client
                self._owns_client = False
            else:
                self._client = self._openai.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
                )
                self._owns_client = True
        except self._openai.OpenAIError as exc:  # raised when no key is given or in the environment
            raise ConfigurationError(
                f"OpenAIEmbedder cannot create its client: {exc}",
                code="configuration.embedder_auth",
                details={"extra": _EXTRA},
            ) from exc
        self._model = model
        self._native = KNOWN_DIMENSIONS.get(model)
        self._dimensions = dimensions if dimensions is not None else self._native
        self._send_dimensions = (
            dimensions is not None and model.startswith("text-embedding-3") and dimensions != self._native
        )
        self._model_id = model_id or f"openai:{model}"
        # Known OpenAI model names only (read it through default_threshold_of; None = no default).
        self.default_threshold: float | None = _ESTIMATED_THRESHOLDS.get(model)
        self._batch_size = batch_size
        self._max_concurrent = max_concurrent_requests
        self._cache = cache_client
        self._ttl = cache_ttl_seconds
        self._prefix = cache_prefix

    # -- the protocol -------------------------------------------------------------

    @property
    def dimensions(self) -> int:
        """Vector length. Raises ``ConfigurationError`` while unknown (unknown model, no call yet)."""
        if self._dimensions is None:
            raise ConfigurationError(
                f"the dimension of {self._model!r} is not known yet: pass dimensions=, or embed once first",
                code="configuration.dimensions_unknown",
                details={"model": self._model},
            )
        return self._dimensions

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r}, dimensions={self._dimensions})"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts``: cache first, then the API for the rest, batched and retried.

        Returns:
            float32 ``(len(texts), dimensions)``, rows unit length.

        Raises:
            ValidationError: ``texts`` is a bare ``str`` (pass ``[text]``) or holds a
                non-string, or the API refused the input (``validation.embedder_rejected``).
            ConfigurationError: authentication or model rejected (``configuration.embedder_*``).
            EmbeddingError: the SDK's retries exhausted (``embedder.rate_limited``,
                ``embedder.unavailable``, ``embedder.connection_failed``), an unusable
                response (``embedder.bad_response``) or malformed vectors
                (``embedder.bad_shape``, ``embedder.nonfinite``).
        """
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        unique = list(dict.fromkeys(items))
        found = await self._cache_get(unique)
        missing = [t for t in unique if t not in found]
        if missing:
            fetched = await self._fetch(missing)
            await self._cache_set(fetched)
            found.update(fetched)
        rows = np.stack([found[t] for t in items])
        return validate_embeddings(
            rows, count=len(items), dimensions=self.dimensions, model_id=self._model_id
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder created it (never the cache client)."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the API ------------------------------------------------------------------

    async def _fetch(self, texts: list[str]) -> dict[str, FloatMatrix]:
        gate = asyncio.Semaphore(self._max_concurrent)

        async def one(batch: list[str]) -> FloatMatrix:
            async with gate:
                return await self._request(batch)

        batches = [texts[i : i + self._batch_size] for i in range(0, len(texts), self._batch_size)]
        results = await asyncio.gather(*(one(b) for b in batches))
        return {
            text: row
            for batch, matrix in zip(batches, results, strict=True)
            for text, row in zip(batch, matrix, strict=True)
        }

    async def _request(self, batch: list[str]) -> FloatMatrix:
        """One ``embeddings.create`` (the SDK retries inside it); its final failure mapped once."""
        extra: dict[str, Any] = {"dimensions": self._dimensions} if self._send_dimensions else {}
        payload = [t if t else " " for t in batch]  # the API refuses "" ("cannot be an empty string")
        try:
            response = await self._client.embeddings.create(model=self._model, input=payload, **extra)
        except self._openai.APIStatusError as exc:
            raise self._status_error(exc, int(exc.status_code), _attempts(exc)) from exc
        except self._openai.APIConnectionError as exc:  # includes APITimeoutError
            attempts = _attempts(exc)
            raise EmbeddingError(
                f"embedding endpoint unreachable after {attempts or 'several'} attempts: {exc}",
                code="embedder.connection_failed",
                details={"model": self._model, "attempts": attempts},
            ) from exc
        except self._openai.APIError as exc:  # a response the SDK could not parse
            raise EmbeddingError(
                f"embedding endpoint returned an unusable response: {exc}",
                code="embedder.bad_response",
                details={"model": self._model},
            ) from exc
        return self._parse(response, len(batch))

    def _parse(self, response: Any, count: int) -> FloatMatrix:
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != count:
            raise EmbeddingError(
                f"embedding endpoint returned {len(data)} vectors for {count} texts",
                code="embedder.bad_shape",
                details={"model_id": self._model_id, "expected": count, "got": len(data)},
            )
        try:
            matrix = np.asarray([d.embedding for d in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:  # ragged rows
            raise EmbeddingError(
                "embedding endpoint returned vectors of different lengths",
                code="embedder.bad_shape",
                details={"model_id": self._model_id},
            ) from exc
        if self._dimensions is None and matrix.ndim == 2:
            self._dimensions = int(matrix.shape[1])  # discovered on the first response
        return validate_embeddings(matrix, count=count, dimensions=self.dimensions, model_id=self._model_id)

    def _status_error(self, exc: Any, status: int, attempts: int | None) -> BetterDBMemoryError:
        details = {
            "model": self._model,
            "status": status,
            "attempts": attempts,
            "request_id": getattr(exc, "request_id", None),
        }
        message = f"embedding request failed with HTTP {status}: {exc.message}"
        if status in (401, 403):
            return ConfigurationError(message, code="configuration.embedder_auth", details=details)
        if status == 404:
            return ConfigurationError(message, code="configuration.embedder_model", details=details)
        if status == 429:
            return EmbeddingError(message, code="embedder.rate_limited", details=details)
        if status in _RETRY_STATUSES or status >= 500:
            return EmbeddingError(message, code="embedder.unavailable", details=details)
        return ValidationError(message, code="validation.embedder_rejected", details=details)

    # -- the cache ----------------------------------------------------------------

    def _key(self, text: str, dimensions: int) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self._prefix}:{self._model_id}:{dimensions}:{digest}"

    async def _cache_get(self, texts: list[str]) -> dict[str, FloatMatrix]:
        dims = self._dimensions
        if self._cache is None or dims is None:  # without a dimension there is no key yet
            return {}
        try:
            raws = await self._cache.mget([self._key(t, dims) for t in texts])
        except (vexc.ValkeyError, OSError) as exc:
            log.warning("embedding cache lookup failed, embedding without it: %s", exc)
            return {}
        found: dict[str, FloatMatrix] = {}
        for text, raw in zip(texts, raws, strict=True):
            if isinstance(raw, bytes) and len(raw) == 4 * dims:  # another length: stale or foreign, ignore
                vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
                if np.all(np.isfinite(vec)):
                    found[text] = vec
        return found

    async def _cache_set(self, vectors: Mapping[str, FloatMatrix]) -> None:
        dims = self._dimensions
        if self._cache is None or dims is None or not vectors:
            return
        try:
            async with self._cache.pipeline(transaction=False) as pipe:
                for text, vec in vectors.items():
                    pipe.set(
                        self._key(text, dims), np.ascontiguousarray(vec, dtype="<f4").tobytes(), ex=self._ttl
                    )
                await pipe.execute()
        except (vexc.ValkeyError, OSError) as exc:
            log.warning("embedding cache store failed (vectors still returned): %s", exc)


def _import_openai() -> Any:
    if importlib.util.find_spec("openai") is None:
        raise ConfigurationError(
            f"OpenAIEmbedder needs the '{_EXTRA}' extra; install it with: pip install 'betterdb-memory[{_EXTRA}]'",
            code="configuration.missing_extra",
            details={"extra": _EXTRA, "missing": ["openai"]},
        )
    try:
        return importlib.import_module("openai")
    except ImportError as exc:
        raise ConfigurationError(
            f"the '{_EXTRA}' extra is installed but does not import: {exc}",
            code="configuration.missing_extra",
            details={"extra": _EXTRA, "missing": [exc.name or "openai"]},
        ) from exc


def _decodes_responses(client: Any) -> bool:
    getter = getattr(client, "get_connection_kwargs", None)
    return bool(getter().get("decode_responses")) if callable(getter) else False


def _attempts(exc: Any) -> int | None:
    """How many attempts the SDK made, read from its final request (``APIError.request``).

    The SDK stamps ``x-stainless-retry-count`` (0 on the first attempt) on every request
    unless the caller's client overrides that header; then the count is unknown: ``None``.
    """
    try:
        return int(exc.request.headers["x-stainless-retry-count"]) + 1
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
