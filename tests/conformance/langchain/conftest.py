"""Fixtures for LangChain's standard suites, on the session's real engine.

This folder runs with its own ini (``pytest.ini`` here, ``make conformance-langchain``):
under the project's configuration (``make test``) it is not collected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from betterdb_memory import HashingEmbedder, SyncMemoryStore
from tests.conftest import unique_name, valkey_url

__all__ = ["sync_store", "unique_name", "valkey_url"]

HERE = Path(__file__).parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave this folder to its own ini: the project's run collects none of it."""
    if config.inipath is not None and config.inipath.parent == HERE:
        return None
    return collection_path.is_relative_to(HERE) and collection_path != HERE / "conftest.py"


@pytest.fixture
def sync_store(valkey_url: str, unique_name: str) -> Iterator[SyncMemoryStore]:
    """An empty ``SyncMemoryStore`` of its own name, with the hashing embedder."""
    with SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder()) as store:
        yield store
