"""MkDocs hooks: the benchmark result files become pages of the site, unchanged.

``bench/results/*.md`` (and the charts beside them) are written by the bench scripts,
each with its date, the machine and the command that made it in its first lines. They
stay where the scripts write them; this hook adds them to the site under
``benchmarks/results/`` so a new run shows up with no copy to keep in step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def on_files(files: Files, config: Any) -> Files:
    for path in sorted(RESULTS.iterdir()):
        if path.suffix in {".md", ".png", ".svg"}:
            uri = f"benchmarks/results/{path.name}"
            if path.suffix == ".md":
                files.append(File.generated(config, uri, content=path.read_text(encoding="utf-8")))
            else:
                files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
