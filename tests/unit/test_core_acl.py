"""``core.acl``: a store's ACL rules cover its own keys and no other store's (no server).

Key coverage is checked with ``fnmatchcase``, which matches ACL key patterns for the
characters a store name may hold (letters, digits, ``_ . - :``: none is a glob
character outside brackets). That the rules are *enough* is checked on both engines
by ``tests/reliability/test_acl.py`` and ``tests/integration/test_tenants.py``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from betterdb_memory.core.acl import acl_rules, acl_setuser_line, names_overlap
from betterdb_memory.core.keys import ConsolidationKeys, KeySpace, Scope, config_key, stats_key
from betterdb_memory.errors import ValidationError
from betterdb_memory.observability.discovery import (
    PROTOCOL_KEY,
    REGISTRY_KEY,
    fallback_registry_field,
    heartbeat_key,
    registry_field,
)
from tests.reliability.test_acl import AGENT_CACHE_RULES, STORE_RULES


def _patterns(rules: tuple[str, ...]) -> list[str]:
    return [r[1:] for r in rules if r.startswith("~")]


def _covered(key: str, rules: tuple[str, ...]) -> bool:
    return any(fnmatchcase(key, p) for p in _patterns(rules))


def _store_keys(name: str) -> list[str]:
    """One key of every family a store writes (core.keys), the discovery heartbeats included."""
    k = KeySpace(name)
    mid = "0b6f7a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    session = k.session("agent", "thread")
    cons = ConsolidationKeys(k, Scope(agent_id="agent"))
    return [
        k.doc(mid),
        k.index,
        k.meta,
        k.reembed,
        k.access(mid),
        k.updates(mid),
        k.cap_lock("abc"),
        k.consolidation_targets,
        cons.lock,
        cons.subjects,
        cons.history("d"),
        cons.hist_doc(mid),
        k.subject("d"),
        k.subject_versions("d"),
        k.subject_scopes,
        k.subject_scope("s"),
        *session.all(),
        k.agent_sessions("agent"),
        config_key(name),
        stats_key(name),
        heartbeat_key(registry_field(name)),
        heartbeat_key(fallback_registry_field(name)),
    ]


def test_the_store_rules_are_the_least_privilege_set_the_acl_test_proves() -> None:
    """Same rules as tests/reliability/test_acl.py (which proves each one needed), FT.CREATE included."""
    rules = acl_rules("app", discovery=False)
    assert list(rules) == STORE_RULES.format(name="app").split()
    with_cache = acl_rules("app", discovery=False, agent_cache=True)
    assert set(with_cache) - set(rules) == set(AGENT_CACHE_RULES.format(name="app").split())


def test_every_key_of_the_store_is_covered() -> None:
    rules = acl_rules("tenant_a")
    missing = [key for key in _store_keys("tenant_a") if not _covered(key, rules)]
    assert missing == []


@pytest.mark.parametrize("other", ["tenant_b", "tenant", "tenant_a2", "tenant_a.x", "x:tenant_a", "TENANT_A"])
def test_no_key_of_another_store_is_covered(other: str) -> None:
    """Neither a sibling name nor a prefix of the name nor a name with the same start reaches in."""
    rules = acl_rules("tenant_a", agent_cache=True)
    reached = [key for key in _store_keys(other) if _covered(key, rules)]
    assert reached == []
    assert not _covered(f"{other}:llm:x", rules) and not _covered(heartbeat_key(other), rules)


def test_nested_names_overlap_and_are_reported() -> None:
    """``a:l1`` stores its documents under ``a:l1:mem:``, inside ``a``'s ``a:l1:*``: tenants need
    names that do not nest, which ``names_overlap`` checks."""
    rules = acl_rules("a")
    assert _covered(KeySpace("a:l1").doc("x1"), rules)
    assert names_overlap(["a", "a:l1", "b", "a_b", "ab"]) == [("a", "a:l1")]
    assert names_overlap(["a", "b"]) == []


def test_the_shared_discovery_keys_only_through_selectors() -> None:
    """The registry and protocol key are in no root pattern: only selectors with the commands
    discovery sends reach them (no HGETALL / HKEYS / HSCAN / HDEL / DEL: no listing, no deleting)."""
    rules = acl_rules("app")
    assert not _covered(REGISTRY_KEY, rules) and not _covered(PROTOCOL_KEY, rules)
    selectors = [r for r in rules if r.startswith("(")]
    assert selectors == [f"(~{REGISTRY_KEY} +hget +hset +hexists)", f"(~{PROTOCOL_KEY} +set)"]
    assert not [r for r in acl_rules("app", discovery=False) if "__betterdb" in r]


def test_a_tenant_gets_no_index_creation() -> None:
    """FT.CREATE reaches any key prefix on RediSearch 2.10: a tenant's index is created by an admin."""
    assert "+ft.create" in acl_rules("app")
    assert "+ft.create" not in acl_rules("app", create_index=False)
    assert "+ft.search" in acl_rules("app", create_index=False)


def test_no_command_reaches_everything() -> None:
    for rules in (acl_rules("app"), acl_rules("app", agent_cache=True)):
        assert not {
            "allkeys",
            "~*",
            "+@all",
            "allcommands",
            "nopass",
            "+keys",
            "+flushall",
            "+ft._list",
        } & set(rules)
    assert "+scan" in acl_rules("app", agent_cache=True) and "+scan" not in acl_rules("app")


def test_the_setuser_line_quotes_only_selectors() -> None:
    line = acl_setuser_line("app", user="app-memory", password="s3cret", create_index=False)
    assert line.startswith("ACL SETUSER app-memory reset on >s3cret ~app:mem:* ")
    assert line.endswith('"(~__betterdb:caches +hget +hset +hexists)" "(~__betterdb:protocol +set)"')
    assert "+ft.create" not in line


def test_a_bad_store_name_is_refused() -> None:
    with pytest.raises(ValidationError):
        acl_rules("a b")
    with pytest.raises(ValidationError):
        acl_rules("a:mem")


def test_the_documented_line_is_the_helpers() -> None:
    """docs/operations/acl.md shows ``acl_setuser_line`` for ``app`` (discovery apart), verbatim."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "acl.md").read_text(
        encoding="utf-8"
    )
    block = page.split("```text\n", 1)[1].split("```", 1)[0]
    expected = acl_setuser_line("app", user="app-memory", password="password", discovery=False)
    assert " ".join(block.split()) == expected


def test_a_cluster_user_gets_the_client_start_up_and_nothing_wider() -> None:
    """valkey-py's cluster client reads CLUSTER SLOTS and COMMAND when it starts
    (tests/cluster/test_cluster_acl.py); on one server neither is granted."""
    plain, cluster = acl_rules("app"), acl_rules("app", cluster=True)
    assert set(cluster) - set(plain) == {"+cluster|slots", "+command"}
    assert "+cluster" not in cluster and "+@all" not in cluster  # CLUSTER's other subcommands stay refused
    assert "+command" in acl_setuser_line("app", user="u", cluster=True)
    assert "+command" not in acl_setuser_line("app", user="u")
