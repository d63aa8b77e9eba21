"""Issue 28 lab experiments on exploratory features, each direction of the issue as one command.

    PYTHONPATH=. .venv/bin/python bench/quality_lab_experiments.py pool     # (a) the pool's ceiling
    PYTHONPATH=. .venv/bin/python bench/quality_lab_experiments.py fusion   # (d) hand-set fusion vs learned
    PYTHONPATH=. .venv/bin/python bench/quality_lab_experiments.py labonly  # neighbours, dates (what a recall lacks)
    PYTHONPATH=. .venv/bin/python bench/quality_lab_experiments.py context  # (b) embed "speaker said, ..." (+ date)
    PYTHONPATH=. .venv/bin/python bench/quality_lab_experiments.py long     # (c) long memories: truncation vs windows

Everything learned is fitted on nine conversations and scored on the tenth, for each
of the ten (leave-one-conversation-out): the figures are held-out figures only. The
shipped features' experiments are in ``bench/quality_lab_shipped.py``; the fit in
``bench/train_learned_rank.py``.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import quality_lab as L
from quality_lab_features import Table, table

FloatArray = npt.NDArray[np.float64]
SEED = 28


# -- learning (numpy only) ------------------------------------------------------------------------


def _standardise(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    return mu, sd


def fit_logistic(x: FloatArray, y: FloatArray, l2: float = 1.0, iters: int = 30) -> FloatArray:
    """L2-regularised logistic regression by Newton's method; weights (last: intercept) on raw features."""
    mu, sd = _standardise(x)
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + reg * w
        h = (z * (p * (1 - p))[:, None]).T @ z + np.diag(reg + 1e-9)
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w[:-1] / sd
    return np.append(raw, w[-1] - float(raw @ mu))


def pairs_of(
    label: npt.NDArray[np.bool_], group: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(positive row, negative row) for every pair within a question."""
    pos_rows: list[int] = []
    neg_rows: list[int] = []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], len(group)]
    for s, e in zip(starts, ends, strict=True):
        pos = np.flatnonzero(label[s:e]) + s
        neg = np.flatnonzero(~label[s:e]) + s
        for p in pos:
            pos_rows.extend([p] * len(neg))
            neg_rows.extend(neg.tolist())
    return np.array(pos_rows, dtype=np.int64), np.array(neg_rows, dtype=np.int64)


def fit_pairwise(
    x: FloatArray, label: npt.NDArray[np.bool_], group: npt.NDArray[np.int64], l2: float = 1.0
) -> FloatArray:
    """A linear RankNet: logistic loss on (positive - negative) feature differences within a question."""
    pos, neg = pairs_of(label, group)
    _mu, sd = _standardise(x)
    d = (x[pos] - x[neg]) / sd
    w = np.zeros(d.shape[1])
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(-(d @ w)))
        grad = d.T @ (p - 1.0) + l2 * w
        h = (d * (p * (1 - p))[:, None]).T @ d + l2 * np.eye(len(w))
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w / sd
    return np.append(raw, 0.0)


Fitter = Callable[[Table, npt.NDArray[np.bool_]], FloatArray]


def cv_scores(t: Table, fitter: Fitter) -> FloatArray:
    """Each row's score from a model fitted without its conversation (leave one conversation out)."""
    out = np.zeros(len(t.label))
    for c in np.unique(t.conv):
        train = t.conv != c
        w = fitter(t, train)
        test = ~train
        out[test] = t.x[test] @ w[:-1] + w[-1]
    return out


def order_by(
    lab: L.Lab, t: Table, score: FloatArray, closed: Sequence[bool] | None = None
) -> list[list[str]]:
    """Per question: turn keys by score (ties: dense, then key); empty where the gate is closed."""
    dense = t.col("dense")
    keys = [tt.key for tt in lab.data.turns]
    out: list[list[str]] = [[] for _ in lab.data.questions]
    starts = np.flatnonzero(np.r_[True, t.group[1:] != t.group[:-1]])
    ends = np.r_[starts[1:], len(t.group)]
    for s, e in zip(starts, ends, strict=True):
        qi = int(t.group[s])
        if closed is not None and closed[qi]:
            continue
        idx = sorted(range(s, e), key=lambda r: (-score[r], -dense[r], keys[t.turn[r]]))
        out[qi] = [keys[t.turn[r]] for r in idx[: L.TOP]]
    return out


def hybrid_score(t: Table, alpha: float = 4.0) -> FloatArray:
    """Today's fusion: -ln(1 - fused) = -ln(1 - dense) + alpha * lexical, on the 0..1 similarity."""
    sim = 1.0 - (1.0 - t.col("dense")) / 2.0  # dense column is the cosine; the store's similarity
    return -np.log(np.maximum(1.0 - sim, 1e-9)) + alpha * t.col("lexical")


def gate_closed(
    lab: L.Lab, ps: Sequence[L.Pool], ceiling: float | None = None, margin: float | None = -1.0
) -> list[bool]:
    """Whether ``core.ranking.Gate`` closes for each pool (its KNN distances)."""
    from betterdb_memory.core.ranking import Gate

    g = Gate(
        lab.capture.threshold if ceiling is None else ceiling,
        lab.capture.margin if margin == -1.0 else margin,
    )
    return [not g.opens([float(d) for d in p.distance[: p.knn_n]]) for p in ps]


def fitter_for(names: Sequence[str], kind: str = "pairwise", l2: float = 1.0) -> Fitter:
    def fit(t: Table, train: npt.NDArray[np.bool_]) -> FloatArray:
        cols = [t.names.index(n) for n in names]
        x = t.x[train][:, cols]
        if kind == "logistic":
            w = fit_logistic(x, t.label[train].astype(np.float64), l2)
        else:
            w = fit_pairwise(x, t.label[train], t.group[train], l2)
        full = np.zeros(len(t.names) + 1)
        full[cols] = w[:-1]
        full[-1] = w[-1]
        return full

    return fit


# -- directions ---------------------------------------------------------------------------------


def pool_ceiling(lab: L.Lab) -> str:
    """(a) Share of questions with an evidence turn anywhere in the pool, per category and pool shape."""
    qs = lab.data.questions
    lines = [
        "| pool | size (mean) | any | " + " | ".join(L.CATEGORIES.values()) + " |",
        "|---|---|---|---|---|---|---|",
    ]
    for knn, text in (
        (10, 0),
        (50, 0),
        (100, 0),
        (200, 0),
        (0, 50),
        (0, 200),
        (50, 50),
        (50, 100),
        (100, 50),
        (100, 100),
        (200, 200),
    ):
        ps = L.pools(lab, knn=knn, text=text)
        inside = [
            any(lab.data.turns[j].key in q.evidence for j in p.turns) for p, q in zip(ps, qs, strict=True)
        ]
        cells = [
            f"{np.mean([x for x, q in zip(inside, qs, strict=True) if q.category == c]):.3f}"
            for c in L.CATEGORIES
        ]
        size = np.mean([len(p.turns) for p in ps])
        lines.append(
            f"| KNN {knn} + text {text} | {size:.0f} | {np.mean(inside):.3f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


BASE = ["dense", "lexical"]
SHIPPABLE = [
    "dense", "dense_gap", "dense_z", "lexical", "bm25_store", "coverage", "rarest", "proximity",
    "text_only", "dense_rr", "lex_rr", "log_len", "speaker",
]  # fmt: skip
LAB_ONLY = ["month", "year", "prev_lex", "next_lex"]


def fusion(
    lab: L.Lab,
    extra: dict[str, tuple[FloatArray, FloatArray]] | None = None,
    ps: Sequence[L.Pool] | None = None,
) -> tuple[str, dict[str, FloatArray], Table]:
    """(d) Today's fusion vs learned rankers, held-out figures (LOCO), gate as shipped."""
    ps = L.pools(lab) if ps is None else ps
    t0 = time.perf_counter()
    t = table(lab, ps, extra_dense=extra)
    print(f"  features: {len(t.label)} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    closed = gate_closed(lab, ps)
    lines = [L.HEADER]
    results: dict[str, FloatArray] = {}

    def add(name: str, score: FloatArray) -> None:
        results[name] = score
        lines.append(L.scores(lab, order_by(lab, t, score, closed)).row(name))

    add("dense (gate as shipped)", t.col("dense"))
    add("today's fusion, alpha 4", hybrid_score(t))
    add("lexical alone (pool IDF)", t.col("lexical") + 1e-3 * t.col("dense"))
    add("BM25 store IDF alone", t.col("bm25_store") + 1e-3 * t.col("dense"))
    add("LR pointwise: dense + lexical", cv_scores(t, fitter_for(BASE, "logistic")))
    add("pairwise: dense + lexical", cv_scores(t, fitter_for(BASE)))
    add("LR pointwise: shippable", cv_scores(t, fitter_for(SHIPPABLE, "logistic")))
    add("pairwise: shippable", cv_scores(t, fitter_for(SHIPPABLE)))
    for drop in SHIPPABLE:
        names = [n for n in SHIPPABLE if n != drop]
        add(f"pairwise: shippable - {drop}", cv_scores(t, fitter_for(names)))
    add(
        "pairwise: shippable + lab-only (month, year, neighbours)",
        cv_scores(t, fitter_for(SHIPPABLE + LAB_ONLY)),
    )
    if extra:
        add("pairwise: shippable + extra dense", cv_scores(t, fitter_for(SHIPPABLE + list(extra))))
    return "\n".join(lines), results, t


_SPEAKER = re.compile(r"^\s*([^\W\d_][\w'.-]*(?: [^\W\d_][\w'.-]*){0,2})\s*:", re.UNICODE)


def said_text(content: str) -> str:
    """``Speaker said, "words"`` for content opening with one to three words and a colon, else the content.

    The rule a package could apply to any memory (``LearnedRanker``'s speaker pattern),
    unlike the ``said`` variant, which rebuilds the text from LoCoMo's fields (the caption
    as "and shared ..."). Measured (issue 28, round two): held out 0.764 / 0.598 against
    0.753 / 0.600 with the content itself: not shipped.
    """
    match = _SPEAKER.match(content[:48])
    words = content[match.end() :].strip() if match else ""
    if match is None or not words or words.startswith("//"):
        return content
    return f'{match.group(1)} said, "{words}"'


def context_texts(lab: L.Lab, variant: str) -> list[str]:
    """The text embedded for the dense side of each turn (``content`` itself is unchanged)."""
    turns = lab.data.turns
    out = []
    for i, t in enumerate(turns):
        said = f'{t.speaker} said, "{t.text}"' + (f" and shared {t.caption}." if t.caption else "")
        prev = (
            turns[i - 1] if i and turns[i - 1].conv == t.conv and turns[i - 1].session == t.session else None
        )
        if variant == "said":
            out.append(said)
        elif variant == "said_rule":  # a rule a package could apply to any stored content
            out.append(said_text(t.content))
        elif variant == "date_said":
            out.append(f"({t.date}) {said}")
        elif variant == "prev_content":
            out.append((f"{prev.content}\n" if prev else "") + t.content)
        elif variant == "date_said_prev":
            ctx = f'{prev.speaker} said, "{prev.text}"\n' if prev else ""
            out.append(f"({t.date}) {ctx}{said}")
        else:
            raise ValueError(variant)
    return out


VARIANTS = ("said", "date_said", "prev_content", "date_said_prev")


def gate_grid(
    lab: L.Lab, ranked_in: Sequence[Sequence[str]], ps_in: Sequence[L.Pool], ps_off: Sequence[L.Pool]
) -> tuple[str, tuple[float, float]]:
    """Ceiling x margin of ``Gate``: chosen on nine conversations, scored on the tenth (held out)."""
    qs = lab.data.questions
    conv = np.array([lab.data.convs.index(q.conv) for q in qs])
    hit5 = np.array(
        [
            L.first_hit(r, q.evidence) is not None and L.first_hit(r, q.evidence) < 5
            for r, q in zip(ranked_in, qs, strict=True)
        ]
    )
    near_in = np.array([p.distance[: p.knn_n].min() for p in ps_in])
    med_in = np.array([np.median(p.distance[: p.knn_n]) for p in ps_in])
    near_off = np.array([p.distance[: p.knn_n].min() for p in ps_off])
    med_off = np.array([np.median(p.distance[: p.knn_n]) for p in ps_off])
    ceilings = np.round(np.arange(0.30, 0.80, 0.01), 2)
    margins = [None, *np.round(np.arange(0.05, 0.40, 0.01), 2)]

    def opens(near: FloatArray, med: FloatArray, c: float, m: float | None) -> npt.NDArray[np.bool_]:
        return (near <= c) | ((med - near >= m) if m is not None else np.zeros(len(near), bool))

    def choose(sel: npt.NDArray[np.bool_]) -> tuple[float, float | None]:
        best, arg = -1.0, (0.5, None)
        for c in ceilings:
            for m in margins:
                o_in = opens(near_in[sel], med_in[sel], c, m)
                empty = 1 - opens(near_off[sel], med_off[sel], c, m).mean()
                if empty < 0.82:  # a little above the 0.80 goal: the held-out fold must hold it too
                    continue
                r = (hit5[sel] & o_in).mean()
                if r > best:
                    best, arg = r, (float(c), m)
        return arg

    held_hit = np.zeros(len(qs), bool)
    held_empty = np.zeros(len(qs), bool)
    chosen = []
    for c in range(len(lab.data.convs)):
        test = conv == c
        ceil, marg = choose(~test)
        chosen.append((ceil, marg))
        held_hit[test] = hit5[test] & opens(near_in[test], med_in[test], ceil, marg)
        held_empty[test] = ~opens(near_off[test], med_off[test], ceil, marg)
    full = choose(np.ones(len(qs), bool))
    text = (
        f"held-out (LOCO) gate: recall@5 {held_hit.mean():.3f} vs {hit5.mean():.3f} with the gate off "
        f"(cost {hit5.mean() - held_hit.mean():.3f}); off-topic empty {held_empty.mean():.3f}; "
        f"per-fold choices {sorted(set(chosen), key=str)}; fitted on all: ceiling {full[0]}, margin {full[1]}"
    )
    return text, (full[0], full[1] if full[1] is not None else math.nan)


def context(lab: L.Lab) -> str:
    """(b) Dense side embeds the turn's meaning: speaker said / date / previous turn."""
    parts = []
    for variant in ("plain", *VARIANTS):
        if variant == "plain":
            tv = lab.tvecs
        else:
            tv = lab.vectors(f"turns-{variant}", context_texts(lab, variant))
        ps = L.pools(lab, tv)
        ps_off = L.pools(lab, tv, off_topic=True)
        dense_only = [[lab.data.turns[j].key for j in p.turns[: p.knn_n][: L.TOP]] for p in ps]
        text, results, t = fusion_min(lab, ps)
        parts.append(
            f"### {variant}\n\n{L.HEADER}\n{L.scores(lab, dense_only).row('dense KNN order (no gate)')}\n{text}"
        )
        open_all = [False] * len(ps)
        for name in ("today's fusion, alpha 4", "pairwise: shippable"):
            ranked = order_by(lab, t, results[name], open_all)
            g, _ = gate_grid(lab, ranked, ps, ps_off)
            shipped_gate = np.mean(gate_closed(lab, ps_off))
            parts.append(f"- {name}: {g}; today's gate: off-topic empty {shipped_gate:.3f}")
    return "\n\n".join(parts)


def fusion_min(lab: L.Lab, ps: Sequence[L.Pool]) -> tuple[str, dict[str, FloatArray], Table]:
    t = table(lab, ps)
    closed = gate_closed(lab, ps)
    lines = []
    results = {
        "today's fusion, alpha 4": hybrid_score(t),
        "pairwise: shippable": cv_scores(t, fitter_for(SHIPPABLE)),
    }
    for name, score in results.items():
        lines.append(L.scores(lab, order_by(lab, t, score, closed)).row(name + " (gate as shipped)"))
    return "\n".join(lines), results, t


def long_memories(lab: L.Lab, convs: int = 3) -> str:
    """(c) No LoCoMo turn passes 256 tokens (the longest is 118), so: each session stored as ONE memory.

    A question hits a session when one of its evidence turns is in it; sessions are
    ranked within the question's conversation (19-32 sessions each). Vectors: the
    first 256 tokens (today), token windows of 256 mean-pooled into one vector, or
    each window a vector of its own (the best window scores the memory).
    """
    from betterdb_memory.embedders import OnnxEmbedder

    emb = OnnxEmbedder(batch_size=16)
    emb._ensure_loaded()
    tok = emb._tokenizer
    tok.no_truncation()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    docs: list[tuple[str, int, str]] = []  # (conv, session, text)
    for conv, idx in list(lab.data.by_conv.items())[:convs]:
        sessions: dict[int, list[str]] = {}
        for j in idx:
            sessions.setdefault(lab.data.turns[j].session, []).append(lab.data.turns[j].content)
        docs += [(conv, s, "\n".join(ts)) for s, ts in sessions.items()]
    ids = [e.ids[1:-1] for e in tok.encode_batch([d[2] for d in docs])]
    width = 254
    windows: list[tuple[int, list[int]]] = []
    for di, seq in enumerate(ids):
        for k in range(0, max(len(seq), 1), width):
            windows.append((di, [cls_id, *seq[k : k + width], sep_id]))
    t0 = time.perf_counter()
    path = lab.cache / f"emb-session-windows-{len(windows)}.npy"
    if path.exists():
        wv = np.load(path)
    else:
        wv = np.concatenate(
            [emb._run([w for _, w in windows[i : i + 16]]) for i in range(0, len(windows), 16)]
        )
        np.save(path, wv)
    seconds = time.perf_counter() - t0
    owner = np.array([d for d, _ in windows])
    first = np.array([wv[np.flatnonzero(owner == d)[0]] for d in range(len(docs))])
    pooled = np.array([wv[owner == d].mean(axis=0) for d in range(len(docs))])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    qs = lab.data.questions
    doc_of = {(c, s): i for i, (c, s, _) in enumerate(docs)}
    rows: dict[str, list[int | None]] = {
        "first 256 tokens (today)": [],
        "windows mean-pooled, one vector": [],
        "one vector per window (max)": [],
    }
    kept = [qi for qi, q in enumerate(qs) if any(c == q.conv for c, _, _ in docs)]
    for qi in kept:
        q = qs[qi]
        mine = [i for i, (c, _, _) in enumerate(docs) if c == q.conv]
        want = {
            doc_of[(q.conv, lab.data.turns[lab.data.index[k]].session)]
            for k in q.evidence
            if k in lab.data.index
        }
        qv = lab.qvecs[qi]
        sims = {
            "first 256 tokens (today)": first[mine] @ qv,
            "windows mean-pooled, one vector": pooled[mine] @ qv,
            "one vector per window (max)": np.array([max(wv[owner == d] @ qv) for d in mine]),
        }
        for name, s in sims.items():
            order = [mine[i] for i in np.argsort(-s, kind="stable")]
            rows[name].append(next((r for r, d in enumerate(order) if d in want), None))
    cats = [qs[qi].category for qi in kept]
    lengths = np.array([len(s) + 2 for s in ids])
    lines = [
        f"{len(docs)} session memories of the first {convs} conversations ({len(kept)} questions), tokens per memory: median {np.median(lengths):.0f}, max {lengths.max()}, "
        f"share over 256: {np.mean(lengths > 256):.3f}; {len(windows)} windows of <= 256 tokens "
        f"({len(windows) / len(docs):.1f} per memory), embedded in {seconds:.1f} s "
        f"({len(windows) / max(seconds, 1e-9):.1f} windows/s on this machine, 0 if cached)",
        "",
        "| dense vector of a session memory | hit@1 | hit@3 | hit@5 | MRR@10 | "
        + " | ".join(f"hit@3 {n}" for n in L.CATEGORIES.values())
        + " |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, ranks in rows.items():
        sc = L.Scores(ranks, cats)
        lines.append(
            f"| {name} | {sc.hit(1):.3f} | {sc.hit(3):.3f} | {sc.hit(5):.3f} | {sc.mrr():.3f} | "
            + " | ".join(f"{sc.hit(3, c):.3f}" for c in L.CATEGORIES)
            + " |"
        )
    return "\n".join(lines)


def cached_table(lab: L.Lab, name: str = "plain") -> tuple[list[L.Pool], Table]:
    """The feature table of the default pools (cached under the lab's cache: ~30 s to build)."""
    import pickle

    ps = L.pools(lab)
    path = lab.cache / f"table-{name}.pkl"
    if path.exists():
        return ps, pickle.loads(path.read_bytes())
    t = table(lab, ps)
    path.write_bytes(pickle.dumps(t))
    return ps, t


def lab_only(lab: L.Lab) -> str:
    """What the features a recall does not have today would be worth (held out)."""
    ps, t = cached_table(lab)
    closed = gate_closed(lab, ps)
    lines = [L.HEADER]
    for name, names in (
        ("pairwise: shippable", SHIPPABLE),
        ("+ month, year (session date: the time-aware issue)", [*SHIPPABLE, "month", "year"]),
        ("+ neighbours' lexical (any turn)", [*SHIPPABLE, "prev_lex", "next_lex"]),
        ("+ neighbours' lexical (neighbour in the pool)", [*SHIPPABLE, "prev_pool", "next_pool"]),
        ("+ best neighbour within 3 turns in the pool", [*SHIPPABLE, "near3"]),
        ("+ previous / next candidate in thread order (any gap)", [*SHIPPABLE, "prev_seq", "next_seq"]),
        ("all", [*SHIPPABLE, *LAB_ONLY, "prev_pool", "next_pool"]),
    ):
        lines.append(L.scores(lab, order_by(lab, t, cv_scores(t, fitter_for(names)), closed)).row(name))
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    lab = L.open_lab()
    what = argv[0] if argv else "fusion"
    if what == "pool":
        print(pool_ceiling(lab))
    elif what == "labonly":
        print(lab_only(lab))
    elif what == "long":
        print(long_memories(lab))
    elif what == "context":
        print(context(lab))
    elif what == "fusion":
        text, _, _ = fusion(lab)
        print(text)
    else:
        print(f"unknown: {what}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
