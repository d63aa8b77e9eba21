"""The observability package's public surface is curated and importable without I/O."""

from __future__ import annotations

import importlib
import subprocess
import sys

import betterdb_memory.observability as obs


def test_all_is_sorted_and_resolves() -> None:
    """__all__ is sorted and every name in it exists."""
    assert obs.__all__ == sorted(obs.__all__)
    for name in obs.__all__:
        assert hasattr(obs, name), name


def test_submodules_all_resolve() -> None:
    """Each module's __all__ names exist (their order is ruff's RUF022, isort-style)."""
    for mod in ("discovery", "live_config", "metrics", "telemetry", "tracing"):
        module = importlib.import_module(f"betterdb_memory.observability.{mod}")
        for name in module.__all__:
            assert hasattr(module, name), f"{mod}.{name}"


def test_importing_does_not_load_posthog() -> None:
    """posthog (and its network machinery) is imported only when telemetry is active."""
    code = (
        "import sys, betterdb_memory.observability as o; "
        "o.Telemetry().capture('store.opened'); "
        "assert 'posthog' not in sys.modules, 'posthog imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
