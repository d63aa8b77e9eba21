"""What re-ranking costs per recall: ``LearnedRanker`` and ``HybridRanker`` at 50 and 100 candidates.

The ranker runs in Python on every re-ranked recall, after the KNN query; issue 28's
goal is "ranking work per recall within about 0.5 ms of Python at 100 candidates".
This bench times ``rerank`` alone, on LoCoMo-like candidates:

* with the LoCoMo data (``--data``, default ``../shared/data/locomo10.json``) and the
  quality bench's embeddings cache (``$TMPDIR/quality-cache``): each question's exact
  cosine top 50 / 100 among its conversation's turns, with their distances and
  ``valid_from`` dates, as ``recall()`` sees them;
* with the data but no cached vectors: the conversation's turns sharing most words
  with the question first, distances drawn around MiniLM's typical spread;
* without the data: synthetic turns (``"Name: words ..."``) drawn from a fixed
  vocabulary, seeded, so every run times the same inputs.

The rankers' text caches are warm after the first rounds (the same memories come
back query after query, as in a store); ``--cold`` clears them before every call.

    .venv/bin/python bench/bench_rank.py                 # p50 / p90 at 50 and 100 candidates
    .venv/bin/python bench/bench_rank.py --profile 100   # cProfile of LearnedRanker at 100
    .venv/bin/python bench/bench_rank.py --against a954610   # also the ranker of that commit

Run it with ``PYTHONPATH=.`` from a worktree: the venv's editable install may import
another checkout's package.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import json
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from betterdb_memory.core import learned_rank, ranking
from betterdb_memory.core.learned_rank import LearnedRanker
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.ranking import HybridRanker

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "quality-cache" / "emb"
ONNX_MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"  # embedders.onnx.MODEL_ID, without loading the model
Candidates = list[tuple[MemoryItem, float]]
Query = tuple[str, Candidates]

_VOCAB = (
    "painting pottery camping beach sunset adoption agency counseling mentor support group "
    "concert guitar violin festival parade pride kids family dog cat horse library book novel "
    "poem recipe bake cookies garden flowers hiking mountain lake sweden grandma necklace career "
    "education psychology transgender community charity race marathon school teacher friends "
    "summer vacation trip museum painting sculpture canvas colours abstract class workshop job"
)
_COMMON = "i you we it was really so much that the and a to of in for with on just love think feel"
_WORDS, _FILLER = _VOCAB.split(), _COMMON.split()
_NAMES = ("Caroline", "Melanie", "Jon", "Gina", "Audrey", "Andrew")


def _session_ms(date: str) -> int:
    when = dt.datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _item(idx: int, conv: str, text: str, when: int, created: int) -> MemoryItem:
    return MemoryItem(
        id=f"{conv}-{idx:05d}", content=text, importance=0.5, created_at=created,
        last_accessed_at=created, access_count=0, thread_id=conv, valid_from=when,
    )  # fmt: skip


def synthetic(n_queries: int, size: int, seed: int = 7) -> list[Query]:
    """Seeded LoCoMo-like turns and questions (no data needed)."""
    rng = random.Random(seed)
    base = 1_682_000_000_000
    turns: list[MemoryItem] = []
    for i in range(600):
        words = [rng.choice(_WORDS if rng.random() < 0.35 else _FILLER) for _ in range(rng.randint(6, 40))]
        text = f"{_NAMES[i % 2]}: " + " ".join(words).capitalize() + "!"
        turns.append(_item(i, "conv-1", text, base + (i // 20) * 86_400_000 * 9, base + 10**9))
    out: list[Query] = []
    for _ in range(n_queries):
        q = f"What did {rng.choice(_NAMES[:2])} say about {rng.choice(_WORDS)} and {rng.choice(_WORDS)}"
        if rng.random() < 0.3:
            q += f" in {rng.choice(['May', 'June', 'July'])} 2023"
        picked = rng.sample(turns, size)
        dists = sorted(rng.gauss(0.75, 0.08) for _ in range(size))
        out.append((q + "?", list(zip(picked, dists, strict=True))))
    return out


def from_locomo(data: Path, cache: Path | None, n_queries: int, size: int) -> tuple[list[Query], str]:
    """LoCoMo questions with candidates from their conversation (exact KNN when vectors are cached)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import quality  # the bench's loader: the same turn text ("Speaker: words [shares ...]")

    turns, questions = quality.load(data, None)
    created = 1_764_000_000_000
    by_conv: dict[str, list[MemoryItem]] = {}
    for t in turns:
        conv = by_conv.setdefault(t.conv, [])
        conv.append(_item(len(conv), t.conv, t.text, t.valid_from or created, created))
    vectors = _cached(cache, [t.text for t in turns]), _cached(cache, [q.text for q in questions])
    step = max(1, len(questions) // n_queries)
    chosen = list(range(0, len(questions), step))[:n_queries]
    out: list[Query] = []
    if vectors[0] is not None and vectors[1] is not None:
        tvecs, qvecs = vectors
        offsets: dict[str, int] = {}
        at = 0
        for conv, items in by_conv.items():
            offsets[conv] = at
            at += len(items)
        for qi in chosen:
            q = questions[qi]
            items = by_conv[q.conv]
            sims = tvecs[offsets[q.conv] : offsets[q.conv] + len(items)] @ qvecs[qi]
            top = np.argsort(-sims, kind="stable")[:size]
            out.append((q.text, [(items[j], float(1.0 - sims[j])) for j in top]))
        return out, "LoCoMo questions, each with its exact cosine top-k (ONNX MiniLM vectors from the cache)"
    rng = random.Random(7)
    ranker = HybridRanker()
    for qi in chosen:
        q = questions[qi]
        words = set(ranker.terms(q.text))
        items = sorted(by_conv[q.conv], key=lambda it: (-len(words & set(ranker.terms(it.content))), it.id))
        dists = sorted(rng.gauss(0.75, 0.08) for _ in range(size))
        out.append((q.text, list(zip(items[:size], dists, strict=True))))
    return out, "LoCoMo questions, candidates by shared words (no cached vectors: distances drawn)"


def _cached(cache: Path | None, texts: Sequence[str]) -> np.ndarray | None:
    if cache is None:
        return None
    digest = hashlib.sha256("\x00".join([ONNX_MODEL_ID, *texts]).encode()).hexdigest()[:16]
    path = cache.with_name(f"{cache.stem}-{digest}.npy")
    return np.load(path) if path.exists() else None


def at_commit(rev: str) -> object:
    """``LearnedRanker`` as it was at git ``rev`` (its ``learned_rank`` and ``rank_arrays``), to time side by side."""
    import importlib.util
    import subprocess

    tag = "".join(c for c in rev if c.isalnum())
    core = "betterdb_memory/core"
    names = {"rank_arrays": f"_bench_rank_arrays_{tag}", "learned_rank": f"_bench_learned_rank_{tag}"}
    tmp = Path(tempfile.mkdtemp())
    modules = {}
    for module, name in names.items():
        src = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{core}/{module}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        src = src.replace("from . import rank_arrays", f"from . import {names['rank_arrays']}")
        src = src.replace("from .rank_arrays import", f"from .{names['rank_arrays']} import")
        (tmp / f"{name}.py").write_text(src, "utf-8")
        spec = importlib.util.spec_from_file_location(f"betterdb_memory.core.{name}", tmp / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        modules[module] = mod
    return modules["learned_rank"].LearnedRanker()


def clear_caches() -> None:
    learned_rank.profile.cache_clear()
    ranking._terms.cache_clear()
    ranking._term_counts.cache_clear()


def timed(
    ranker: object, queries: Sequence[Query], size: int, rounds: int, cold: bool
) -> tuple[list[float], list[float]]:
    """Wall and CPU (this thread's) milliseconds of each ``rerank``; a new question each call.

    CPU time leaves out the time the thread waited for a core: on a shared 2-core machine
    it is the steadier figure (both are reported).
    """
    rerank = ranker.rerank  # type: ignore[attr-defined]
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        for text, cands in queries:
            if cold:
                clear_caches()
            else:
                ranking._terms.cache_clear()  # the query's terms: a new question each recall
            part = cands[:size]
            c0, t0 = time.thread_time(), time.perf_counter()
            rerank(text, part)
            t1, c1 = time.perf_counter(), time.thread_time()
            wall.append((t1 - t0) * 1000)
            cpu.append((c1 - c0) * 1000)
    return wall, cpu


def check(queries: Sequence[Query], source: str) -> int:
    """Same order, scores within 1e-9, as the frozen copy of the ranker before issue 28's vectorisation."""
    sys.path.insert(0, str(REPO))
    from tests.unit.learned_rank_reference import ReferenceRanker

    new, old = LearnedRanker(), ReferenceRanker()
    worst, same_order, calls = 0.0, 0, 0
    for size in (10, 50, 100):
        for text, cands in queries:
            got, want = new.rerank(text, cands[:size]), old.rerank(text, cands[:size])
            a, b = new.scores(text, cands[:size]), old.scores(text, cands[:size])
            worst = max(worst, *(abs(x - y) for x, y in zip(a, b, strict=True)))
            worst = max(worst, *(abs(x[1] - y[1]) for x, y in zip(got, want, strict=True)))
            same_order += [it.id for it, _ in got] == [it.id for it, _ in want]
            calls += 1
    print(f"{source}: same order for {same_order}/{calls} recalls; largest score difference {worst:.3g}")
    return 0 if same_order == calls and worst <= 1e-9 else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json (optional)")
    parser.add_argument("--embeddings-cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--synthetic", action="store_true", help="ignore --data")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="clear the text caches before every call")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile LearnedRanker at N")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--check", action="store_true", help="compare with the frozen pre-vectorisation ranker (tests/unit)"
    )
    parser.add_argument(
        "--reference", action="store_true", help="also time the frozen pre-vectorisation ranker (tests/unit)"
    )
    parser.add_argument("--against", default=None, metavar="REV", help="also time LearnedRanker at git REV")
    args = parser.parse_args(argv)
    if args.data.exists() and not args.synthetic:
        queries, source = from_locomo(args.data, args.embeddings_cache, args.queries, 100)
    else:
        queries, source = synthetic(args.queries, 100), "synthetic LoCoMo-like turns (seeded)"
    if args.check:
        return check(queries, source)
    rankers: dict[str, object] = {"LearnedRanker": LearnedRanker(), "HybridRanker": HybridRanker()}
    if args.reference:
        sys.path.insert(0, str(REPO))
        from tests.unit.learned_rank_reference import ReferenceRanker

        rankers["LearnedRanker before issue 28's vectorisation"] = ReferenceRanker()
    if args.against:
        rankers[f"LearnedRanker at {args.against}"] = at_commit(args.against)
    if args.profile:
        timed(rankers["LearnedRanker"], queries, args.profile, 1, args.cold)  # warm
        prof = cProfile.Profile()
        prof.enable()
        timed(rankers["LearnedRanker"], queries, args.profile, args.rounds, args.cold)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return 0
    print(
        f"{source}; {len(queries)} queries x {args.rounds} rounds; caches {'cold' if args.cold else 'warm'}"
    )
    print("| ranker | candidates | p10 ms | p50 ms | p90 ms | CPU p50 ms |")
    print("|---|---|---|---|---|---|")
    figures: dict[str, dict[str, float]] = {}
    for size in (50, 100):
        for ranker in rankers.values():
            timed(ranker, queries, size, 1, args.cold)  # warm the caches and the code paths
        # Interleaved call by call (each question through every ranker in turn, the first
        # one rotating): load from other processes drifts into every row alike.
        samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in rankers}
        names = list(rankers)
        for r in range(args.rounds):
            for qi, query in enumerate(queries):
                turn = (r + qi) % len(names)
                for name in names[turn:] + names[:turn]:
                    wall, cpu = timed(rankers[name], [query], size, 1, args.cold)
                    samples[name][0].extend(wall)
                    samples[name][1].extend(cpu)
        for name, (ms, cpu_ms) in samples.items():
            p10, p50, p90 = (float(np.percentile(ms, p)) for p in (10, 50, 90))
            cpu50 = float(np.percentile(cpu_ms, 50))
            figures[f"{name}@{size}"] = {"p10": p10, "p50": p50, "p90": p90, "cpu_p50": cpu50}
            print(f"| {name} | {size} | {p10:.3f} | {p50:.3f} | {p90:.3f} | {cpu50:.3f} |")
        for name in names[1:]:  # per call, the same question: the first ranker's cost over this one's
            ratio = np.median(np.array(samples[names[0]][1]) / np.maximum(1e-9, samples[name][1]))
            print(f"|   {names[0]} / {name}, CPU per call, median | {size} | | {ratio:.3f} | | |")
    if args.json:
        args.json.write_text(json.dumps({"source": source, "figures": figures}, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
