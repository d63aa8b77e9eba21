"""backend.index: the name queried, switches seen by the live-config refresh, refused features."""

from __future__ import annotations

import pytest

from betterdb_memory.backend.index import IndexManager
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.query import IndexLayout
from betterdb_memory.embedders import HashingEmbedder
from betterdb_memory.errors import ConfigurationError
from betterdb_memory.testing import RecordingBackend


def manager() -> IndexManager:
    return IndexManager(RecordingBackend(), KeySpace("s"), HashingEmbedder(8))


def test_the_name_queried_starts_as_the_reference_name() -> None:
    m = manager()
    assert m.name == "s:mem:idx" and m.spec.index == "s:mem:idx"


def test_require_refuses_a_feature_whose_fields_the_index_lacks() -> None:
    m = manager()
    m.require(["valid_from"], feature="as_of")  # an index this process made: every field
    m.layout = IndexLayout.from_fields(["vector", "created_at"], case_sensitive=True)
    with pytest.raises(ConfigurationError) as err:
        m.require(["valid_from", "created_at"], feature="as_of")
    assert err.value.code == "configuration.index_outdated"
    assert err.value.details["fields"] == ["valid_from"]
    assert "betterdb-memory reindex" in str(err.value) and "migrate_index" in str(err.value)


def test_a_switch_seen_by_the_live_config_refresh_makes_the_next_call_relocate() -> None:
    m = manager()
    m.observe_meta("s:mem:idx:g1", "1")
    assert not m._stale  # not ready yet: the first ensure_ready reads the meta anyway
    m.ready = True
    m.observe_meta(None, None)  # a store never switched
    m.observe_meta("s:mem:idx", "0")
    assert not m._stale
    m.observe_meta("s:mem:idx:g1", "1")
    assert m._stale


def test_queries_built_for_an_earlier_name_are_redirected_to_the_one_in_use() -> None:
    m = manager()
    m.backend.redirects = {}  # type: ignore[attr-defined]  # what ValkeyBackend has
    m._rename("s:mem:idx:g1")
    assert m.backend.redirects == {"s:mem:idx": "s:mem:idx:g1"}  # type: ignore[attr-defined]
    m._rename("s:mem:idx")  # switched back: the reference name is in use again, not redirected
    assert m.backend.redirects == {"s:mem:idx:g1": "s:mem:idx"}  # type: ignore[attr-defined]
    assert m.name == "s:mem:idx"


def test_a_recall_s_index_size_probe_follows_a_switch_and_a_lone_ft_info_does_not() -> None:
    from betterdb_memory.core.index_gen import redirect

    moved = {"s:mem:idx": "s:mem:idx:g1"}
    assert redirect(["FT.SEARCH", "s:mem:idx", "*"], moved) == ["FT.SEARCH", "s:mem:idx:g1", "*"]
    assert redirect(["FT.INFO", "s:mem:idx"], moved, probes=True) == ["FT.INFO", "s:mem:idx:g1"]
    assert redirect(["FT.INFO", "s:mem:idx"], moved) == ["FT.INFO", "s:mem:idx"]  # may ask of the old one
    assert redirect(["FT.INFO", "other"], moved, probes=True) == ["FT.INFO", "other"]
