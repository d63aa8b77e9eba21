"""Discovery marker pieces that need no server: key names, marker JSON, ownership rule."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from betterdb_memory._version import __version__
from betterdb_memory.errors import ValidationError
from betterdb_memory.observability.discovery import (
    DiscoveryMarker,
    build_marker,
    classify_registry_value,
    fallback_registry_field,
    heartbeat_key,
    iso_now,
    registry_field,
    stats_key,
)


def test_key_names_follow_monitor() -> None:
    """Field <name>:mem, heartbeat keyed by field, stats <name>:__mem_stats."""
    assert registry_field("shop") == "shop:mem"
    assert fallback_registry_field("shop") == "shop:mem:agent_memory"
    assert heartbeat_key("shop:mem") == "__betterdb:heartbeat:shop:mem"
    assert stats_key("shop") == "shop:__mem_stats"


def test_marker_has_exactly_monitors_fields() -> None:
    """The marker JSON carries the fields Monitor reads, with string type and prefix."""
    marker = build_marker(
        name="shop",
        index_name="shop:mem:idx",
        stats_key="shop:__mem_stats",
        capabilities=["recall", "threshold_adjust", "recall"],
        started_at="2026-01-01T00:00:00.000Z",
        pid=42,
        hostname="h",
    )
    assert marker == {
        "type": "agent_memory",
        "prefix": "shop",
        "version": __version__,
        "protocol_version": 1,
        "capabilities": ["recall", "threshold_adjust"],
        "stats_key": "shop:__mem_stats",
        "index_name": "shop:mem:idx",
        "started_at": "2026-01-01T00:00:00.000Z",
        "pid": 42,
        "hostname": "h",
    }
    json.dumps(marker)


def test_iso_now_is_utc_with_millis_like_javascript() -> None:
    """Timestamps look like JavaScript's toISOString (what Monitor's own libraries write)."""
    stamp = iso_now()
    assert stamp.endswith("Z")
    assert len(stamp) == len("2026-01-01T00:00:00.000Z")
    datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    ("raw", "owner"),
    [
        (None, "free"),
        (b'{"type":"agent_memory","prefix":"x"}', "ours"),
        ('{"type":"agent_memory"}', "ours"),
        ('{"type":"semantic_cache","prefix":"x"}', "foreign"),
        ("not json", "foreign"),
        ("[1, 2]", "foreign"),
        (b"\xff", "foreign"),
    ],
)
def test_registry_ownership(raw: bytes | str | None, owner: str) -> None:
    """Only an absent field or an agent_memory marker may be written; anything else is left alone."""
    assert classify_registry_value(raw) == owner


@pytest.mark.parametrize("interval", [0, -1, 31, 60])
def test_heartbeat_interval_must_beat_the_expiry(interval: float) -> None:
    """An interval over half the 60 s expiry would let the store flap between alive and dead."""
    with pytest.raises(ValidationError):
        DiscoveryMarker(None, "s", index_name="i", stats_key="k", heartbeat_interval=interval)  # type: ignore[arg-type]


def test_start_without_loop_is_a_configuration_error() -> None:
    """start() needs a running event loop, and says so."""
    from betterdb_memory.errors import ConfigurationError

    marker = DiscoveryMarker(None, "s", index_name="i", stats_key="k")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        marker.start()
