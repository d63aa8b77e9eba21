"""MkDocs hooks: the benchmark result files become pages of the site, unchanged.

``bench/results/*.md`` (and the charts beside them) are written by the bench scripts,
each with its date, the machine and the command that made it in its first lines. They
stay where the scripts write them; this hook adds them to the site under
``benchmarks/results/`` so a new run shows up with no copy to keep in step. A result file
whose opening lines carry no date gets one, the date of the commit that last changed it,
so every results page says when it was made.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def dated(path: Path) -> str:
    """The file's text; with a "Recorded" line under its title when its head has no date."""
    text = path.read_text(encoding="utf-8")
    if DATE.search("\n".join(text.splitlines()[:6])):
        return text
    out = subprocess.run(
        ["git", "log", "-1", "--format=%cs", "--", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    when = out.stdout.strip() or "not yet committed"
    title, _, rest = text.partition("\n")
    return (
        f"{title}\n\n*Recorded: {when} (the commit that last changed `bench/results/{path.name}`).*\n{rest}"
    )


def on_files(files: Files, config: Any) -> Files:
    for path in sorted(RESULTS.iterdir()):
        if path.suffix in {".md", ".png", ".svg"}:
            uri = f"benchmarks/results/{path.name}"
            if path.suffix == ".md":
                files.append(File.generated(config, uri, content=dated(path)))
            else:
                files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
