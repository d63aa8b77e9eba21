"""The ``Embedder`` seam, its output contract, and adapters for plain async functions.

The store takes any object with ``dimensions``, ``model_id`` and ``async embed``;
nothing else in the package knows which model made a vector. The contract every
embedder keeps (and ``validate_embeddings`` enforces for the ones we do not ship):

* ``embed(texts)`` takes a list (any sequence) of strings and returns a float32
  array of shape ``(len(texts), dimensions)``, in input order, every value finite.
  A bare ``str`` is refused with a ``ValidationError`` (``validation.type``), never
  read as a sequence of characters: ``embed("hello world")`` would otherwise return
  11 vectors that look valid. Pass ``[text]`` for one text (``check_texts``);
* rows are L2-normalised, so cosine distance is all that matters and the store's
  similarity ``1 - cosine_distance / 2`` (= ``(1 + cos) / 2``, 0..1) is comparable
  across calls. A zero row is allowed only for a text the model cannot represent
  at all (no tokens); the store refuses to write a zero vector (``codec``), so the
  built-in embedders never return one: they map token-less text to a fixed vector.

``default_threshold`` is optional: an embedder that has one states the similarity
(on that 0..1 scale) above which a hit is usually relevant, calibrated on
paraphrase / unrelated pairs. Scales differ between models (on the same pairs the
best cut is 0.625 for ``HashingEmbedder`` and 0.70 for MiniLM, and a model whose
cosines crowd near 1 needs a higher one), so one library-wide threshold would be
wrong for all but one model.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..core.validation import check_int, is_number
from ..errors import ConfigurationError, EmbeddingError, ValidationError

__all__ = [
    "Embedder",
    "EmbeddingFunction",
    "FloatMatrix",
    "FunctionEmbedder",
    "as_embedder",
    "check_texts",
    "default_margin_of",
    "default_threshold_of",
    "l2_normalize",
    "validate_embeddings",
]

FloatMatrix = npt.NDArray[np.float32]
EmbeddingFunction = Callable[[str], Awaitable[Sequence[float]]]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension (see the module docstring).

    Implementations may also define ``default_threshold: float``, a calibrated
    similarity threshold on the 0..1 scale ``(1 + cos) / 2``, and ``default_margin``,
    a cosine distance (``ranking.Gate``); read them with ``default_threshold_of`` and
    ``default_margin_of`` since they are optional.
    """

    @property
    def dimensions(self) -> int:
        """Length of every vector ``embed`` returns."""
        ...

    @property
    def model_id(self) -> str:
        """Stable name of the vector space; vectors from two ids must never be compared."""
        ...

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts`` (a list, never a bare ``str``); returns float32
        ``(len(texts), dimensions)``, rows L2-normalised."""
        ...


def check_texts(texts: object) -> list[str]:
    """The texts an ``embed`` call was given, as a list, each checked to be a ``str``.

    A ``str`` is a ``Sequence[str]`` to the type checker, so ``embed("hello")`` would
    type-check and quietly embed five one-letter texts. Every shipped embedder calls
    this first so that mistake is an error, the same one everywhere.

    Raises:
        ValidationError: ``texts`` is a ``str`` / ``bytes`` or not iterable
            (``validation.type``), or an item is not a ``str`` (``validation.text_type``,
            ``details["index"]``).
    """
    if isinstance(texts, str | bytes | bytearray):
        raise ValidationError(
            f"embed() takes a list of texts, not a bare {type(texts).__name__}; "
            "pass [text] to embed one text",
            code="validation.type",
            details={"argument": "texts", "type": type(texts).__name__},
        )
    try:
        items: list[object] = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise ValidationError(
            f"embed() takes a list of texts, got {type(texts).__name__}",
            code="validation.type",
            details={"argument": "texts", "type": type(texts).__name__},
        ) from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValidationError(
                f"texts[{i}] is {type(text).__name__}, not str",
                code="validation.text_type",
                details={"argument": "texts", "index": i},
            )
    return cast("list[str]", items)


def l2_normalize(matrix: npt.ArrayLike) -> FloatMatrix:
    """Scale each row to unit length; all-zero rows stay zero (they have no direction)."""
    arr = np.asarray(matrix, dtype=np.float32)
    # np.linalg.norm's own arithmetic for a real array along one axis (the same floats),
    # without its dispatch: this runs for every write and every query.
    norms = np.sqrt(np.add.reduce(arr * arr, axis=-1, keepdims=True))
    # Dividing by max(norm, tiny) leaves zero rows at zero instead of producing NaN.
    return np.ascontiguousarray(arr / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def validate_embeddings(matrix: object, *, count: int, dimensions: int, model_id: str) -> FloatMatrix:
    """Check an embedder's output and return it as unit float32 rows.

    Cosine search assumes unit rows, and a NaN written to the index poisons every
    query that touches it, so outputs are checked before anything is stored.

    Args:
        matrix: what the embedder returned (array-like).
        count: number of texts that were embedded.
        dimensions: the embedder's declared dimension.
        model_id: for the error details.

    Returns:
        A C-contiguous float32 array of shape ``(count, dimensions)``, rows L2-normalised.

    Raises:
        EmbeddingError: the embedder broke its contract: wrong shape
            (``embedder.bad_shape``), NaN or infinity (``embedder.nonfinite``), or not
            numeric (``embedder.bad_type``).
    """
    try:
        arr = np.asarray(matrix, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"embedder {model_id!r} returned something that is not a numeric matrix",
            code="embedder.bad_type",
            details={"model_id": model_id},
        ) from exc
    if arr.shape != (count, dimensions):
        raise EmbeddingError(
            f"embedder {model_id!r} returned shape {arr.shape}; expected ({count}, {dimensions})",
            code="embedder.bad_shape",
            details={"model_id": model_id, "expected": [count, dimensions], "got": list(arr.shape)},
        )
    if np.count_nonzero(np.isfinite(arr)) != arr.size:  # ``.all()`` is a Python wrapper: per write and query
        bad_rows = np.flatnonzero(~np.all(np.isfinite(arr), axis=1)).tolist()
        raise EmbeddingError(
            f"embedder {model_id!r} returned NaN or infinity",
            code="embedder.nonfinite",
            details={"model_id": model_id, "rows": bad_rows[:20]},
        )
    return l2_normalize(arr)


def default_threshold_of(embedder: object) -> float | None:
    """The embedder's calibrated ``default_threshold`` if it has a valid one, else ``None``."""
    value = getattr(embedder, "default_threshold", None)
    if is_number(value) and math.isfinite(value) and 0 < value <= 1:
        return float(value)
    return None


def default_margin_of(embedder: object) -> float | None:
    """The embedder's calibrated ``default_margin`` (a cosine distance) if it has a valid one, else ``None``.

    The margin by which the nearest memory must stand out from the median of a
    re-ranked recall's KNN candidates to answer beyond the threshold (``ranking.Gate``).
    """
    value = getattr(embedder, "default_margin", None)
    if is_number(value) and math.isfinite(value) and 0 < value <= 2:
        return float(value)
    return None


class FunctionEmbedder:
    """Adapts ``async fn(text) -> list[float]`` to the ``Embedder`` protocol.

    One call per text, run concurrently with ``asyncio.gather`` but at most
    ``max_concurrency`` at a time: a function usually wraps a remote API, and
    firing a thousand requests at once would only earn rate-limit errors. Rows
    are validated and L2-normalised, so the function may return raw vectors.

    Args:
        fn: the async function.
        dimensions: length of the vectors ``fn`` returns.
        model_id: name of the vector space (defaults to ``function:<qualname>``).
        max_concurrency: calls in flight at once.

    Raises:
        ConfigurationError: ``dimensions`` or ``max_concurrency`` not a positive integer,
            or ``fn`` not callable.
    """

    def __init__(
        self,
        fn: EmbeddingFunction,
        dimensions: int,
        model_id: str | None = None,
        *,
        max_concurrency: int = 32,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError("fn must be an async callable", code="configuration.embedder")
        _check_positive_int("dimensions", dimensions)
        _check_positive_int("max_concurrency", max_concurrency)
        self._fn = fn
        self._dimensions = dimensions
        self._model_id = model_id or f"function:{getattr(fn, '__qualname__', type(fn).__qualname__)}"
        self._max_concurrency = max_concurrency

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"FunctionEmbedder(model_id={self._model_id!r}, dimensions={self._dimensions})"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Call the function once per text and stack the results (see the class docstring).

        Raises:
            ValidationError: ``texts`` is a bare ``str`` or holds a non-string.
            ConfigurationError: the function returned a vector of another length than
                ``dimensions`` (``configuration.dimensions``; a ``ValueError``, as the
                reference's "embedding dimension mismatch").
            EmbeddingError: the function returned something that is not a vector, NaN
                or infinity.
        """
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        gate = asyncio.Semaphore(self._max_concurrency)

        async def one(text: str) -> Sequence[float]:
            async with gate:
                result = self._fn(text)
                if not inspect.isawaitable(result):
                    raise ConfigurationError(
                        f"embedding function {self._model_id!r} is not async (it returned "
                        f"{type(result).__name__}, not an awaitable)",
                        code="configuration.embedder",
                    )
                return await result

        rows = await asyncio.gather(*(one(t) for t in texts))
        for i, row in enumerate(rows):
            if isinstance(row, str | bytes) or not hasattr(row, "__len__"):
                raise EmbeddingError(
                    f"embedding function {self._model_id!r} returned {type(row).__name__} for text {i}, "
                    "not a vector",
                    code="embedder.bad_type",
                    details={"model_id": self._model_id, "index": i},
                )
            if len(row) != self._dimensions:
                raise ConfigurationError(
                    f"embedding dimension mismatch: embedding function {self._model_id!r} returned "
                    f"{len(row)} values for text {i}, expected {self._dimensions}",
                    code="configuration.dimensions",
                    details={
                        "model_id": self._model_id,
                        "index": i,
                        "expected": self._dimensions,
                        "got": len(row),
                    },
                )
        return validate_embeddings(
            rows, count=len(texts), dimensions=self._dimensions, model_id=self._model_id
        )


def as_embedder(obj: object, *, dimensions: int | None = None, model_id: str | None = None) -> Embedder:
    """Return ``obj`` as an ``Embedder``: as is if it already is one, else wrapped.

    Args:
        obj: an ``Embedder``, or an async callable ``fn(text) -> list[float]``.
        dimensions: required for a callable; for an embedder, checked against its own.
        model_id: for a callable, the name of its vector space.

    Raises:
        ConfigurationError: ``obj`` is neither, a callable came without ``dimensions``, or
            ``dimensions`` contradicts the embedder's.
    """
    if _looks_like_embedder(obj):
        emb: Embedder = obj  # type: ignore[assignment]  # structural check done above
        if dimensions is not None and dimensions != emb.dimensions:
            raise ConfigurationError(
                f"embedder {emb.model_id!r} makes {emb.dimensions}-d vectors, not {dimensions}",
                code="configuration.dimensions",
                details={"model_id": emb.model_id, "expected": dimensions, "got": emb.dimensions},
            )
        return emb
    if callable(obj):
        if dimensions is None:
            raise ConfigurationError(
                "an embedding function needs dimensions= (its vector length)",
                code="configuration.dimensions",
                details={"argument": "dimensions"},
            )
        return FunctionEmbedder(obj, dimensions, model_id)
    raise ConfigurationError(
        f"expected an Embedder or an async callable, got {type(obj).__name__}",
        code="configuration.embedder",
        details={"type": type(obj).__name__},
    )


def _looks_like_embedder(obj: object) -> bool:
    # isinstance(obj, Embedder) on 3.11 evaluates the properties, and an embedder whose
    # dimension is not known yet may raise there; a static lookup checks presence only.
    missing = object()
    return not isinstance(obj, type) and all(
        inspect.getattr_static(obj, name, missing) is not missing
        for name in ("dimensions", "model_id", "embed")
    )


def _check_positive_int(name: str, value: object) -> None:
    check_int(value, name, minimum=1, setting=True)
