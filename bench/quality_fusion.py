"""Issue 16 research: candidate generation, fusion, query normalisation and thresholds, measured.

What it measures (LoCoMo categories 1-4, the fact-QA set in ``bench/data/factqa.json``),
for the shipped ONNX MiniLM embedder and the hashing embedder:

1. Candidate generation: KNN top-50 alone against KNN top-50 UNION the server's
   full-text hits (one ``FT.SEARCH`` of the question's terms, escaped and OR-ed,
   scoped by the same TAG filter, ``SCORER BM25STD``, top 50): share of questions
   with an evidence turn in the pool each way.
2. Fusion over that pool: today's ``1 - (1 - dense) * exp(-alpha * lexical)``,
   reciprocal-rank fusion (k = 60 and tuned), and a convex combination of dense
   similarity and BM25, with the lexical score's IDF from the candidates, from the
   scope (conversation) or from the whole store (the server's BM25STD scores).
   Parameters are chosen on conversations 1-5 only; conversations 6-10 are held out.
3. Query-side normalisation (dates, speaker names, framing words, number words): cheap checks.
4. Thresholds: recall@5 at each candidate default against the threshold off, on LoCoMo
   and on the fact-QA set, and the off-topic empty rate (questions of conversation i
   asked against conversation i+1's scope; the fact-QA set's off-topic requests), for a
   ceiling on every hit (today), on the nearest candidate only, on the fused distance, and
   the recommended gate (a ceiling on the nearest candidate or a margin over the median
   KNN candidate), calibrated on the first halves and checked on the held-out ones.

The store is the library's (``MemoryStore.remember_many`` with precomputed vectors,
on one embedded server); the library's index already has ``content TEXT`` on engines
with TEXT fields, so the text queries run on the store's own index. Dense similarities
of the pool are computed in numpy from the same vectors (the engine's KNN order was
checked against it: the report gives the share of questions where both top-50 sets agree). Fused scores are computed here, in
the bench, from the fetched candidates; nothing in the library changes.

    .venv/bin/python bench/quality_fusion.py                 # writes bench/results/quality-research.md
    .venv/bin/python bench/quality_fusion.py --conversations 3   # smoke run

The LoCoMo data (CC BY-NC 4.0) is read in place; embeddings and fetched server replies
are cached under ``--cache`` (default ``$TMPDIR/quality-cache``, outside the repository).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import math
import pickle
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, HybridRanker, MemoryStore, Scope
from betterdb_memory.embedders.hashing import tokenize

try:  # the library is being split into subpackages; import from where it is
    from betterdb_memory.core.escaping import escape_tag
    from betterdb_memory.core.ranking import ENGLISH_STOPWORDS
except ImportError:  # pragma: no cover - the flat layout
    from betterdb_memory.escaping import escape_tag  # type: ignore[no-redef]
    from betterdb_memory.ranking import ENGLISH_STOPWORDS  # type: ignore[no-redef]
try:
    from betterdb_memory.core.query import MemoryFilter
except ImportError:  # pragma: no cover
    from betterdb_memory.query import MemoryFilter  # type: ignore[no-redef]
from betterdb_memory.server import EmbeddedServer

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
FACTQA = REPO / "bench" / "data" / "factqa.json"
DEFAULT_OUT = REPO / "bench" / "results" / "quality-research.md"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "quality-cache"

KNN_POOL = 50
TEXT_POOL = 50
TEXT_FETCH = 1000  # text hits fetched once per query (pools of any size are cut from them)
K1, B = 1.2, 0.75
EMPTY_GOAL = 0.80  # issue 16: off-topic questions come back empty in at least 80% of cases
THRESHOLDS = tuple(round(0.50 + 0.05 * i, 2) for i in range(9))  # cosine-distance ceilings 0.50..0.90

FloatArray = npt.NDArray[np.float64]


# -- data ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Corpus:
    """Documents in scopes, and queries each asked in one scope (evidence: document indices)."""

    name: str
    docs: list[str]
    doc_scope: list[str]
    doc_label: list[str]  # dia_id / fact id
    queries: list[str] = field(default_factory=list)
    query_scope: list[str] = field(default_factory=list)
    evidence: list[frozenset[int]] = field(default_factory=list)
    category: list[int] = field(default_factory=list)
    speakers: dict[str, set[str]] = field(default_factory=dict)  # scope -> speaker names

    def scopes(self) -> list[str]:
        return list(dict.fromkeys(self.doc_scope))


def turn_text(turn: dict[str, Any]) -> str:
    """What an agent would have stored (as ``bench/quality.py``): speaker, words, image caption."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def load_locomo(path: Path, limit: int | None) -> Corpus:
    data = json.loads(path.read_text("utf-8"))[:limit]
    c = Corpus("locomo", [], [], [])
    for sample in data:
        conv, sessions = sample["sample_id"], sample["conversation"]
        where: dict[str, int] = {}
        n = 1
        while f"session_{n}" in sessions or f"session_{n}_date_time" in sessions:
            for t in sessions.get(f"session_{n}") or []:
                where[t["dia_id"]] = len(c.docs)
                c.docs.append(turn_text(t))
                c.doc_scope.append(conv)
                c.doc_label.append(t["dia_id"])
                c.speakers.setdefault(conv, set()).add(t["speaker"])
            n += 1
        for qa in sample["qa"]:
            ids = re.findall(r"D:?(\d+):(\d+)", " ".join(qa.get("evidence", [])))
            ev = frozenset(where[d] for a, b in ids if (d := f"D{a}:{b}") in where)
            if qa["category"] in (1, 2, 3, 4) and ids:
                c.queries.append(qa["question"])
                c.query_scope.append(conv)
                c.evidence.append(ev)
                c.category.append(qa["category"])
    return c


def load_factqa(path: Path) -> Corpus:
    data = json.loads(path.read_text("utf-8"))
    c = Corpus(
        "factqa",
        [f["text"] for f in data["facts"]],
        ["user"] * len(data["facts"]),
        [f["id"] for f in data["facts"]],
    )
    index = {f["id"]: i for i, f in enumerate(data["facts"])}
    for q in data["questions"]:
        c.queries.append(q["text"])
        c.query_scope.append("user")
        c.evidence.append(frozenset(index[a] for a in q["answers"]))
        c.category.append(0)
    for q in data["offtopic"]:
        c.queries.append(q)
        c.query_scope.append("user")
        c.evidence.append(frozenset())
        c.category.append(-1)  # off-topic: no answer in the store
    return c


# -- embeddings and server replies, cached outside the repository -----------------------------


async def embed_cached(
    embedder: Any, texts: Sequence[str], cache: Path, batch: int = 256
) -> npt.NDArray[np.float32]:
    digest = hashlib.sha256("\x00".join([embedder.model_id, *texts]).encode()).hexdigest()[:16]
    path = cache / f"emb-{digest}.npy"
    if path.exists():
        return np.load(path)
    parts = []
    for i in range(0, len(texts), batch):
        parts.append(await embedder.embed(list(texts[i : i + batch])))
        print(f"  {embedder.model_id}: {min(i + batch, len(texts))}/{len(texts)}", file=sys.stderr)
    out = np.concatenate(parts).astype(np.float32)
    _write(path, lambda fh: np.save(fh, out))
    return out


def _write(path: Path, writer: Callable[[Any], Any]) -> None:
    """Create the cache directory and write one file (binary)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        writer(fh)


STOP = frozenset(ENGLISH_STOPWORDS)


def query_terms(text: str, drop: frozenset[str] = frozenset()) -> list[str]:
    """The words of a question sent to the server: tokens minus stop words (the server stems)."""
    out = []
    for tok in tokenize(text):
        if tok in STOP or tok in drop or not any(ch.isalnum() for ch in tok):
            continue
        out.append(tok)
    return list(dict.fromkeys(out))


def escape_text(term: str) -> str:
    """A word inside ``@content:(...)``: every character other than a letter or digit escaped."""
    return "".join(ch if ch.isalnum() else "\\" + ch for ch in term)


def text_query(scope_clause: str, terms: Sequence[str]) -> str | None:
    """``(@content:t1 <scope>)|(@content:t2 <scope>)|...``: the scope is repeated in every branch.

    The natural ``<scope> @content:(t1|t2|...)`` matches the same documents, but RediSearch
    2.10 then scores only one matching branch of the union for many of them (an evidence
    turn holding three of four query words came 263rd, scored on the speaker's name
    alone); with the filter inside each branch every matched word is scored.
    """
    if not terms:
        return None
    return "|".join(f"(@content:{escape_text(t)} {scope_clause})" for t in terms)


@dataclass(slots=True)
class Fetched:
    """Per query of a corpus: the server's text hits (doc index, BM25STD score) in its own
    scope and, for LoCoMo, in the next conversation's scope (the off-topic probe)."""

    own: list[list[tuple[int, float]]]
    other: list[list[tuple[int, float]]]
    other_scope: list[str]
    knn_store: list[
        list[tuple[int, float]]
    ]  # engine KNN top-50 (doc index, cosine distance), ONNX, own scope
    knn_ms: list[float]
    text_ms: list[float]
    schema: list[str]


async def fetch(
    corpus: Corpus,
    vectors: npt.NDArray[np.float32],
    qvecs: npt.NDArray[np.float32],
    embedder: Any,
    cache: Path,
    run_knn: bool,
) -> Fetched:
    """One embedded server, one store per corpus; text hits (and engine KNN) for every query."""
    digest = hashlib.sha256(
        json.dumps(
            [corpus.docs, corpus.doc_scope, corpus.queries, corpus.query_scope, run_knn, TEXT_FETCH]
        ).encode()
    ).hexdigest()[:16]
    path = cache / f"fetch-{corpus.name}-{digest}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())  # our own cache file
    server = EmbeddedServer(persistence=False)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url, decode_responses=False)
    scopes = corpus.scopes()
    nxt = {s: scopes[(i + 1) % len(scopes)] for i, s in enumerate(scopes)}
    try:
        store = MemoryStore(
            client=client,
            name=f"qfusion-{uuid.uuid4().hex[:8]}",
            embedder=embedder,
            dedup=False,
            discovery=False,
        )
        await store.ensure_index()
        ids: list[str] = []
        for i in range(0, len(corpus.docs), 500):
            ids += await store.remember_many(
                [
                    {"content": corpus.docs[j], "thread_id": corpus.doc_scope[j], "vector": vectors[j]}
                    for j in range(i, min(i + 500, len(corpus.docs)))
                ]
            )
        doc_of = {store.keys.doc(m).encode(): j for j, m in enumerate(ids)}
        info = await client.execute_command("FT.INFO", store.keys.index)
        attrs = dict(zip(info[::2], info[1::2], strict=False)).get(b"attributes", [])
        schema = [" ".join(x.decode() if isinstance(x, bytes) else str(x) for x in a) for a in attrs]

        async def text_hits(scope: str, q: str) -> list[tuple[int, float]]:
            clause = f"@threadId:{{{escape_tag(scope)}}}"
            query = text_query(clause, query_terms(q))
            if query is None:
                return []
            reply = await client.execute_command(
                "FT.SEARCH", store.keys.index, query, "WITHSCORES", "SCORER", "BM25STD", "NOCONTENT",
                "LIMIT", "0", str(TEXT_FETCH), "DIALECT", "2",
            )  # fmt: skip
            return [(doc_of[reply[i]], float(reply[i + 1])) for i in range(1, len(reply), 2)]

        out = Fetched([], [], [], [], [], [], schema)
        for qi, q in enumerate(corpus.queries):
            scope = corpus.query_scope[qi]
            t0 = time.perf_counter()
            out.own.append(await text_hits(scope, q))
            out.text_ms.append((time.perf_counter() - t0) * 1000)
            other = nxt[scope] if len(scopes) > 1 else scope
            out.other_scope.append(other)
            out.other.append(await text_hits(other, q) if other != scope else [])
            if run_knn:
                t0 = time.perf_counter()
                cands = await store.search_candidates(
                    qvecs[qi], MemoryFilter(scope=Scope(thread_id=scope)), KNN_POOL
                )
                out.knn_ms.append((time.perf_counter() - t0) * 1000)
                out.knn_store.append([(doc_of[store.keys.doc(it.id).encode()], d) for it, d in cands])
        await store.close()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
    _write(path, lambda fh: fh.write(pickle.dumps(out)))
    return out


# -- candidate pools and their features ---------------------------------------------------------

TODAY = HybridRanker()  # alpha 3, k1 1.2, b 0.75: the shipped ranker
PROPOSED_K1, PROPOSED_B, PROPOSED_ALPHA = 0.5, 0.0, 4.0  # the recommendation (chosen on conversations 1-5)
PROPOSED = HybridRanker(alpha=PROPOSED_ALPHA, k1=PROPOSED_K1, b=PROPOSED_B)


@dataclass(slots=True)
class Stats:
    """Per-corpus term statistics (the ranker's terms) for scope- and store-wide IDF."""

    terms: list[Counter[str]]
    length: FloatArray
    scope_idx: dict[str, npt.NDArray[np.int64]]
    scope_df: dict[str, Counter[str]]
    store_df: Counter[str]

    @classmethod
    def of(cls, corpus: Corpus) -> Stats:
        terms = [Counter(TODAY.terms(d)) for d in corpus.docs]
        scope_idx: dict[str, list[int]] = {}
        for i, s in enumerate(corpus.doc_scope):
            scope_idx.setdefault(s, []).append(i)
        idx = {s: np.array(v) for s, v in scope_idx.items()}
        scope_df = {s: Counter(t for i in v for t in terms[i]) for s, v in idx.items()}
        return cls(
            terms,
            np.array([sum(t.values()) for t in terms], float),
            idx,
            scope_df,
            Counter(t for c in terms for t in c),
        )


def bm25_share(
    stats: Stats, qterms: Sequence[str], docs: npt.NDArray[np.int64], df: Counter[str], n: int, avg: float,
    k1: float = PROPOSED_K1, b: float = PROPOSED_B,
) -> FloatArray:  # fmt: skip
    """The ranker's lexical score (IDF-weighted share of the query's terms, BM25 saturation) with a given IDF."""
    out = np.zeros(len(docs))
    if not qterms:
        return out
    idf = {t: math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in qterms}
    total = sum(idf.values())
    for j, i in enumerate(docs):
        c = stats.terms[i]
        norm = k1 * (1 - b + b * stats.length[i] / avg) if avg else k1
        out[j] = sum(idf[t] * c[t] / (c[t] + norm) for t in qterms if c[t]) / total
    return out


@dataclass(slots=True)
class Pool:
    """One query's candidates: KNN top-``knn`` of its scope UNION the server's top-``text`` text hits."""

    idx: npt.NDArray[np.int64]
    d: FloatArray  # cosine distance
    inknn: npt.NDArray[np.bool_]
    intext: npt.NDArray[np.bool_]
    median_knn: float  # median distance of the KNN candidates (the margin's reference)
    server: FloatArray  # BM25STD of the server (store-wide IDF); 0 = not a text hit
    lex: dict[str, FloatArray] = field(default_factory=dict)

    @property
    def s(self) -> FloatArray:
        return 1 - self.d / 2  # the store's similarity


def build_pools(
    corpus: Corpus, stats: Stats, vecs: npt.NDArray[np.float32], qvecs: npt.NDArray[np.float32],
    hits: Sequence[Sequence[tuple[int, float]]], scopes: Sequence[str], knn: int = KNN_POOL, text: int = TEXT_POOL,
    features: bool = True,
) -> list[Pool]:  # fmt: skip
    pools = []
    for qi, scope in enumerate(scopes):
        sidx = stats.scope_idx[scope]
        cos = vecs[sidx] @ qvecs[qi]
        order = np.argsort(-cos, kind="stable")
        knn_ids = sidx[order[:knn]]
        text_ids = [d for d, _ in hits[qi][:text]]
        idx = np.array(list(dict.fromkeys([*knn_ids.tolist(), *text_ids])), dtype=np.int64)
        where = {int(d): j for j, d in enumerate(sidx)}
        d = np.array([1 - cos[where[int(i)]] for i in idx], float)
        score = dict(hits[qi])
        p = Pool(
            idx, d, np.isin(idx, knn_ids), np.isin(idx, text_ids), float(np.median(1 - cos[order[:knn]])),
            np.array([score.get(int(i), 0.0) for i in idx]),
        )  # fmt: skip
        if features and len(idx):
            q = corpus.queries[qi]
            texts = [corpus.docs[i] for i in idx]
            qterms = sorted(set(PROPOSED.terms(q)))
            n = len(sidx)
            p.lex["today"] = np.array(TODAY.lexical_scores(q, texts))
            p.lex["cand"] = np.array(PROPOSED.lexical_scores(q, texts))
            p.lex["scope"] = bm25_share(
                stats, qterms, idx, stats.scope_df[scope], n, float(stats.length[sidx].mean())
            )
            p.lex["store"] = bm25_share(
                stats, qterms, idx, stats.store_df, len(corpus.docs), float(stats.length.mean())
            )
        pools.append(p)
    return pools


# -- ranking methods ----------------------------------------------------------------------------

Scorer = Callable[[Pool], FloatArray]


def _minmax(x: FloatArray) -> FloatArray:
    lo, hi = (float(x.min()), float(x.max())) if len(x) else (0.0, 0.0)
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _bymax(x: FloatArray) -> FloatArray:
    hi = float(x.max()) if len(x) else 0.0
    return x / hi if hi > 0 else x


def _ranks(x: FloatArray, valid: npt.NDArray[np.bool_] | None = None) -> FloatArray:
    order = np.argsort(-x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    if valid is not None:
        r[~valid] = np.inf
    return r


def lexical(p: Pool, source: str) -> FloatArray:
    return _bymax(p.server) if source == "server" else p.lex[source]


def fused_exp(alpha: float, source: str) -> Scorer:
    """Today's formula: ``1 - (1 - dense) * exp(-alpha * lexical)`` (store similarity scale)."""
    return lambda p: 1 - (1 - p.s) * np.exp(-alpha * lexical(p, source))


def rrf(k: float, w: float, source: str) -> Scorer:
    """Reciprocal-rank fusion: ``1/(k + dense rank) + w/(k + lexical rank)`` (no lexical term when no match)."""

    def score(p: Pool) -> FloatArray:
        lx = lexical(p, source)
        return 1 / (k + _ranks(p.s)) + w / (k + _ranks(lx, lx > 0))

    return score


def convex(lam: float, source: str) -> Scorer:
    """``lam * minmax(dense) + (1 - lam) * lexical / max(lexical)`` over the pool."""
    return lambda p: lam * _minmax(p.s) + (1 - lam) * _bymax(lexical(p, source))


def ranked(p: Pool, scorer: Scorer, only_knn: bool = False) -> npt.NDArray[np.int64]:
    """Positions into the pool, best first (ties: dense similarity, then document index)."""
    sc = scorer(p)
    order = np.lexsort((p.idx, -p.s, -sc))
    return order[p.inknn[order]] if only_knn else order


@dataclass(slots=True)
class Ranks:
    """First-hit rank (0-based) of each query under one method; None: no evidence in the top 10."""

    name: str
    ranks: list[int | None]

    def hit(self, k: int, sel: npt.NDArray[np.bool_] | None = None) -> float:
        rs = [r for i, r in enumerate(self.ranks) if sel is None or sel[i]]
        return sum(1 for r in rs if r is not None and r < k) / max(len(rs), 1)

    def mrr(self, sel: npt.NDArray[np.bool_] | None = None) -> float:
        rs = [r for i, r in enumerate(self.ranks) if sel is None or sel[i]]
        return sum(1 / (r + 1) for r in rs if r is not None) / max(len(rs), 1)


def first_hits(
    corpus: Corpus, pools: Sequence[Pool], scorer: Scorer, only_knn: bool = False
) -> list[int | None]:
    out: list[int | None] = []
    for qi, p in enumerate(pools):
        top = p.idx[ranked(p, scorer, only_knn)[:10]] if len(p.idx) else []
        out.append(next((r for r, d in enumerate(top) if d in corpus.evidence[qi]), None))
    return out


def tune(
    corpus: Corpus, pools: Sequence[Pool], grid: Sequence[tuple[Any, Scorer]], train: npt.NDArray[np.bool_]
) -> tuple[Any, list[int | None]]:
    """The grid point with the best hit@5 (then MRR@10) on the training conversations only."""
    best: tuple[tuple[float, float], Any, list[int | None]] | None = None
    for params, scorer in grid:
        r = Ranks("", first_hits(corpus, pools, scorer))
        key = (round(r.hit(5, train), 4), r.mrr(train))
        if best is None or key > best[0]:
            best = (key, params, r.ranks)
    assert best is not None
    return best[1], best[2]


def bm25_all(corpus: Corpus, stats: Stats, qi: int, k1: float = 1.2, b: float = 0.75) -> list[int]:
    """Okapi BM25 over every document of the query's scope (client-side, the ranker's terms)."""
    scope = corpus.query_scope[qi]
    sidx = stats.scope_idx[scope]
    qterms = sorted(set(TODAY.terms(corpus.queries[qi])))
    n, avg = len(sidx), float(stats.length[sidx].mean())
    df = stats.scope_df[scope]
    idf = {t: math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in qterms}
    sc = np.array(
        [
            sum(
                idf[t] * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * stats.length[i] / avg))
                for t in qterms
                if c[t]
            )
            for i in sidx
            for c in (stats.terms[i],)
        ]
    )
    return [int(sidx[j]) for j in np.argsort(-sc, kind="stable")[:10] if sc[j] > 0]


def per_term_hits(corpus: Corpus, stats: Stats, qi: int, limit: int) -> list[tuple[int, float]]:
    """Simulated per-term text queries: each word's first ``limit`` matches in the scope (insertion order),
    ranked by the proposed lexical score with IDF over the matches."""
    sidx = stats.scope_idx[corpus.query_scope[qi]]
    found: dict[int, None] = {}
    for word in query_terms(corpus.queries[qi]):
        folded = TODAY.terms(word)
        if not folded:
            continue
        for i in [int(i) for i in sidx if stats.terms[i][folded[0]]][:limit]:
            found[i] = None
    ids = list(found)
    if not ids:
        return []
    lx = np.array(PROPOSED.lexical_scores(corpus.queries[qi], [corpus.docs[i] for i in ids]))
    return [(ids[j], float(lx[j])) for j in np.argsort(-lx, kind="stable")]


# -- thresholds ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """Who answers a recall: ``ceiling`` on the nearest candidate's cosine distance, and ``margin``:
    the nearest candidate also counts when it is at least this much closer than the median KNN
    candidate (None: no margin path). ``per_hit``: the ceiling applies to every hit (today's rule)
    instead of to the nearest only."""

    ceiling: float
    margin: float | None = None
    per_hit: bool = False
    fused: bool = False  # per_hit on the fused distance 2 * (1 - fused) of the proposed fusion

    def distance(self, p: Pool) -> FloatArray:
        if not self.fused:
            return p.d
        return 2 * np.exp(-PROPOSED_ALPHA * p.lex["cand"]) * (1 - p.s)  # = 2 * (1 - fused)

    def opens(self, p: Pool) -> bool:
        if not len(p.d):
            return False
        nearest = float(p.d.min())
        return nearest <= self.ceiling or (self.margin is not None and p.median_knn - nearest >= self.margin)

    def hits(self, p: Pool, order: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
        """Document indices returned (top ``k`` of ``order`` that pass)."""
        if self.per_hit:
            keep = order[self.distance(p)[order] <= self.ceiling]
            return p.idx[keep[:k]]
        return p.idx[order[:k]] if self.opens(p) else p.idx[:0]

    def label(self) -> str:
        if self.per_hit:
            return f"every hit: {'fused ' if self.fused else ''}distance <= {self.ceiling:.2f}"
        if self.margin is None:
            return f"nearest <= {self.ceiling:.2f}"
        return f"nearest <= {self.ceiling:.2f} or median - nearest >= {self.margin:.2f}"


OFF = Gate(ceiling=math.inf)
# The recommendation (calibrated by ``analyse`` on the training halves; the summary uses these constants).
RECOMMENDED_GATES = {"ONNX MiniLM": Gate(0.52, 0.18), "hashing": Gate(0.76, 0.09)}


def recall_at(
    corpus: Corpus,
    pools: Sequence[Pool],
    scorer: Scorer,
    gate: Gate,
    sel: npt.NDArray[np.bool_],
    only_knn: bool = False,
) -> float:
    """Share of selected queries with an evidence document among the top 5 returned."""
    n = h = 0
    for qi, p in enumerate(pools):
        if not sel[qi]:
            continue
        n += 1
        got = gate.hits(p, ranked(p, scorer, only_knn), 5) if len(p.idx) else []
        h += bool(set(int(x) for x in got) & corpus.evidence[qi])
    return h / max(n, 1)


def empty_rate(
    pools: Sequence[Pool], gate: Gate, sel: npt.NDArray[np.bool_], only_knn: bool = False
) -> float:
    """Share of selected queries that get no hit at all."""
    out = []
    for qi, p in enumerate(pools):
        if sel[qi]:
            d = gate.distance(p)
            d = d[p.inknn] if only_knn else d
            out.append(not len(d) or (float(d.min()) > gate.ceiling if gate.per_hit else not gate.opens(p)))
    return float(np.mean(out)) if out else math.nan


# -- query-side normalisation (cheap checks) ----------------------------------------------------

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    rf"\b(?:on|in|of|around|during|since|before|after)?\s*(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})\b"
    r"(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?(?:\s*(?:19|20)\d\d)?|\b(?:19|20)\d\d\b",
    re.IGNORECASE,
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"], 1)
}
FRAMING = frozenset(
    {
        "kind",
        "type",
        "many",
        "mention",
        "mentioned",
        "describe",
        "like",
        "likely",
        "thing",
        "things",
        "something",
    }
)


def normalised_scores(corpus: Corpus, pools: Sequence[Pool], variant: str) -> Scorer:
    """The proposed fusion with the query rewritten by ``variant`` (the pool itself is unchanged)."""
    cache: dict[int, FloatArray] = {}
    rankers: dict[str, HybridRanker] = {}

    def ranker_for(qi: int) -> HybridRanker:
        extra: frozenset[str] = frozenset()
        if variant == "names":
            extra = frozenset(w.casefold() for w in corpus.speakers.get(corpus.query_scope[qi], ()))
        elif variant == "framing":
            extra = FRAMING
        key = ",".join(sorted(extra))
        if key not in rankers:
            rankers[key] = HybridRanker(
                alpha=PROPOSED_ALPHA, k1=PROPOSED_K1, b=PROPOSED_B, stopwords=STOP | extra
            )
        return rankers[key]

    def query(qi: int) -> str:
        q = corpus.queries[qi]
        if variant == "dates":
            return _DATE.sub(" ", q)
        if variant == "numbers":
            return " ".join(_NUMBER_WORDS.get(w.casefold(), w) for w in q.split())
        return q

    index = {id(p): qi for qi, p in enumerate(pools)}

    def score(p: Pool) -> FloatArray:
        qi = index[id(p)]
        if qi not in cache:
            lx = np.array(ranker_for(qi).lexical_scores(query(qi), [corpus.docs[i] for i in p.idx]))
            cache[qi] = 1 - (1 - p.s) * np.exp(-PROPOSED_ALPHA * lx)
        return cache[qi]

    return score


# -- the run ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    locomo: Corpus
    factqa: Corpus
    fetched: dict[str, Fetched]
    vectors: dict[
        str, dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]
    ]  # embedder -> corpus -> (docs, queries)
    today_ceiling: dict[str, float]
    timings: dict[str, float] = field(default_factory=dict)


async def collect(args: argparse.Namespace) -> Run:
    from betterdb_memory import OnnxEmbedder

    started = time.perf_counter()
    locomo = load_locomo(args.data, args.conversations)
    factqa = load_factqa(FACTQA)
    embedders = {"ONNX MiniLM": OnnxEmbedder(batch_size=64), "hashing": HashingEmbedder()}
    vectors: dict[str, dict[str, Any]] = {}
    for name, emb in embedders.items():
        t0 = time.perf_counter()
        vectors[name] = {
            c.name: (
                await embed_cached(emb, c.docs, args.cache),
                await embed_cached(emb, c.queries, args.cache),
            )
            for c in (locomo, factqa)
        }
        print(f"{name}: vectors ready", file=sys.stderr)
        vectors[name]["_seconds"] = time.perf_counter() - t0  # type: ignore[assignment]
    onnx = embedders["ONNX MiniLM"]
    fetched = {}
    for c in (locomo, factqa):
        t0 = time.perf_counter()
        v, qv = vectors["ONNX MiniLM"][c.name]
        fetched[c.name] = await fetch(c, v, qv, onnx, args.cache, run_knn=True)
        print(f"{c.name}: server replies ready", file=sys.stderr)
        vectors["ONNX MiniLM"][f"_fetch_{c.name}"] = time.perf_counter() - t0  # type: ignore[assignment]
    ceilings = {n: 2 * (1 - float(getattr(e, "default_threshold", 0.835))) for n, e in embedders.items()}
    run = Run(locomo, factqa, fetched, vectors, ceilings)
    for name in embedders:
        run.timings[f"{name}: embeddings (0 when cached)"] = vectors[name].pop("_seconds")  # type: ignore[arg-type]
    for c in (locomo, factqa):
        run.timings[f"{c.name}: store + server queries (0 when cached)"] = vectors["ONNX MiniLM"].pop(
            f"_fetch_{c.name}"
        )  # type: ignore[arg-type]
    run.timings["collect"] = time.perf_counter() - started
    return run


def fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) if isinstance(c, float) else str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def analyse(run: Run) -> tuple[str, str]:
    """(the full research report, the summary table printed by ``make bench-quality``)."""
    t_start = time.perf_counter()
    lc, fq = run.locomo, run.factqa
    ls, fs = Stats.of(lc), Stats.of(fq)
    convs = list(dict.fromkeys(lc.query_scope))
    first = set(convs[: (len(convs) + 1) // 2])
    train = np.array([s in first for s in lc.query_scope])
    test = ~train
    every = np.ones(len(lc.queries), bool)
    answerable = np.array([c == 0 for c in fq.category])
    offtopic_fq = np.array([c == -1 for c in fq.category])
    fq_train = np.array([i % 2 == 0 for i in range(len(fq.queries))])
    lf, ff = run.fetched["locomo"], run.fetched["factqa"]
    half = f"conversations 1-{len(first)}", f"conversations {len(first) + 1}-{len(convs)}"

    pools: dict[str, dict[str, list[Pool]]] = {}
    for name, vec in run.vectors.items():
        v, qv = vec["locomo"]
        fv, fqv = vec["factqa"]
        pools[name] = {
            "own": build_pools(lc, ls, v, qv, lf.own, lc.query_scope),
            "other": build_pools(lc, ls, v, qv, lf.other, lf.other_scope),
            "factqa": build_pools(fq, fs, fv, fqv, ff.own, fq.query_scope),
        }
    run.timings["pools and lexical features (both embedders)"] = time.perf_counter() - t_start
    parts: list[str] = []

    # 1. candidate generation -------------------------------------------------------------------
    agree = np.mean(
        [
            {d for d, _ in lf.knn_store[qi]} == set(p.idx[p.inknn].tolist())
            for qi, p in enumerate(pools["ONNX MiniLM"]["own"])
        ]
    )
    rows = []
    for knn, text in (
        (50, 0),
        (100, 0),
        (200, 0),
        (0, 50),
        (0, 100),
        (50, 25),
        (50, 50),
        (50, 100),
        (100, 100),
    ):
        row: list[Any] = [f"KNN {knn}" if knn else "", f"text {text}" if text else ""]
        for vec in run.vectors.values():
            v, qv = vec["locomo"]
            if not knn:  # text hits only
                cov = np.mean(
                    [
                        bool({d for d, _ in lf.own[qi][:text]} & lc.evidence[qi])
                        for qi in range(len(lc.queries))
                    ]
                )
                size = np.mean([len(lf.own[qi][:text]) for qi in range(len(lc.queries))])
            else:
                ps = build_pools(lc, ls, v, qv, lf.own, lc.query_scope, knn=knn, text=text, features=False)
                cov = np.mean([bool(set(p.idx.tolist()) & lc.evidence[qi]) for qi, p in enumerate(ps)])
                size = np.mean([len(p.idx) for p in ps])
            row += [float(cov), f"{size:.0f}"]
        rows.append(row)
    parts += [
        "## 1. Candidate generation",
        "",
        "Share of LoCoMo questions with an evidence turn in the candidate pool (before any ranking), and the mean "
        "pool size. `text N`: the top N of one `FT.SEARCH` of the question's terms (tokens minus stop words, escaped, "
        "OR-ed, each branch scoped by the thread TAG: `(@content:w1 @threadId:{c})|(@content:w2 @threadId:{c})|...`), "
        "`WITHSCORES SCORER BM25STD`, on the store's own index. Text hits do not depend on the embedder.",
        "",
        table(
            [
                "KNN",
                "text",
                "ONNX: evidence in pool",
                "ONNX: pool size",
                "hashing: evidence in pool",
                "hashing: pool size",
            ],
            rows,
        ),
        "",
        f"Engine KNN top-50 (`search_candidates`) equals the numpy exact top-50 as a set for {agree:.3f} of questions.",
        "",
    ]

    # 2. fusion -------------------------------------------------------------------------------
    po = pools["ONNX MiniLM"]["own"]
    results: list[tuple[str, str, list[int | None]]] = []
    results.append(("BM25, all turns of the conversation (client, k1 1.2, b 0.75)", "", [
        next((r for r, d in enumerate(bm25_all(lc, ls, qi)) if d in lc.evidence[qi]), None) for qi in range(len(lc.queries))
    ]))  # fmt: skip
    results.append(("server BM25STD alone (text top 10)", "", [
        next((r for r, (d, _) in enumerate(lf.own[qi][:10]) if d in lc.evidence[qi]), None) for qi in range(len(lc.queries))
    ]))  # fmt: skip
    results.append(("dense, KNN 50", "", first_hits(lc, po, lambda p: p.s, only_knn=True)))
    results.append(
        (
            "today: HybridRanker() over KNN 50",
            "alpha 3, k1 1.2, b 0.75, candidate IDF",
            first_hits(lc, po, fused_exp(3.0, "today"), only_knn=True),
        )
    )
    results.append(
        (
            "today's fusion over KNN 50 + text 50",
            "alpha 3, k1 1.2, b 0.75, candidate IDF",
            first_hits(lc, po, fused_exp(3.0, "today")),
        )
    )
    results.append(
        ("RRF k=60: dense rank + server BM25STD rank", "", first_hits(lc, po, rrf(60, 1, "server")))
    )
    results.append(
        ("RRF k=60: dense rank + lexical rank (candidate IDF)", "", first_hits(lc, po, rrf(60, 1, "cand")))
    )
    grid = [
        ((k, w, src), rrf(k, w, src))
        for k in (1, 5, 10, 20, 60)
        for w in (0.5, 1.0, 1.5, 2.0)
        for src in ("server", "cand")
    ]
    p_rrf, r_rrf = tune(lc, po, grid, train)
    results.append(("RRF tuned", f"k {p_rrf[0]}, w {p_rrf[1]}, lexical {p_rrf[2]}", r_rrf))
    for src, label in (
        ("server", "server BM25STD (store-wide IDF)"),
        ("cand", "candidate IDF"),
        ("scope", "scope IDF"),
    ):
        grid = [(lam, convex(lam, src)) for lam in np.round(np.arange(0.2, 0.85, 0.05), 2)]
        p_cvx, r_cvx = tune(lc, po, grid, train)
        results.append(
            (f"convex tuned: dense (min-max) + lexical/max, {label}", f"lambda {p_cvx:.2f}", r_cvx)
        )
    results.append(
        (
            "proposed fusion over KNN 50 only (engines without TEXT)",
            f"alpha {PROPOSED_ALPHA:g}, k1 {PROPOSED_K1:g}, b {PROPOSED_B:g}, candidate IDF",
            first_hits(lc, po, fused_exp(PROPOSED_ALPHA, "cand"), only_knn=True),
        )
    )
    alphas: dict[str, float] = {}
    for src, label in (
        ("cand", "candidate IDF"),
        ("scope", "scope (conversation) IDF"),
        ("store", "store-wide IDF"),
        ("server", "server BM25STD / max"),
    ):
        grid = [(a, fused_exp(a, src)) for a in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)]
        a, r = tune(lc, po, grid, train)
        alphas[src] = a
        tag = " (proposed)" if src == "cand" else ""
        results.append((f"today's formula, lexical k1 0.5, b 0, {label}{tag}", f"alpha {a:g}", r))
    rows = []
    for name, params, rk in results:
        r = Ranks(name, rk)
        rows.append([name, params, r.hit(1), r.hit(5), r.hit(10), r.mrr(), r.hit(5, train), r.hit(5, test)])
    parts += [
        "## 2. Fusion (ONNX MiniLM, pool = KNN 50 + text 50 unless named)",
        "",
        f"Parameters chosen on {half[0]} only (best hit@5, then MRR@10); the last column is held out. Lexical "
        "scores are the ranker's (IDF-weighted share of the query's terms with BM25 saturation, in 0..1); `k1 0.5, "
        "b 0` was chosen the same way (grid k1 0-2 x b 0-1; b 0 = no length normalisation, LoCoMo turns and facts "
        "are short and a long turn is not a weaker match).",
        "",
        table(
            [
                "method",
                "parameters",
                "hit@1",
                "hit@5",
                "hit@10",
                "MRR@10",
                f"hit@5 {half[0]}",
                f"hit@5 {half[1]} (held out)",
            ],
            rows,
        ),
        "",
    ]
    proposed = fused_exp(PROPOSED_ALPHA, "cand")
    v, qv = run.vectors["ONNX MiniLM"]["locomo"]
    rows = []
    for label, hits in (
        ("one OR query, server BM25STD top 50 (RediSearch; measured)", lf.own),
        (
            "one query per term, first 50 matches each, client-ranked top 50",
            [per_term_hits(lc, ls, qi, 50) for qi in range(len(lc.queries))],
        ),
        (
            "one query per term, first 20 matches each, client-ranked top 50",
            [per_term_hits(lc, ls, qi, 20) for qi in range(len(lc.queries))],
        ),
    ):
        ps = build_pools(lc, ls, v, qv, hits, lc.query_scope)
        r = Ranks(label, first_hits(lc, ps, proposed))
        cov = float(np.mean([bool(set(p.idx.tolist()) & lc.evidence[qi]) for qi, p in enumerate(ps)]))
        rows.append([label, cov, f"{np.mean([len(p.idx) for p in ps]):.0f}", r.hit(1), r.hit(5), r.mrr()])
    parts += [
        "### Text candidates without server scores (valkey-search 1.2)",
        "",
        "valkey-search 1.2.1 has TEXT but no scorer (`WITHSCORES` is rejected; hits come unranked) and, checked on "
        "the engine in `../shared/engines/valkey-search`, an OR of words drops the matches that only stemming finds "
        "(`@content:(kids|paint)` returns the `kids` turn and misses `painted` / `painting`, which `@content:paint` "
        "alone finds). Single-word queries scoped by the TAG were checked on that engine against this simulation "
        "(LoCoMo conversations 1-2, 542 queries): mean Jaccard 0.89 between the server's and the simulated match sets, "
        "identical for 85%. The portable path is one "
        "single-word query per query term (pipelined), the first N matches of each, ranked in the client by the "
        "proposed lexical score (IDF over the matches) and cut to 50. Simulated here with the ranker's terms and "
        "matches in insertion order (the server's stemming differs slightly); the proposed fusion then ranks the pool.",
        "",
        table(
            ["text candidates", "evidence in pool (with KNN 50)", "pool size", "hit@1", "hit@5", "MRR@10"],
            rows,
        ),
        "",
    ]
    if alphas["cand"] != PROPOSED_ALPHA:
        parts += [
            f"Note: this run's tuned alpha ({alphas['cand']:g}) differs from the proposed {PROPOSED_ALPHA:g}.",
            "",
        ]

    # fusion cost
    timing = []
    for qi, p in enumerate(po[:300]):
        t0 = time.perf_counter()
        lx = PROPOSED.lexical_scores(lc.queries[qi], [lc.docs[i] for i in p.idx])
        _ = 1 - (1 - p.s) * np.exp(-PROPOSED_ALPHA * np.array(lx))
        timing.append((time.perf_counter() - t0) * 1000)

    # 3. query normalisation --------------------------------------------------------------------
    rows = []
    for variant, label in (
        ("none", "as asked"),
        ("dates", "dates removed (month names, days, years)"),
        ("names", "the conversation's speaker names as stop words"),
        ("framing", "question framing words as stop words"),
        ("numbers", "number words as digits"),
    ):
        r = Ranks(label, first_hits(lc, po, normalised_scores(lc, po, variant)))
        rows.append([label, r.hit(1), r.hit(5), r.mrr(), r.hit(5, train), r.hit(5, test)])
    n_dates = sum(1 for q in lc.queries if _DATE.search(q))
    parts += [
        "## 3. Query-side normalisation (proposed fusion; the pool is the one fetched with the question as asked)",
        "",
        table(["query terms", "hit@1", "hit@5", "MRR@10", f"hit@5 {half[0]}", f"hit@5 {half[1]}"], rows),
        "",
        f"{n_dates} of {len(lc.queries)} questions carry a date; LoCoMo turns hold no session dates (those are in "
        "`session_N_date_time`, not in the stored text), so a date in a question can only match by accident. Folding "
        "(`paintings` -> `paint`) is already in the ranker; the server stems with Snowball.",
        "",
    ]

    # 4. thresholds -----------------------------------------------------------------------------
    gates: dict[str, Gate] = {}
    threshold_parts: list[str] = []
    summary_rows: list[list[Any]] = []
    for name in run.vectors:
        own, other, fqp = pools[name]["own"], pools[name]["other"], pools[name]["factqa"]
        rl0 = recall_at(lc, own, proposed, OFF, every)
        rf0 = recall_at(fq, fqp, proposed, OFF, answerable)
        rows = []
        for t in THRESHOLDS:
            for gate in (Gate(t, per_hit=True), Gate(t, per_hit=True, fused=True), Gate(t)):
                rows.append([
                    f"{t:.2f}", ("every hit, fused distance" if gate.fused else "every hit (today)") if gate.per_hit else "nearest only",
                    f"{recall_at(lc, own, proposed, gate, every):.3f} / {rl0:.3f}",
                    f"{recall_at(fq, fqp, proposed, gate, answerable):.3f} / {rf0:.3f}",
                    empty_rate(other, gate, every), empty_rate(fqp, gate, offtopic_fq),
                ])  # fmt: skip
        # calibration: the largest LoCoMo off-topic empty rate with <= 2 points of recall@5 lost on the training halves
        best: tuple[Any, ...] | None = None
        rl_tr0, rf_tr0 = (
            recall_at(lc, own, proposed, OFF, train),
            recall_at(fq, fqp, proposed, OFF, answerable & fq_train),
        )
        nearest = {
            k: np.array([float(p.d.min()) if len(p.d) else math.inf for p in ps])
            for k, ps in (("own", own), ("other", other), ("fq", fqp))
        }
        margin = {
            k: np.array([p.median_knn - float(p.d.min()) if len(p.d) else -math.inf for p in ps])
            for k, ps in (("own", own), ("other", other), ("fq", fqp))
        }
        hit_own = np.array([r is not None and r < 5 for r in first_hits(lc, own, proposed)])
        hit_fq = np.array([r is not None and r < 5 for r in first_hits(fq, fqp, proposed)])
        for c in np.round(np.arange(0.30, 0.96, 0.01), 2):
            for m in [None, *np.round(np.arange(0.05, 0.41, 0.01), 2)]:
                o_own, o_oth, o_fq = (
                    (nearest[k] <= c) | ((margin[k] >= m) if m is not None else False)
                    for k in ("own", "other", "fq")
                )
                rl = (hit_own & o_own)[train].mean()
                rf = (hit_fq & o_fq)[answerable & fq_train].mean()
                if rl_tr0 - rl <= 0.02 + 1e-9 and rf_tr0 - rf <= 0.02 + 1e-9:
                    # the most off-topic empties; ties: fact-QA off-topic empties, then the smaller ceiling / margin
                    key = (
                        round(1 - o_oth[train].mean(), 3),
                        round(1 - o_fq[offtopic_fq & fq_train].mean(), 3),
                        -c,
                        -(m or 9),
                    )
                    if best is None or key > best[0]:
                        best = (key, c, m)
        gate = Gate(best[1], best[2]) if best else Gate(math.inf)
        gates[name] = gate
        if name in RECOMMENDED_GATES and RECOMMENDED_GATES[name] != gate:
            print(
                f"note: {name}: this run calibrates {gate.label()}, the recommendation says {RECOMMENDED_GATES[name].label()}",
                file=sys.stderr,
            )
        cal_rows = []
        for label, ls_sel, fq_sel in (
            ("training halves", train, fq_train),
            ("held-out halves", test, ~fq_train),
            ("all", every, np.ones(len(fq.queries), bool)),
        ):
            cal_rows.append([
                label,
                f"{recall_at(lc, own, proposed, gate, ls_sel):.3f} / {recall_at(lc, own, proposed, OFF, ls_sel):.3f}",
                f"{recall_at(fq, fqp, proposed, gate, answerable & fq_sel):.3f} / {recall_at(fq, fqp, proposed, OFF, answerable & fq_sel):.3f}",
                empty_rate(other, gate, ls_sel), empty_rate(fqp, gate, offtopic_fq & fq_sel),
            ])  # fmt: skip
        # near misses: empty results whose nearest candidate was close to opening the gate
        near_rows = []
        for label, near_ceiling, near_margin in (
            ("today: nearest <= 2 x ceiling", 2 * gate.ceiling, None),
            (
                "nearest <= 1.1 x ceiling or margin >= 0.9 x M",
                1.1 * gate.ceiling,
                gate.margin and 0.9 * gate.margin,
            ),
        ):
            shares = []
            for k, sel in (("own", every), ("other", every), ("fq", answerable), ("fq", offtopic_fq)):
                opened = (nearest[k] <= gate.ceiling) | (
                    (margin[k] >= gate.margin) if gate.margin is not None else False
                )
                near = (nearest[k] <= near_ceiling) | ((margin[k] >= near_margin) if near_margin else False)
                emp = ~opened & sel
                shares.append(float((emp & near).sum() / max(emp.sum(), 1)))
            near_rows.append([label, *shares])
        size_rows = scope_size_check(run, name, gate)
        ref = RECOMMENDED_GATES.get(name, gate)
        around = []
        for c in (
            ref.ceiling - 0.04,
            ref.ceiling - 0.02,
            ref.ceiling,
            ref.ceiling + 0.02,
            ref.ceiling + 0.04,
        ):
            for m in (None,) if ref.margin is None else (ref.margin - 0.02, ref.margin, ref.margin + 0.02):
                g = Gate(round(c, 2), None if m is None else round(m, 2))
                around.append([
                    g.label(),
                    f"{recall_at(lc, own, proposed, g, every):.3f} / {rl0:.3f}",
                    f"{recall_at(fq, fqp, proposed, g, answerable):.3f} / {rf0:.3f}",
                    empty_rate(other, g, every), empty_rate(fqp, g, offtopic_fq),
                ])  # fmt: skip
        qs = (0.02, 0.05, 0.2, 0.5, 0.8, 0.95, 0.98)
        dist_rows = []
        for label, arr in (
            ("nearest: LoCoMo on-topic", nearest["own"]), ("nearest: LoCoMo off-topic", nearest["other"]),
            ("nearest: fact-QA answerable", nearest["fq"][answerable]), ("nearest: fact-QA off-topic", nearest["fq"][offtopic_fq]),
            ("median - nearest: LoCoMo on-topic", margin["own"]), ("median - nearest: LoCoMo off-topic", margin["other"]),
            ("median - nearest: fact-QA answerable", margin["fq"][answerable]), ("median - nearest: fact-QA off-topic", margin["fq"][offtopic_fq]),
        ):  # fmt: skip
            dist_rows.append([label, *[float(x) for x in np.quantile(arr, qs)]])
        threshold_parts += [
            f"### {name}",
            "",
            f"Ranking: the proposed one (KNN {KNN_POOL} + text {TEXT_POOL}, alpha {PROPOSED_ALPHA:g}, k1 {PROPOSED_K1:g}, "
            f"b {PROPOSED_B:g}, candidate IDF). Today's default ceiling for this embedder: {run.today_ceiling[name]:.2f}. "
            "`every hit`: a candidate is returned only if its own KNN distance is within the ceiling (today's rule; "
            "here applied after fusion); `every hit, fused distance`: the same on 2 x (1 - fused); `nearest only`: the ceiling decides whether the scope answers at all, and then "
            "the top 5 are returned whatever their distance. Recall@5 is `at the threshold / threshold off`.",
            "",
            table(
                [
                    "ceiling",
                    "applies to",
                    "LoCoMo recall@5",
                    "fact-QA recall@5",
                    "LoCoMo off-topic empty",
                    "fact-QA off-topic empty",
                ],
                rows,
            ),
            "",
            f"Calibrated gate (grid: ceiling 0.30-0.95 x margin none or 0.05-0.40, step 0.01; chosen on {half[0]} and the "
            "even-numbered fact-QA questions: the most LoCoMo off-topic empties among the gates losing at most 2 points "
            f"of recall@5 on both; the issue's goal is >= {EMPTY_GOAL:.2f}): **{gate.label()}**.",
            "",
            table(
                [
                    "questions",
                    "LoCoMo recall@5",
                    "fact-QA recall@5",
                    "LoCoMo off-topic empty",
                    "fact-QA off-topic empty",
                ],
                cal_rows,
            ),
            "",
            f"Around the recommended gate ({ref.label()}), all questions:",
            "",
            table(
                [
                    "gate",
                    "LoCoMo recall@5",
                    "fact-QA recall@5",
                    "LoCoMo off-topic empty",
                    "fact-QA off-topic empty",
                ],
                around,
            ),
            "",
            "What the gate reads: quantiles of the nearest candidate's cosine distance and of the margin (median "
            "KNN-50 distance minus the nearest).",
            "",
            table(["quantity", *[f"q{int(q * 100):02d}" for q in qs]], dist_rows),
            "",
            "Near-miss flag (share of the empty results it flags): on-topic LoCoMo questions left empty, off-topic "
            "LoCoMo questions, answerable fact-QA questions left empty, off-topic fact-QA requests.",
            "",
            table(
                [
                    "near miss when",
                    "LoCoMo on-topic empties",
                    "LoCoMo off-topic empties",
                    "fact-QA answerable empties",
                    "fact-QA off-topic empties",
                ],
                near_rows,
            ),
            "",
            "Scope size (numpy; every 4th LoCoMo question, 2 random draws each; every fact-QA question, 20 draws): the "
            "gate decided on scopes of n memories that hold the evidence plus random others (on-topic), or n random "
            "memories of the next conversation / of the facts (off-topic).",
            "",
            table(
                [
                    "n memories in scope",
                    "LoCoMo on-topic: gate opens",
                    "LoCoMo off-topic: gate opens",
                    "fact-QA answerable: opens",
                    "fact-QA off-topic: opens",
                ],
                size_rows,
            ),
            "",
        ]
        # summary rows
        today_gate = Gate(run.today_ceiling[name], per_hit=True)
        today = fused_exp(3.0, "today")
        for label, scorer, only_knn, g in (
            (f"{name}: dense, KNN 50", (lambda p: p.s), True, today_gate),
            (f"{name}: today's hybrid (HybridRanker(), KNN 50)", today, True, today_gate),
            (f"{name}: proposed ranking, today's threshold", proposed, False, today_gate),
            (
                f"{name}: proposed ranking + recommended gate",
                proposed,
                False,
                RECOMMENDED_GATES.get(name, gate),
            ),
        ):
            r = Ranks(label, first_hits(lc, own, scorer, only_knn))
            summary_rows.append([
                label, g.label(), r.hit(1), r.hit(5), r.hit(10), r.mrr(),
                f"{recall_at(lc, own, scorer, g, every, only_knn):.3f} / {recall_at(lc, own, scorer, OFF, every, only_knn):.3f}",
                f"{recall_at(fq, fqp, scorer, g, answerable, only_knn):.3f} / {recall_at(fq, fqp, scorer, OFF, answerable, only_knn):.3f}",
                empty_rate(other, g, every, only_knn), empty_rate(fqp, g, offtopic_fq, only_knn),
            ])  # fmt: skip
    bm = Ranks("bm25", results[0][2])
    summary_rows.insert(
        0,
        [
            "BM25, all turns (client)",
            "none",
            bm.hit(1),
            bm.hit(5),
            bm.hit(10),
            bm.mrr(),
            "n/a",
            "n/a",
            "n/a",
            "n/a",
        ],
    )
    summary = table(
        [
            "method",
            "threshold",
            "hit@1",
            "hit@5",
            "hit@10",
            "MRR@10",
            "LoCoMo recall@5 default / off",
            "fact-QA recall@5 default / off",
            "LoCoMo off-topic empty",
            "fact-QA off-topic empty",
        ],
        summary_rows,
    )
    parts += ["## 4. Thresholds", "", *threshold_parts]
    run.timings["analysis"] = time.perf_counter() - t_start
    parts += [
        "## Costs",
        "",
        f"Per query, p50: text `FT.SEARCH` (LIMIT {TEXT_FETCH}, reply parsing included) {statistics_median(lf.text_ms):.2f} ms, "
        f"KNN 50 through `search_candidates` {statistics_median(lf.knn_ms):.2f} ms, proposed fusion over the pool "
        f"(pure python, term cache warm) {statistics_median(timing):.2f} ms (pool of {np.mean([len(p.idx) for p in po]):.0f} on average).",
        "",
    ]
    return "\n".join(parts), summary


def statistics_median(xs: Sequence[float]) -> float:
    return float(np.median(xs)) if len(xs) else math.nan


def scope_size_check(run: Run, name: str, gate: Gate, draws: int = 20) -> list[list[Any]]:
    rng = np.random.default_rng(16)
    lc, fq = run.locomo, run.factqa
    v, qv = run.vectors[name]["locomo"]
    fv, fqv = run.vectors[name]["factqa"]
    scopes = lc.scopes()
    idx = {s: np.array([i for i, x in enumerate(lc.doc_scope) if x == s]) for s in scopes}
    nxt = {s: scopes[(i + 1) % len(scopes)] for i, s in enumerate(scopes)}

    def opens(d: FloatArray) -> bool:
        d = np.sort(d)[:KNN_POOL]
        return bool(d[0] <= gate.ceiling or (gate.margin is not None and np.median(d) - d[0] >= gate.margin))

    rows = []
    for n in (3, 5, 10, 20, 50, 100, 0):
        lo, lx, fa, fx = [], [], [], []
        for qi in range(0, len(lc.queries), 4):
            s = lc.query_scope[qi]
            ev = list(lc.evidence[qi])
            rest = np.array([j for j in idx[s] if j not in lc.evidence[qi]])
            other = idx[nxt[s]]
            for _ in range(2 if n else 1):
                sub = ev + (
                    list(rng.choice(rest, size=min(len(rest), max(0, n - len(ev))), replace=False))
                    if n
                    else list(rest)
                )
                lo.append(opens(1 - v[sub] @ qv[qi]))
                osub = rng.choice(other, size=min(n, len(other)), replace=False) if n else other
                lx.append(opens(1 - v[osub] @ qv[qi]))
        for qi in range(len(fq.queries)):
            ev = list(fq.evidence[qi])
            rest = np.array([j for j in range(len(fq.docs)) if j not in fq.evidence[qi]])
            for _ in range(draws if n else 1):
                sub = ev + (
                    list(rng.choice(rest, size=min(len(rest), max(0, n - len(ev))), replace=False))
                    if n
                    else list(rest)
                )
                (fa if ev else fx).append(opens(1 - fv[sub] @ fqv[qi]))
        rows.append(
            [
                "whole scope" if not n else str(n),
                float(np.mean(lo)),
                float(np.mean(lx)),
                float(np.mean(fa)),
                float(np.mean(fx)),
            ]
        )
    return rows


# -- main ---------------------------------------------------------------------------------------


def header(run: Run, seconds: float) -> str:
    from importlib.metadata import version

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _harness import cpu_count, cpu_model

    versions = ", ".join(f"{p} {version(p)}" for p in ("valkey", "numpy", "onnxruntime"))
    return (
        f"`bench/quality_fusion.py`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, run took {seconds:.0f} s on "
        f"{cpu_count()} cores ({cpu_model()}); {versions}; embedded engine (RediSearch 2.10). "
        f"{len(run.locomo.docs)} LoCoMo turns of {len(run.locomo.scopes())} conversations, {len(run.locomo.queries)} "
        f"questions (categories 1-4); fact-QA (`bench/data/factqa.json`): {len(run.factqa.docs)} facts, "
        f"{sum(1 for c in run.factqa.category if c == 0)} questions, {sum(1 for c in run.factqa.category if c == -1)} "
        "off-topic requests. Off-topic LoCoMo: each question asked in the next conversation's scope."
    )


async def main_async(args: argparse.Namespace) -> tuple[str, str]:
    wall = time.perf_counter()
    run = await collect(args)
    report, summary = analyse(run)
    seconds = time.perf_counter() - wall
    timings = "\n".join(
        [
            "## Timings",
            "",
            "| step | seconds |",
            "|---|---|",
            *[f"| {k} | {v:.1f} |" for k, v in run.timings.items()],
            f"| whole run | {seconds:.1f} |",
            "",
        ]
    )
    text = "\n".join([
        "# Retrieval quality research (issue 16)", "", header(run, seconds), "",
        RECOMMENDATION.strip(), "",
        "## Summary", "", summary, "", report, timings,
    ])  # fmt: skip
    return text, summary


RECOMMENDATION = """
## Recommendation (for the lead to port; numbers below are from this run)

Three changes, each measured separately below; together they meet the issue's goals for the ONNX embedder on the
benchmark scopes (LoCoMo hit@5 0.661, MRR@10 0.510, ahead of BM25 alone 0.587 and dense alone 0.420; the threshold
costs 1.4 points of recall@5 on LoCoMo and none on fact-QA; 87% of off-topic LoCoMo questions come back empty).

**1. Candidates: KNN 50 UNION the server's full-text hits (engines with TEXT).** Evidence in the pool: 0.753 -> 0.910
(KNN 100 alone: 0.839). Same round trip (pipelined with the KNN):

```
words  = [t for t in tokenize(query) if t not in ENGLISH_STOPWORDS and any(ch.isalnum() for ch in t)]  # unfolded: the server stems
filter = build_filter(flt, layout)                       # the same TAG scope as the KNN
esc(w) = backslash before every char that is not a letter or digit
RediSearch:           FT.SEARCH idx "(@content:esc(w1) filter)|(@content:esc(w2) filter)|..."
                          WITHSCORES SCORER BM25STD RETURN n content <ranking fields> LIMIT 0 50 DIALECT 2
valkey-search >= 1.2: per word, FT.SEARCH idx "@content:esc(w) filter" RETURN n content <ranking fields> LIMIT 0 50 DIALECT 2
                      then rank the union of the matches with lexical() below (IDF over the matches), keep the top 50
valkey-search 1.0:    no text query (no TEXT): KNN 50 only (today's path with the new fusion constants: hit@5 0.581, today 0.573)
text_only = text hits not among the KNN hits
dense distance of text_only: HGET <key> vector (pipelined, one more round trip) -> d = 1 - cos(query_vec, vec)
                             (or RETURN vector in the text query; ~1.5 KB per hit)
pool = KNN hits + text_only   (83 on average on LoCoMo)
```

The filter must sit inside every OR branch: with `filter @content:(w1|w2|...)` RediSearch 2.10 matches the same
documents but scores only one matching word for many of them (an evidence turn holding three of four words came
263rd, scored on the speaker's name alone); with the natural form the text top 50 held the evidence for 0.674 of the
questions, with the distributed form 0.818. On valkey-search 1.2.1 an OR of words drops stemmed matches (one word per
query works) and a KNN with a text pre-filter returned a document that does not match (RediSearch 2.10 returned
nothing there for words that match only through stemming: `(@content:w @threadId:{c})=>[KNN ...]` must not be used); it has no scorer, hence the client-side ranking of the per-word matches (simulated: same hit@5 as
the RediSearch path, 0.660 vs 0.661). Schema: no change. `create_index_args` already declares `content TEXT` when
`caps.text_fields`, and so does betterdb-agent-memory's index (`<name>:mem:idx`, `content TEXT` last), so an index
either library created serves the text query. An index without `content` (`IndexLayout` would record it) keeps the
KNN-only path.

**2. Fusion: keep today's formula, change the lexical score's BM25 constants and alpha.**

```
lexical_i = HybridRanker(k1=0.5, b=0.0).lexical_scores(query, [c.content for c in pool])   # IDF from the pool itself
dense_i   = 1 - d_i / 2
fused_i   = 1 - (1 - dense_i) * exp(-4.0 * lexical_i)            # alpha 3 -> 4
order by (-fused, -dense, id); composite score on fused as today
```

k1 0.5 / b 0 (no length normalisation: short memories; a long turn is not a weaker match) is the largest single gain
after the union (0.620 -> 0.661 on the same pool). IDF source: the candidate set, as today. Scope IDF (per-word counts
over the conversation) gives 0.665 and store-wide IDF 0.659, within noise of 0.661 and each needing per-word count
queries; the server's own BM25STD scores (store-wide IDF) rank worse (0.623: RediSearch counts a word twice when both
its surface form and its stem match, and uses b 0.5). Reciprocal-rank fusion loses (k 60: 0.540-0.548; tuned 0.639)
and a tuned convex combination only ties (0.665) while giving up the similarity scale the threshold and the composite
score use. All parameters were chosen on conversations 1-5; conversations 6-10 (held out) give 0.655.

**3. Threshold: a ceiling on the nearest candidate plus a margin, not a ceiling on every hit.**

```
ds      = KNN distances of the pool's KNN hits (the whole scope when it holds fewer than 50 memories)
nearest = min(ds); median = median(ds)
opens   = nearest <= T  or  (M is not None and median - nearest >= M)
if not opens: return []      # near miss when nearest <= 1.1 * T or (M and median - nearest >= 0.9 * M)
else:         return the top k by the fused composite score, no per-hit distance cut
T, M:  ONNX MiniLM  T 0.52, M 0.18
       hashing      T 0.76, M 0.09   (the off-topic goal is out of reach: 20% empty; it sees words, not topics)
       embed_fn     T 0.33 (the contract's default), M None: uncalibrated, so ceiling only
```

The goals conflict under today's rule. A per-hit distance ceiling that keeps fact-QA recall within 2 points (>= 0.75
for ONNX) leaves at most 10% of off-topic LoCoMo questions empty, and one that empties 80% loses 30-50 points of
fact-QA recall (0.55: 90% empty, fact-QA 0.438 against 0.925; 0.60: 75% empty, 0.588): questions in the first person sit 0.5-0.7 from the third-person fact that answers them,
exactly where another conversation's nearest turn sits. A ceiling on the fused distance 2 x (1 - fused) does not
help either: it lifts off-topic candidates that share everyday words, so at 0.50 only 44% of off-topic questions come
back empty while fact-QA already loses 25 points. What separates them is how much the nearest memory stands out from
the scope's other neighbours: median - nearest is >= 0.18 for 98% of answerable fact-QA questions and < 0.15 for 80% of
off-topic LoCoMo questions, while on-topic LoCoMo questions are caught by the ceiling (nearest <= 0.52 for 98%).
`threshold` keeps its scale (a cosine-distance ceiling) and its name; what changes is that it bounds the nearest
candidate, and that a second, per-embedder constant (the margin) admits a clearly-standing-out nearest
memory beyond it. Chosen on conversations 1-5 and half the fact-QA questions; on the held-out halves it loses 0.9
points on LoCoMo and none on fact-QA, with 85% off-topic empties. If "hit@5 >= 0.65" must hold with the threshold
on, take T 0.54 (same M): recall@5 0.656 against 0.661 off, fact-QA unchanged, 85% off-topic empties (83% on the
held-out conversations); see the table around the recommended gate. The near-miss rule above flags 91% of the on-topic
questions left empty and 12% of the off-topic ones (today's 2 x ceiling flags every empty result once the ceiling
is 0.52).

Caveats, measured below: the margin depends on how many memories the scope holds. On scopes of 20-100 memories the
off-topic empty rate falls to 62-77% (the median of a small scope is farther), and on 3-10 memories fewer answerable
questions open the gate (fact-QA 84-96%, LoCoMo 70-85% with the evidence turn among 3-10 random turns). The
fact-QA set is small (80 questions, 20 off-topic: one question is 1.25 points) and authored for this bench. Query-side normalisation (dates, names, framing words, number words) moved hit@5
by at most 0.4 points: not worth shipping.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of locomo10.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown report")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="embeddings and server replies (outside the repo)"
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data}", file=sys.stderr)
        return 0
    if REPO in args.cache.resolve().parents or args.cache.resolve() == REPO:
        print("--cache must be outside the repository (it holds data derived from LoCoMo)", file=sys.stderr)
        return 2
    text, summary = asyncio.run(main_async(args))
    print(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
