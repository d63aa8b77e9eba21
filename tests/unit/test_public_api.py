"""The package's public surface is curated: sorted, importable, free of I/O on import."""

from __future__ import annotations

import subprocess
import sys

import betterdb_memory


def test_all_is_sorted_and_resolves() -> None:
    assert betterdb_memory.__all__ == sorted(betterdb_memory.__all__)
    for name in betterdb_memory.__all__:
        assert hasattr(betterdb_memory, name), name


def test_import_loads_no_optional_dependency() -> None:
    """Importing the package loads neither onnxruntime, openai nor posthog (extras are lazy)."""
    code = (
        "import sys, betterdb_memory; "
        "bad = [m for m in ('onnxruntime', 'openai', 'posthog', 'tokenizers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_error_families() -> None:
    from betterdb_memory import (
        BetterDBMemoryError,
        ConfigurationError,
        IndexNotFoundError,
        ServerError,
        StoreConnectionError,
        ValidationError,
    )

    assert issubclass(ValidationError, ValueError) and issubclass(ConfigurationError, ValidationError)
    assert issubclass(IndexNotFoundError, ServerError)
    for cls in (ServerError, ValidationError, StoreConnectionError):
        assert issubclass(cls, BetterDBMemoryError)
