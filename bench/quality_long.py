"""Long memories: all of a memory's tokens (windows pooled into one vector) vs its first 256.

``OnnxEmbedder`` (MiniLM, trained at 256 tokens) used to keep a text's first 256
tokens: a long answer or a pasted document was searchable by meaning only through
its opening. No LoCoMo turn passes 256 tokens (the longest is 118), so this bench
stores each SESSION of a conversation as one memory ("Speaker: words" turns joined
by newlines, median ~690 tokens, all over 256), scoped to its conversation, with
the session's date as ``valid_from``. A question hits a session memory holding one
of its evidence turns. Questions are split by where their evidence sits: "beyond"
(every evidence turn starts past the first window's 254 content tokens: truncation
cannot see it) and "within" (the rest).

Each way of making the memory's one vector is measured twice: dense alone (cosine
over the conversation's sessions, numpy) and through ``recall()`` on one embedded
server with the store's defaults (``LearnedRanker``, full-text candidates, the
calibrated threshold), with the threshold off, and off-topic (each question asked
in the next conversation's scope: the share that comes back empty). Also: write
cost (ms per long memory and windows/s, ``OnnxEmbedder`` pool vs truncate on this
machine), and short memories (LoCoMo turns) embedded by both modes compared bit
for bit.

    /work/main/.venv/bin/python bench/quality_long.py                     # ~20 min cold, ~3 min cached
    /work/main/.venv/bin/python bench/quality_long.py --conversations 2   # smoke run

The data (CC BY-NC 4.0) is read from ``--data`` and never copied into the
repository; window vectors are cached under ``--cache`` (outside it).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import hashlib
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import valkey.asyncio as avalkey
from _harness import cpu_count, cpu_model
from quality import DEFAULT_DATA, REPO, Question, Turn, load

from betterdb_memory import MemoryStore
from betterdb_memory.embedders import OnnxEmbedder
from betterdb_memory.embedders.base import l2_normalize
from betterdb_memory.embedders.onnx_windows import split_ids
from betterdb_memory.server import EmbeddedServer

DEFAULT_OUT = REPO / "bench" / "results" / "long-memories.md"
MAX_LENGTH = 256
WIDTH = MAX_LENGTH - 2
TOP = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

FloatMatrix = npt.NDArray[np.float32]


# -- documents ------------------------------------------------------------------------------


@dataclass(slots=True)
class Doc:
    conv: str
    session: str  # "D3"
    text: str
    valid_from: int | None
    ids: list[int] = field(default_factory=list)  # [CLS] content [SEP], untruncated
    starts: dict[str, int] = field(default_factory=dict)  # dia_id -> content-token offset of the turn


def documents(turns: Sequence[Turn]) -> list[Doc]:
    """One memory per (conversation, session): its turns joined by newlines, in order."""
    docs: dict[tuple[str, str], Doc] = {}
    offsets: dict[tuple[str, str], dict[str, int]] = {}
    for t in turns:
        session = t.dia_id.split(":")[0]
        doc = docs.setdefault((t.conv, session), Doc(t.conv, session, "", t.valid_from))
        chars = offsets.setdefault((t.conv, session), {})
        if doc.text:
            doc.text += "\n"
        chars[t.dia_id] = len(doc.text)
        doc.text += t.text
    out = list(docs.values())
    for doc in out:
        doc.starts = offsets[(doc.conv, doc.session)]  # char offsets until tokenised
    return out


def tokenise(docs: Sequence[Doc], tokenizer: Any) -> None:
    """Fill each doc's ids and turn it's turn char offsets into content-token offsets."""
    for doc, enc in zip(docs, tokenizer.encode_batch([d.text for d in docs]), strict=True):
        doc.ids = list(enc.ids)
        content_starts = [start for start, _ in enc.offsets[1:-1]]
        doc.starts = {dia: bisect.bisect_left(content_starts, c) for dia, c in doc.starts.items()}


# -- window layouts and poolings ----------------------------------------------------------------


def stride_windows(ids: Sequence[int], overlap: int) -> list[list[int]]:
    """Fixed stride from token 0; the last window holds what is left (may be short)."""
    if len(ids) <= MAX_LENGTH:
        return [list(ids)]
    cls, content, sep = ids[0], ids[1:-1], ids[-1]
    out = []
    for start in range(0, len(content), WIDTH - overlap):
        out.append([cls, *content[start : start + WIDTH], sep])
        if start + WIDTH >= len(content):
            break
    return out


LAYOUTS: dict[str, Callable[[Sequence[int]], list[list[int]]]] = {
    "spread-0": lambda ids: split_ids(ids, MAX_LENGTH, 0),
    "spread-32": lambda ids: split_ids(ids, MAX_LENGTH, 32),
    "spread-64": lambda ids: split_ids(ids, MAX_LENGTH, 64),
    "stride-0": lambda ids: stride_windows(ids, 0),
}


def mean_pool(w: FloatMatrix, lengths: Sequence[int]) -> FloatMatrix:
    return l2_normalize(w.mean(axis=0))


def weighted_pool(w: FloatMatrix, lengths: Sequence[int]) -> FloatMatrix:
    weights = np.asarray(lengths, dtype=np.float32)[:, None]
    return l2_normalize((w * weights).sum(axis=0) / weights.sum())


def max_pool(w: FloatMatrix, lengths: Sequence[int]) -> FloatMatrix:
    return l2_normalize(w.max(axis=0))


def first_window(w: FloatMatrix, lengths: Sequence[int]) -> FloatMatrix:
    return np.ascontiguousarray(w[0])


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    layout: str
    pool: Callable[[FloatMatrix, Sequence[int]], FloatMatrix]


VARIANTS = (
    Variant('first 256 tokens (long_text="truncate", the default)', "spread-32", first_window),
    Variant('mean, spread windows, overlap >= 32 (long_text="pool")', "spread-32", mean_pool),
    Variant("mean, spread windows, overlap >= 0", "spread-0", mean_pool),
    Variant("mean, spread windows, overlap >= 64", "spread-64", mean_pool),
    Variant("max-pool, spread windows, overlap >= 32", "spread-32", max_pool),
    Variant("mean, fixed stride, short last window", "stride-0", mean_pool),
    Variant("weighted by window length, fixed stride", "stride-0", weighted_pool),
)
BEST_WINDOW = "best window (several vectors per memory; dense only, not shippable as is)"


# -- window vectors (cached) ----------------------------------------------------------------


def _key(window: Sequence[int]) -> str:
    return hashlib.sha1(np.asarray(window, dtype=np.int32).tobytes()).hexdigest()


def window_vectors(
    windows: Sequence[Sequence[int]], embedder: OnnxEmbedder, cache: Path
) -> dict[str, FloatMatrix]:
    """A vector per distinct window, from ``cache`` (an .npz keyed by the window's ids) when it has it."""
    known: dict[str, FloatMatrix] = {}
    if cache.exists():
        with np.load(cache) as z:
            known = {k: z[k] for k in z.files}
    todo = {_key(w): list(w) for w in windows if _key(w) not in known}
    items = sorted(todo.items(), key=lambda kv: len(kv[1]))
    started, done = time.perf_counter(), 0
    for i in range(0, len(items), 16):
        batch = items[i : i + 16]
        vecs = embedder._run([w for _, w in batch])
        known.update({k: v for (k, _), v in zip(batch, vecs, strict=True)})
        done += len(batch)
        if (i // 16) % 8 == 7 or i + 16 >= len(items):
            rate = done / (time.perf_counter() - started)
            print(f"  windows {done}/{len(items)} ({rate:.1f}/s)", file=sys.stderr)
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cache, **known)
    return known


# -- ranking --------------------------------------------------------------------------------


@dataclass(slots=True)
class Ranks:
    ranks: list[int | None] = field(default_factory=list)

    def hit(self, k: int, sel: Sequence[int]) -> float:
        return sum(1 for i in sel if (r := self.ranks[i]) is not None and r < k) / max(len(sel), 1)

    def mrr(self, sel: Sequence[int]) -> float:
        return sum(1 / (r + 1) for i in sel if (r := self.ranks[i]) is not None and r < TOP) / max(
            len(sel), 1
        )


def first_hit(order: Sequence[str], want: set[str]) -> int | None:
    return next((i for i, s in enumerate(order) if s in want), None)


def wanted(q: Question) -> set[str]:
    return {e.split(":")[0] for e in q.evidence}


def beyond(q: Question, docs: dict[tuple[str, str], Doc]) -> bool:
    """Every evidence turn starts past the first window (truncation cannot see any of them)."""
    starts = [docs[(q.conv, e.split(":")[0])].starts.get(e) for e in q.evidence]
    known = [s for s in starts if s is not None]
    return bool(known) and all(s >= WIDTH for s in known)


class QueryCache(OnnxEmbedder):
    """The shipped embedder (same model id, so the store's defaults) with questions embedded once."""

    def __init__(self, known: dict[str, FloatMatrix]) -> None:
        super().__init__(long_text="pool")  # questions are short: both modes give the same bits
        self._known = known

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        missing = [t for t in texts if t not in self._known]
        if missing:
            for t, v in zip(missing, await super().embed(missing), strict=True):
                self._known[t] = v
        return np.vstack([self._known[t] for t in texts]) if texts else await super().embed([])


@dataclass(slots=True)
class ApiResult:
    default: Ranks = field(default_factory=Ranks)
    off: Ranks = field(default_factory=Ranks)
    empty: int = 0
    opened: int = 0  # questions the default recall answered at all (the gate opened)
    ms: list[float] = field(default_factory=list)


async def through_recall(
    client: Any,
    embedder: QueryCache,
    docs: Sequence[Doc],
    vectors: FloatMatrix,
    questions: Sequence[Question],
) -> ApiResult:
    """One store holding the session memories with ``vectors``; every question through ``recall()``."""
    store = MemoryStore(
        client=client, name=f"long-{uuid.uuid4().hex[:8]}", embedder=embedder, dedup=False, discovery=False
    )
    await store.ensure_index()
    await store.remember_many(
        [
            {
                "content": d.text,
                "thread_id": d.conv,
                "id": f"{d.conv}-{int(d.session[1:]):03d}",
                "metadata": {"session": d.session},
                "vector": vectors[i],
                "valid_from": d.valid_from,
            }
            for i, d in enumerate(docs)
        ]
    )
    convs = sorted({q.conv for q in questions})
    other = {c: convs[(i + 1) % len(convs)] for i, c in enumerate(convs)}
    out = ApiResult()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the near-miss warning: expected here
            for q in questions:
                t0 = time.perf_counter()
                hits = await store.recall(q.text, k=TOP, thread_id=q.conv, reinforce=False)
                out.ms.append((time.perf_counter() - t0) * 1000)
                out.opened += bool(hits)
                out.default.ranks.append(
                    first_hit([str(h.item.metadata["session"]) for h in hits], wanted(q))
                )
                hits = await store.recall(q.text, k=TOP, threshold=2.0, thread_id=q.conv, reinforce=False)
                out.off.ranks.append(first_hit([str(h.item.metadata["session"]) for h in hits], wanted(q)))
                stray = await store.recall(q.text, k=TOP, thread_id=other[q.conv], reinforce=False)
                out.empty += not stray
    finally:
        await store.close()
    return out


# -- write cost and short memories -------------------------------------------------------------


async def write_cost(long_texts: Sequence[str], short_texts: Sequence[str], rounds: int) -> list[str]:
    """ms per long memory (one ``embed([text])`` call each) and windows/s, pool vs truncate, interleaved."""
    pool, trunc = OnnxEmbedder(long_text="pool"), OnnxEmbedder(long_text="truncate")
    await pool.embed(["warm up"]), await trunc.embed(["warm up"])
    per: dict[str, list[float]] = {"pool": [], "truncate": []}
    for _ in range(rounds):
        for text in long_texts:
            for name, emb in (("pool", pool), ("truncate", trunc)):
                t0 = time.perf_counter()
                await emb.embed([text])
                per[name].append((time.perf_counter() - t0) * 1000)
    tok = pool._tokenizer
    n_windows = [len(split_ids(e.ids, MAX_LENGTH, 32)) for e in tok.encode_batch(list(long_texts))]
    lines = [
        f"Write cost: {len(long_texts)} session memories (windows per memory: median "
        f"{statistics.median(n_windows):.0f}, max {max(n_windows)}), each embedded alone "
        f"(`embed([text])`, as `remember` does), {rounds} rounds, pool and truncate interleaved; "
        f"{cpu_count()} cores ({cpu_model()}), shared with other work (load varies: compare the rows, "
        "not the absolute figures).",
        "",
        "| `long_text` | ms per long memory (p50) | p90 | model runs per memory | windows embedded per second |",
        "|---|---|---|---|---|",
    ]
    for name in ("truncate", "pool"):
        ms = per[name]
        runs = 1.0 if name == "truncate" else statistics.mean(n_windows)
        wps = runs * len(ms) / (sum(ms) / 1000)
        lines.append(
            f"| `{name}` | {statistics.median(ms):.0f} | {np.percentile(ms, 90):.0f} | {runs:.2f} | {wps:.1f} |"
        )
    # Short memories: both modes, one call over the same texts, compared bit for bit.
    t0 = time.perf_counter()
    a = await pool.embed(list(short_texts))
    t_pool = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = await trunc.embed(list(short_texts))
    t_trunc = time.perf_counter() - t0
    same = int(np.all(a == b, axis=1).sum())
    lines += [
        "",
        f"Short memories: {len(short_texts)} LoCoMo turns (all under 256 tokens) embedded in one call by each "
        f"mode: {same}/{len(short_texts)} vectors identical bit for bit; {len(short_texts) / t_pool:.1f} "
        f"texts/s pooled, {len(short_texts) / t_trunc:.1f} texts/s truncated.",
    ]
    return lines


# -- the run ----------------------------------------------------------------------------------


def verdict(
    api: dict[str, ApiResult], dense: dict[str, Ranks], far: list[int], every: list[int]
) -> list[str]:
    """The decision in three lines: truncate (the default) vs ``long_text="pool"``."""
    t, p = VARIANTS[0].name, VARIANTS[1].name
    return [
        "## Verdict",
        "",
        f'`long_text="pool"` ranks long memories better by meaning: dense alone hit@5 '
        f"{dense[t].hit(5, every):.3f} -> {dense[p].hit(5, every):.3f} (beyond the first window "
        f"{dense[t].hit(5, far):.3f} -> {dense[p].hit(5, far):.3f}); through `recall()` with the threshold off "
        f"{api[t].off.hit(5, every):.3f} -> {api[p].off.hit(5, every):.3f}, MRR@10 {api[t].off.mrr(every):.3f} -> "
        f"{api[p].off.mrr(every):.3f}. With the store's defaults it LOSES: hit@5 {api[t].default.hit(5, every):.3f} "
        f"-> {api[p].default.hit(5, every):.3f}, MRR@10 {api[t].default.mrr(every):.3f} -> "
        f"{api[p].default.mrr(every):.3f}, because the threshold's gate (calibrated on short memories) answers "
        f"{api[t].opened / len(every):.3f} -> {api[p].opened / len(every):.3f} of the questions: a pooled vector "
        'is the average of its windows, farther from a question about one passage. Hence `"pool"` is an '
        "opt-in (pair it with a threshold chosen for long memories) and truncation stays the default.",
        "",
    ]


async def main_async(args: argparse.Namespace) -> str:
    wall = time.perf_counter()
    turns, questions = load(args.data, args.conversations)
    docs = documents(turns)
    embedder = OnnxEmbedder(long_text="truncate")
    await embedder.embed([""])  # load
    tokenizer = embedder._tokenizer
    tokenizer.no_truncation()  # this instance tokenises documents only from here on
    tokenise(docs, tokenizer)
    by_key = {(d.conv, d.session): d for d in docs}
    questions = [q for q in questions if all((q.conv, e.split(":")[0]) in by_key for e in q.evidence)]
    print(f"{len(docs)} session memories, {len(questions)} questions", file=sys.stderr)

    layouts = {name: [fn(d.ids) for d in docs] for name, fn in LAYOUTS.items()}
    every = [w for ws in layouts.values() for doc_ws in ws for w in doc_ws]
    known = window_vectors(every, embedder, args.cache / "long-windows.npz")

    def doc_windows(layout: str, i: int) -> tuple[FloatMatrix, list[int]]:
        ws = layouts[layout][i]
        return np.vstack([known[_key(w)] for w in ws]), [len(w) for w in ws]

    vectors = {
        v.name: np.vstack([v.pool(*doc_windows(v.layout, i)) for i in range(len(docs))]) for v in VARIANTS
    }
    qtexts = [q.text for q in questions]
    qcache: dict[str, FloatMatrix] = {}
    query_embedder = QueryCache(qcache)
    qvecs = await query_embedder.embed(qtexts)

    far = [i for i, q in enumerate(questions) if beyond(q, by_key)]
    near = [i for i in range(len(questions)) if i not in set(far)]
    every_q = list(range(len(questions)))

    # Dense alone: sessions of the question's conversation by cosine.
    members: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        members.setdefault(d.conv, []).append(i)
    dense: dict[str, Ranks] = {name: Ranks() for name in [*vectors, BEST_WINDOW]}
    best = [doc_windows("spread-32", i)[0] for i in range(len(docs))]
    for qi, q in enumerate(questions):
        mine = members[q.conv]
        want = wanted(q)
        scores = {name: vectors[name][mine] @ qvecs[qi] for name in vectors}
        scores[BEST_WINDOW] = np.array([float((best[i] @ qvecs[qi]).max()) for i in mine])
        for name, s in scores.items():
            order = [docs[mine[j]].session for j in np.argsort(-s, kind="stable")]
            dense[name].ranks.append(first_hit(order, want))

    # Through recall(), one store per variant on one server.
    api: dict[str, ApiResult] = {}
    server = EmbeddedServer(persistence=False)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url, decode_responses=False)
    try:
        for v in VARIANTS:
            print(f"recall(): {v.name}", file=sys.stderr)
            api[v.name] = await through_recall(client, query_embedder, docs, vectors[v.name], questions)
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)

    lengths = np.array([len(d.ids) for d in docs])
    n_windows = [len(ws) for ws in layouts["spread-32"]]
    cats = [q.category for q in questions]
    lines = [
        "# Long memories: all of a memory vs its first 256 tokens",
        "",
        f"`bench/quality_long.py`, LoCoMo ({args.data.name}, CC BY-NC 4.0, read in place), "
        f"{len({d.conv for d in docs})} conversations. Each session is stored as ONE memory (its turns, "
        f'"Speaker: words", joined by newlines; `valid_from` = the session\'s date): {len(docs)} memories, '
        f"tokens per memory median {np.median(lengths):.0f}, max {lengths.max()}, share over 256 "
        f"{np.mean(lengths > MAX_LENGTH):.2f}; {sum(n_windows)} windows of 256 tokens at overlap >= 32 "
        f"({np.mean(n_windows):.2f} per memory). {len(questions)} questions (categories 1-4); a hit is a session "
        f"holding an evidence turn. **beyond**: every evidence turn starts past the first {WIDTH} content "
        f"tokens ({len(far)} questions: truncation cannot see the answer); **within**: the rest ({len(near)}).",
        "",
        *verdict(api, dense, far, every_q),
        "## Through `recall()` (store defaults: `LearnedRanker`, full-text candidates, calibrated threshold)",
        "",
        "| memory vector | hit@1 | hit@5 | MRR@10 | hit@5 beyond | MRR beyond | hit@5 within "
        "| answered (gate open) | off-topic empty | p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in api.items():
        lines.append(
            f"| {name} | {r.default.hit(1, every_q):.3f} | {r.default.hit(5, every_q):.3f} | "
            f"{r.default.mrr(every_q):.3f} | {r.default.hit(5, far):.3f} | {r.default.mrr(far):.3f} | "
            f"{r.default.hit(5, near):.3f} | {r.opened / len(questions):.3f} | {r.empty / len(questions):.3f} | "
            f"{statistics.median(r.ms):.1f} |"
        )
    lines += [
        "",
        "Threshold off (`recall(threshold=2.0)`: every candidate admitted, the order alone):",
        "",
        "| memory vector | hit@1 | hit@5 | MRR@10 | hit@5 beyond | MRR beyond | hit@5 within |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in api.items():
        lines.append(
            f"| {name} | {r.off.hit(1, every_q):.3f} | {r.off.hit(5, every_q):.3f} | {r.off.mrr(every_q):.3f} | "
            f"{r.off.hit(5, far):.3f} | {r.off.mrr(far):.3f} | {r.off.hit(5, near):.3f} |"
        )
    lines += [
        "",
        "## Dense alone (cosine over the conversation's sessions)",
        "",
        "| memory vector | hit@1 | hit@5 | MRR@10 | hit@5 beyond | MRR beyond | hit@5 within | "
        + " | ".join(f"hit@5 {c}" for c in CATEGORIES.values())
        + " |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in dense.items():
        per_cat = [r.hit(5, [i for i in every_q if cats[i] == c]) for c in CATEGORIES]
        lines.append(
            f"| {name} | {r.hit(1, every_q):.3f} | {r.hit(5, every_q):.3f} | {r.mrr(every_q):.3f} | "
            f"{r.hit(5, far):.3f} | {r.mrr(far):.3f} | {r.hit(5, near):.3f} | "
            + " | ".join(f"{x:.3f}" for x in per_cat)
            + " |"
        )
    api_cats = [
        "",
        "Through `recall()`, hit@5 per category (n): "
        + ", ".join(f"{CATEGORIES[c]} ({cats.count(c)})" for c in CATEGORIES),
        "",
        "| memory vector | " + " | ".join(CATEGORIES.values()) + " |",
        "|---|---|---|---|---|",
    ]
    for name, r in api.items():
        api_cats.append(
            f"| {name} | "
            + " | ".join(f"{r.default.hit(5, [i for i in every_q if cats[i] == c]):.3f}" for c in CATEGORIES)
            + " |"
        )
    lines += api_cats
    if not args.skip_cost:
        sample = [docs[i].text for i in range(0, len(docs), max(1, len(docs) // args.cost_docs))][
            : args.cost_docs
        ]
        shorts = [t.text for t in turns[: args.short_turns]]
        lines += ["", "## Cost", "", *await write_cost(sample, shorts, args.rounds)]
    lines += ["", f"Run: {time.perf_counter() - wall:.0f} s wall (window vectors cached in {args.cache})."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of locomo10.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown report")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "quality-cache", help="outside the repo"
    )
    parser.add_argument("--skip-cost", action="store_true", help="leave out the write-cost timing")
    parser.add_argument("--cost-docs", type=int, default=24, help="long memories timed")
    parser.add_argument("--rounds", type=int, default=2, help="timing rounds")
    parser.add_argument("--short-turns", type=int, default=1000, help="short memories compared bit for bit")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data}", file=sys.stderr)
        return 0
    if REPO in args.cache.resolve().parents:
        print("--cache must be outside the repository (vectors derived from LoCoMo)", file=sys.stderr)
        return 2
    report = asyncio.run(main_async(args))
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, "utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
