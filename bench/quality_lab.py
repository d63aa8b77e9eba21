"""Issue 28 lab: LoCoMo candidates and ranking features, offline, from one captured run.

``bench/quality.py`` asks every question through a live store. To compare many
rankings, embeddings and pools without a server per variant, this lab:

1. **captures** once (one embedded server, the shipped ONNX MiniLM, the store's
   defaults): every LoCoMo turn stored as ``bench/quality.py`` stores it, and per
   question, asked in its own conversation's scope and in the next one's (off-topic),
   the full-text hits the store's recall adds (the engine's BM25STD order, top 200,
   read from the replies ``TextCandidates.learn`` returns), the KNN distances the
   gate sees, and the hits ``recall_by_vector`` returns with the defaults and with
   the threshold off (to check the offline replay against);
2. **replays** offline: the KNN 50 by exact cosine in numpy (the engine's KNN top 10
   equals it for every question, ``bench/results/quality.md``), the captured text
   hits, ``HybridRanker`` + ``Gate`` + the composite score as ``core.ranking.rank``
   runs them: the replay must give the captured figures before anything else is
   trusted (``python bench/quality_lab.py verify``);
3. computes per candidate the features of ``betterdb_memory.core.learned_rank``
   (the same code the package would run), for the experiments in
   ``bench/quality_lab_experiments.py`` and the fit in ``bench/train_learned_rank.py``.

Vectors and captures live under ``--cache`` (default ``$TMPDIR/quality-cache/lab``),
never in the repository: they are derived from LoCoMo (CC BY-NC 4.0).

    .venv/bin/python bench/quality_lab.py capture   # ~2 min once (embeds, stores, asks)
    .venv/bin/python bench/quality_lab.py verify    # replay == capture?
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import pickle
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "quality-cache" / "lab"
KNN = 50
TEXT = 50
TEXT_CAPTURE = 200
TOP = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

FloatMatrix = npt.NDArray[np.float32]


# -- data -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    conv: str
    dia_id: str
    speaker: str
    text: str  # the turn's own words
    caption: str  # a shared image's caption ("" if none)
    date: str  # the session's date ("1:56 pm on 8 May, 2023")
    session: int
    position: int  # index of the turn in its conversation

    @property
    def content(self) -> str:
        """What ``bench/quality.py`` stores: speaker, words, and the caption of a shared image."""
        out = f"{self.speaker}: {self.text}"
        return out + f" [shares {self.caption}]" if self.caption else out

    @property
    def key(self) -> str:
        return f"{self.conv}_{self.dia_id.replace(':', '_')}"


@dataclass(frozen=True, slots=True)
class Question:
    conv: str
    text: str
    evidence: frozenset[str]  # turn keys
    category: int


@dataclass(slots=True)
class Data:
    turns: list[Turn]
    questions: list[Question]
    by_conv: dict[str, list[int]] = field(default_factory=dict)  # conv -> turn indices, in order
    index: dict[str, int] = field(default_factory=dict)  # turn key -> turn index

    def __post_init__(self) -> None:
        for i, t in enumerate(self.turns):
            self.by_conv.setdefault(t.conv, []).append(i)
            self.index[t.key] = i

    @property
    def convs(self) -> list[str]:
        return list(self.by_conv)

    def other(self, conv: str) -> str:
        """The conversation whose scope a question is asked in as an off-topic probe."""
        cs = self.convs
        return cs[(cs.index(conv) + 1) % len(cs)]


def load(path: Path = DEFAULT_DATA, limit: int | None = None) -> Data:
    """Turns and the answerable questions (categories 1-4) of LoCoMo, as ``bench/quality.py`` reads them."""
    raw = json.loads(path.read_text("utf-8"))[:limit]
    turns: list[Turn] = []
    questions: list[Question] = []
    for sample in raw:
        conv, sessions = sample["sample_id"], sample["conversation"]
        n, pos = 1, 0
        while f"session_{n}" in sessions or f"session_{n}_date_time" in sessions:
            date = sessions.get(f"session_{n}_date_time", "")
            for t in sessions.get(f"session_{n}") or []:
                turns.append(
                    Turn(
                        conv, t["dia_id"], t["speaker"], t["text"], t.get("blip_caption") or "", date, n, pos
                    )
                )
                pos += 1
            n += 1
        for qa in sample["qa"]:
            ids = re.findall(r"D:?(\d+):(\d+)", " ".join(qa.get("evidence", [])))
            if qa["category"] in CATEGORIES and ids:
                keys = frozenset(f"{conv}_D{a}_{b}" for a, b in ids)
                questions.append(Question(conv, qa["question"], keys, qa["category"]))
    return Data(turns, questions)


# -- embeddings -----------------------------------------------------------------------------


def embed_cached(
    cache: Path, name: str, model_id: str, texts: Sequence[str], embed: Callable[[list[str]], FloatMatrix]
) -> FloatMatrix:
    """Vectors of ``texts`` (rows unit length), computed once per (model, texts) and kept under ``cache``."""
    digest = hashlib.sha256("\x00".join([model_id, *texts]).encode()).hexdigest()[:16]
    path = cache / f"emb-{name}-{digest}.npy"
    if path.exists():
        out: FloatMatrix = np.load(path)
        return out
    started = time.perf_counter()
    parts = []
    for i in range(0, len(texts), 256):
        parts.append(embed(list(texts[i : i + 256])))
        print(f"  {name}: {min(i + 256, len(texts))}/{len(texts)}", file=sys.stderr)
    out = np.concatenate(parts).astype(np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    print(f"  {name}: {len(texts)} texts in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return out


def onnx_embed(max_length: int = 256) -> tuple[str, Callable[[list[str]], FloatMatrix]]:
    from betterdb_memory.embedders import OnnxEmbedder

    emb = OnnxEmbedder(batch_size=64, max_length=max_length)

    def run(texts: list[str]) -> FloatMatrix:
        return asyncio.run(emb.embed(texts))

    return f"{emb.model_id}@{max_length}", run


# -- capture (one embedded server) ------------------------------------------------------------


@dataclass(slots=True)
class Asked:
    """What one recall of one question in one scope saw and returned."""

    text_hits: list[str]  # turn keys of the full-text hits, BM25STD order (top TEXT_CAPTURE)
    knn: list[tuple[str, float]]  # (turn key, distance) of the KNN candidates, nearest first
    pool: list[str]  # the candidates ``rank`` received with the defaults (KNN then text-only)
    default_hits: list[str]  # recall_by_vector(k=10) with the defaults
    off_hits: list[str]  # ... with threshold=2


@dataclass(slots=True)
class Capture:
    threshold: float
    margin: float | None
    in_scope: list[Asked]
    off_topic: list[Asked]
    recall_ms: list[float]


async def _capture(data: Data, tvecs: FloatMatrix, qvecs: FloatMatrix) -> Capture:
    import valkey.asyncio as avalkey

    import betterdb_memory.tiers.recall as recall_mod
    from betterdb_memory import MemoryStore
    from betterdb_memory.core.replies import parse_search_reply
    from betterdb_memory.core.time_recall import time_plan
    from betterdb_memory.embedders import OnnxEmbedder
    from betterdb_memory.server import EmbeddedServer
    from betterdb_memory.tiers.hybrid import TextCandidates

    seen: dict[str, Any] = {}
    real_rank = recall_mod.rank
    real_learn = TextCandidates.learn

    def spy_rank(candidates: Any, **kw: Any) -> Any:
        seen["pool"] = [item.id for item, _ in candidates]
        seen["knn_n"] = len(kw.get("knn_distances") or [])
        return real_rank(candidates, **kw)

    def spy_learn(self: Any, request: Any, replies: Any) -> Any:
        out = real_learn(self, request, replies)
        seen["text"] = [self._rt.keys.memory_id_of(h.key) for r in out for h in parse_search_reply(r).hits]
        return out

    recall_mod.rank = spy_rank  # type: ignore[assignment]
    TextCandidates.learn = spy_learn  # type: ignore[method-assign]
    server = EmbeddedServer(persistence=False)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url, decode_responses=False)
    name = f"lab-{uuid.uuid4().hex[:8]}"
    embedder = OnnxEmbedder()
    try:
        store = MemoryStore(client=client, name=name, embedder=embedder, dedup=False, discovery=False)
        wide = MemoryStore(
            client=client,
            name=name,
            embedder=embedder,
            dedup=False,
            discovery=False,
            text_candidates=TEXT_CAPTURE,
        )
        await store.ensure_index()
        for i in range(0, len(data.turns), 500):
            batch = data.turns[i : i + 500]
            await store.remember_many(
                [
                    {"id": t.key, "content": t.content, "thread_id": t.conv, "vector": tvecs[i + j]}
                    for j, t in enumerate(batch)
                ]
            )
        rt = store._rt
        threshold, margin = store.default_threshold, rt.settings.margin
        in_scope: list[Asked] = []
        off_topic: list[Asked] = []
        recall_ms: list[float] = []
        for qi, q in enumerate(data.questions):
            for scope, out in ((q.conv, in_scope), (data.other(q.conv), off_topic)):
                seen.clear()
                t0 = time.perf_counter()
                hits = await store.recall_by_vector(
                    qvecs[qi], query=q.text, k=TOP, thread_id=scope, reinforce=False
                )
                recall_ms.append((time.perf_counter() - t0) * 1000)
                pool, knn_n = seen.get("pool", []), seen.get("knn_n", 0)
                off = await store.recall_by_vector(
                    qvecs[qi], query=q.text, k=TOP, threshold=2.0, thread_id=scope, reinforce=False
                )
                seen.pop("text", None)
                knn = await store.search_candidates(qvecs[qi], store_filter(scope), KNN)
                await wide.recall_by_vector(
                    qvecs[qi], query=q.text, k=TOP, threshold=2.0, thread_id=scope, reinforce=False
                )
                out.append(
                    Asked(
                        text_hits=list(seen.get("text", [])),
                        knn=[(it.id, d) for it, d in knn],
                        pool=pool,
                        default_hits=[h.item.id for h in hits],
                        off_hits=[h.item.id for h in off],
                    )
                )
                # A question with an exact time window asks its window's query beside a smaller KNN.
                assert knn_n == len(knn) or time_plan(q.text).filters, (knn_n, len(knn))
            if qi % 200 == 199:
                print(f"  asked {qi + 1}/{len(data.questions)}", file=sys.stderr)
        await store.close()
        await wide.close()
        return Capture(threshold, margin, in_scope, off_topic, recall_ms)
    finally:
        recall_mod.rank = real_rank  # type: ignore[assignment]
        TextCandidates.learn = real_learn  # type: ignore[method-assign]
        await client.aclose()
        await asyncio.to_thread(server.stop)


def store_filter(thread_id: str) -> Any:
    from betterdb_memory import Scope
    from betterdb_memory.core.query import MemoryFilter

    return MemoryFilter(scope=Scope(thread_id=thread_id))


# -- the lab's state ------------------------------------------------------------------------


@dataclass(slots=True)
class Lab:
    data: Data
    tvecs: FloatMatrix  # shipped MiniLM, stored content (what the store holds today)
    qvecs: FloatMatrix
    capture: Capture
    cache: Path

    def vectors(self, name: str, texts: Sequence[str], max_length: int = 256) -> FloatMatrix:
        return onnx_vectors(self.cache, name, texts, max_length)


def onnx_vectors(cache: Path, name: str, texts: Sequence[str], max_length: int = 256) -> FloatMatrix:
    """Shipped MiniLM vectors of ``texts`` (cached)."""
    from betterdb_memory.embedders.onnx import MODEL_ID

    digest = hashlib.sha256("\x00".join([f"{MODEL_ID}@{max_length}", *texts]).encode()).hexdigest()[:16]
    if (cache / f"emb-{name}-{digest}.npy").exists():
        return np.load(cache / f"emb-{name}-{digest}.npy")  # type: ignore[no-any-return]
    model_id, run = onnx_embed(max_length)
    return embed_cached(cache, name, model_id, texts, run)


class _Unpickler(pickle.Unpickler):
    """Reads a capture written by ``python bench/quality_lab.py capture`` (classes then in ``__main__``)."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(__name__ if module == "__main__" else module, name)


def open_lab(data_path: Path = DEFAULT_DATA, cache: Path = DEFAULT_CACHE, *, capture: bool = False) -> Lab:
    data = load(data_path)
    tvecs = onnx_vectors(cache, "turns", [t.content for t in data.turns])
    qvecs = onnx_vectors(cache, "questions", [q.text for q in data.questions])
    path = cache / "capture.pkl"
    if capture or not path.exists():
        cap = asyncio.run(_capture(data, tvecs, qvecs))
        path.write_bytes(pickle.dumps(cap))
    else:
        cap = _Unpickler(path.open("rb")).load()
    return Lab(data, tvecs, qvecs, cap, cache)


# -- metrics ---------------------------------------------------------------------------------


def first_hit(ranked: Sequence[str], evidence: frozenset[str]) -> int | None:
    return next((i for i, k in enumerate(ranked[:TOP]) if k in evidence), None)


@dataclass(slots=True)
class Scores:
    """First-hit ranks over the questions (None: no evidence in the top 10)."""

    ranks: list[int | None]
    cats: list[int]

    def hit(self, k: int, cat: int | None = None) -> float:
        sel = [r for r, c in zip(self.ranks, self.cats, strict=True) if cat is None or c == cat]
        return sum(r is not None and r < k for r in sel) / max(len(sel), 1)

    def mrr(self, cat: int | None = None) -> float:
        sel = [r for r, c in zip(self.ranks, self.cats, strict=True) if cat is None or c == cat]
        return sum(1 / (r + 1) for r in sel if r is not None) / max(len(sel), 1)

    def row(self, name: str) -> str:
        cells = [f"{self.hit(1):.3f}", f"{self.hit(5):.3f}", f"{self.hit(10):.3f}", f"{self.mrr():.3f}"]
        cells += [f"{self.hit(5, c):.3f}" for c in CATEGORIES]
        return f"| {name} | " + " | ".join(cells) + " |"


HEADER = (
    "| method | hit@1 | hit@5 | hit@10 | MRR@10 | "
    + " | ".join(f"hit@5 {n}" for n in CATEGORIES.values())
    + " |\n|---|---|---|---|---|---|---|---|---|"
)


def scores(lab: Lab, rankings: Sequence[Sequence[str]]) -> Scores:
    qs = lab.data.questions
    return Scores(
        [first_hit(r, q.evidence) for r, q in zip(rankings, qs, strict=True)], [q.category for q in qs]
    )


# -- offline replay ---------------------------------------------------------------------------


@dataclass(slots=True)
class Pool:
    """One question's candidates in one scope: turn indices, cosine distances, KNN or text-only."""

    turns: list[int]
    distance: npt.NDArray[np.float64]
    knn_n: int  # the first knn_n are the KNN candidates (nearest first), the rest text-only


def pools(
    lab: Lab,
    tvecs: FloatMatrix | None = None,
    qvecs: FloatMatrix | None = None,
    *,
    knn: int = KNN,
    text: int = TEXT,
    off_topic: bool = False,
) -> list[Pool]:
    """Per question: exact KNN ``knn`` over the scope's turns with these vectors, plus the captured text hits."""
    tv = lab.tvecs if tvecs is None else tvecs
    qv = lab.qvecs if qvecs is None else qvecs
    asked = lab.capture.off_topic if off_topic else lab.capture.in_scope
    out: list[Pool] = []
    for qi, q in enumerate(lab.data.questions):
        scope = lab.data.other(q.conv) if off_topic else q.conv
        members = lab.data.by_conv[scope]
        dist = 1.0 - tv[members].astype(np.float64) @ qv[qi].astype(np.float64)
        order = np.argsort(dist, kind="stable")[:knn]
        chosen = [members[j] for j in order]
        have = set(chosen)
        extra = [lab.data.index[k] for k in asked[qi].text_hits[:text]]
        extra = [j for j in dict.fromkeys(extra) if j not in have]
        if extra:
            extra_d = 1.0 - tv[extra].astype(np.float64) @ qv[qi].astype(np.float64)
        else:
            extra_d = np.zeros(0)
        out.append(Pool(chosen + extra, np.concatenate([dist[order], extra_d]), len(chosen)))
    return out


def replay_default(lab: Lab, ps: Sequence[Pool], *, gate: bool = True) -> list[list[str]]:
    """``core.ranking.rank`` as a default re-ranked recall runs it (k=10), on these pools."""
    from betterdb_memory.core.models import MemoryItem
    from betterdb_memory.core.ranking import Gate, HybridRanker, rank
    from betterdb_memory.core.scoring import DEFAULT_HALF_LIFE_SECONDS, DEFAULT_WEIGHTS

    now = time.time()
    created = int(now * 1000)
    items = [MemoryItem(t.key, t.content, 0.5, created, created, 0) for t in lab.data.turns]
    ranker = HybridRanker()
    g = Gate(lab.capture.threshold if gate else 2.0, lab.capture.margin)
    out = []
    for qi, p in enumerate(ps):
        cands = [(items[j], float(d)) for j, d in zip(p.turns, p.distance, strict=True)]
        hits = rank(
            cands, k=TOP, threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=DEFAULT_HALF_LIFE_SECONDS,
            now=now, reranker=ranker, query=lab.data.questions[qi].text, gate=g,
            knn_distances=[float(d) for d in p.distance[: p.knn_n]],
        )  # fmt: skip
        out.append([h.item.id for h in hits])
    return out


def verify(lab: Lab) -> str:
    """The replay against the capture: pools, rankings and figures."""
    cap = lab.capture
    ps = pools(lab)
    same_pool = np.mean(
        [
            set(lab.data.turns[j].key for j in p.turns) == set(a.pool)
            for p, a in zip(ps, cap.in_scope, strict=True)
        ]
    )
    same_text = np.mean([set(a.text_hits[:TEXT]) <= set(a.pool) for a in cap.in_scope])
    live = scores(lab, [a.default_hits for a in cap.in_scope])
    live_off = scores(lab, [a.off_hits for a in cap.in_scope])
    rep = scores(lab, replay_default(lab, ps))
    rep_off = scores(lab, replay_default(lab, ps, gate=False))
    empty_live = np.mean([not a.default_hits for a in cap.off_topic])
    empty_rep = np.mean([not h for h in replay_default(lab, pools(lab, off_topic=True))])
    lines = [
        f"pools equal (as sets) for {same_pool:.3f} of questions; captured top-{TEXT} text hits inside the live pool: {same_text:.3f}",
        HEADER,
        live.row("live recall_by_vector, defaults"),
        rep.row("offline replay, defaults"),
        live_off.row("live, threshold off"),
        rep_off.row("offline replay, threshold off"),
        f"off-topic empty: live {empty_live:.3f}, replay {empty_rep:.3f}",
        f"live recall p50 {np.median(cap.recall_ms):.2f} ms",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["capture", "verify"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    if REPO in args.cache.resolve().parents:
        print("--cache must be outside the repository (vectors derived from LoCoMo)", file=sys.stderr)
        return 2
    if not args.data.exists():
        print(f"skipped: no LoCoMo data at {args.data}", file=sys.stderr)
        return 0
    lab = open_lab(args.data, args.cache, capture=args.command == "capture")
    print(verify(lab))
    return 0


if __name__ == "__main__":
    sys.exit(main())
