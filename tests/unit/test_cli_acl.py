"""``betterdb-memory acl``: the ACL line of a store's user, printed without a server."""

from __future__ import annotations

import json

import pytest

from betterdb_memory import acl_rules
from betterdb_memory.cli import main


def test_prints_the_setuser_line_of_the_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acl", "--name", "acme", "--user", "tenant-acme"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("ACL SETUSER tenant-acme reset on ><password> ~acme:mem:* ")
    assert "+ft.create" in line and '"(~__betterdb:caches +hget +hset +hexists)"' in line


def test_tenant_no_discovery_and_cache_options_reach_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """``--tenant`` drops FT.CREATE; the name before the subcommand works too (the CLI's rule)."""
    assert main(["--name", "acme", "acl", "--tenant", "--no-discovery", "--agent-cache", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "user": "app-memory",
        "rules": list(acl_rules("acme", create_index=False, discovery=False, agent_cache=True)),
    }


def test_a_bad_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acl", "--name", "a b"]) == 2
    assert "store name" in capsys.readouterr().err


def test_cluster_option_reaches_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acl", "--name", "acme", "--tenant", "--cluster", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rules"] == list(acl_rules("acme", create_index=False, cluster=True))
    assert "+cluster|slots" in out["rules"]
