"""``resolve_url``: explicit > BETTERDB_MEMORY_URL > VALKEY_URL > REDIS_URL > None (embedded)."""

from __future__ import annotations

import pytest

from betterdb_memory._env import URL_ENV_VARS, resolve_url

ALL = {
    "BETTERDB_MEMORY_URL": "valkey://ours:1",
    "VALKEY_URL": "valkey://valkey:2",
    "REDIS_URL": "redis://redis:3",
}


def test_order_of_the_variables() -> None:
    assert URL_ENV_VARS == ("BETTERDB_MEMORY_URL", "VALKEY_URL", "REDIS_URL")


def test_explicit_wins_over_every_variable() -> None:
    assert resolve_url("valkey://explicit:9", ALL) == "valkey://explicit:9"


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (("BETTERDB_MEMORY_URL", "VALKEY_URL", "REDIS_URL"), "valkey://ours:1"),
        (("VALKEY_URL", "REDIS_URL"), "valkey://valkey:2"),
        (("REDIS_URL",), "redis://redis:3"),
        (("BETTERDB_MEMORY_URL", "REDIS_URL"), "valkey://ours:1"),
    ],
)
def test_each_variable_wins_over_the_ones_after_it(present: tuple[str, ...], expected: str) -> None:
    assert resolve_url(None, {k: ALL[k] for k in present}) == expected


def test_nothing_set_means_the_embedded_engine() -> None:
    assert resolve_url(None, {}) is None
    assert resolve_url(None, {"UNRELATED_URL": "valkey://x:1"}) is None


def test_blank_values_count_as_unset() -> None:
    """``--url "$UNSET"`` or ``VALKEY_URL=`` in a compose file falls through to the next source."""
    env = {"BETTERDB_MEMORY_URL": "", "VALKEY_URL": "   ", "REDIS_URL": " redis://r:3 "}
    assert resolve_url("", env) == "redis://r:3"
    assert resolve_url("  ", {}) is None
    assert resolve_url(" valkey://a:1 ", {}) == "valkey://a:1"


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in URL_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    assert resolve_url() is None
    monkeypatch.setenv("REDIS_URL", "redis://from-env:6379")
    assert resolve_url() == "redis://from-env:6379"
    monkeypatch.setenv("VALKEY_URL", "valkey://from-env:6379")
    assert resolve_url() == "valkey://from-env:6379"
    assert resolve_url("valkey://given:1") == "valkey://given:1"
