"""``docker/compose.yaml`` keeps the production rules (no Docker here: the file is parsed and checked).

Rules (issue 14): valkey-bundle pinned to a 9.1 tag that ships valkey-search 1.2.x, no
``--loadmodule`` for the modules its entrypoint loads itself, every image pinned, every
port published on 127.0.0.1 only, a password on the default user and an ACL user for the
app that grants what the store runs (the rules ``tests/reliability/test_acl.py`` proves
sufficient), and upstream valkey-search issue #1260 noted with the stack's answer to it.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.test_acl import AGENT_CACHE_RULES, DISCOVERY_RULES, STORE_RULES

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the onnx extra) parses the compose file")

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"

# valkey-bundle tag -> the valkey-search release it bundles (valkey-io/valkey-bundle, versions.json
# and the Docker Hub description; 9.1.1 changed only valkey-ldap).
BUNDLE_SEARCH = {"9.1.0": "1.2.0", "9.1.1": "1.2.0"}
# valkey-search releases without the fix for #1260 (commit a372ba05 landed after 1.2.1).
WITHOUT_1260_FIX = {"1.2.0", "1.2.1"}
REQUIRED_VAR = re.compile(r"\$\{(\w+):\?[^}]*\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return data


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = compose["services"]
    return services


def _valkey_args(compose: dict[str, Any]) -> list[str]:
    command = _services(compose)["valkey"]["command"]
    assert isinstance(command, list), "keep the command a list: one argument per item"
    return [str(a) for a in command]


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _bundle_tag(compose: dict[str, Any]) -> str:
    image = str(_services(compose)["valkey"]["image"])
    repo, _, tag = image.partition(":")
    assert repo == "valkey/valkey-bundle", image
    return tag.split("@", 1)[0]


def test_valkey_bundle_is_pinned_to_a_9_1_tag_with_valkey_search_1_2(compose: dict[str, Any]) -> None:
    """An exact 9.1.x bundle tag whose valkey-search is a 1.2.x release."""
    tag = _bundle_tag(compose)
    assert re.fullmatch(r"9\.1\.\d+(-trixie|-alpine)?", tag), tag
    assert BUNDLE_SEARCH[tag.split("-")[0]].startswith("1.2.")


def test_no_loadmodule_for_modules_the_image_loads_itself(compose: dict[str, Any]) -> None:
    """The bundle's entrypoint loads /usr/lib/valkey/*.so; a second --loadmodule aborts Valkey."""
    valkey = _services(compose)["valkey"]
    assert not any("loadmodule" in a.lower() for a in _valkey_args(compose))
    assert "entrypoint" not in valkey
    assert "loadmodule" not in str(valkey.get("environment", {})).lower()  # VALKEY_EXTRA_FLAGS


def test_every_image_is_pinned(compose: dict[str, Any]) -> None:
    """Each service builds from source or names an exact version (never latest or a bare name)."""
    for name, service in _services(compose).items():
        if "build" in service and "image" not in service:
            continue
        image = str(service["image"])
        _, _, tag = image.partition(":")
        tag = tag.split("@", 1)[0]
        assert tag and tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned"


def test_every_port_is_published_on_loopback_only(compose: dict[str, Any]) -> None:
    """Valkey (and the UIs and metrics) are reachable from this host only."""
    for name, service in _services(compose).items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond 127.0.0.1"
    assert _services(compose)["valkey"]["ports"] == ["127.0.0.1:6379:6379"]


def test_default_user_needs_a_password_from_the_environment(compose: dict[str, Any]) -> None:
    """requirepass comes from a required variable (compose refuses to start without it), never a literal."""
    password = _option(_valkey_args(compose), "--requirepass")
    assert password is not None and REQUIRED_VAR.fullmatch(password), password
    health = " ".join(_services(compose)["valkey"]["healthcheck"]["test"])
    assert "-a " in health and "VALKEY_ADMIN_PASSWORD" in health  # the check authenticates too
    monitor = _services(compose)["monitor"]["environment"]
    assert REQUIRED_VAR.search(str(monitor["DB_PASSWORD"]))


def _acl_user(args: list[str]) -> tuple[str, list[str]]:
    start = args.index("--user") + 1
    end = next((i for i in range(start, len(args)) if args[i].startswith("--")), len(args))
    return args[start], args[start + 1 : end]


def test_app_connects_as_a_least_privilege_acl_user(compose: dict[str, Any]) -> None:
    """The app's user: a required password, its own key prefix, and every rule the ACL test proves needed."""
    user, rules = _acl_user(_valkey_args(compose))
    assert user == "app-memory" and rules[:2] == ["reset", "on"]
    passwords = [r for r in rules if r.startswith(">")]
    assert len(passwords) == 1 and REQUIRED_VAR.fullmatch(passwords[0][1:])
    name = _services(compose)["app"]["environment"]["BETTERDB_MEMORY_NAME"]
    needed = (
        set(STORE_RULES.format(name=name).split())
        | set(AGENT_CACHE_RULES.format(name=name).split())
        | set(DISCOVERY_RULES.split())
    )
    commands = {r for r in rules if r.startswith("+")}
    patterns = [r[1:] for r in rules if r.startswith("~")]
    missing = {r for r in needed if r.startswith("+") and r not in commands}
    # A key pattern is granted when one of the user's patterns covers it (``app:*`` covers ``app:mem:*``).
    missing |= {r for r in needed if r.startswith("~") and not any(fnmatchcase(r[1:], p) for p in patterns)}
    assert not missing, f"missing: {sorted(missing)}"
    assert all(p.startswith((f"{name}:", "__betterdb:")) for p in patterns), patterns
    assert not {"allkeys", "~*", "+@all", "allcommands", "nopass"} & set(rules)
    # ... and no command the library does not use (every "+" rule is one the ACL tests need).
    assert commands <= {r for r in needed if r.startswith("+")}, sorted(commands - needed)
    url = str(_services(compose)["app"]["environment"]["VALKEY_URL"])
    assert url.startswith(f"valkey://{user}:") and REQUIRED_VAR.search(url)


def test_persistence_is_on(compose: dict[str, Any]) -> None:
    """AOF with appendfsync everysec, on a named volume."""
    args = _valkey_args(compose)
    assert _option(args, "--appendonly") == "yes" and _option(args, "--appendfsync") == "everysec"
    assert _services(compose)["valkey"]["volumes"] == ["valkey-data:/data"]


def test_issue_1260_is_noted_and_no_fork_is_started_while_the_module_lacks_the_fix(
    compose: dict[str, Any],
) -> None:
    """valkey-search <= 1.2.1 deadlocks on a query during a fork: no RDB snapshots, no automatic AOF rewrite."""
    text = COMPOSE.read_text(encoding="utf-8")
    assert "valkey-search/issues/1260" in text and "a372ba05" in text
    args = _valkey_args(compose)
    if BUNDLE_SEARCH[_bundle_tag(compose).split("-")[0]] in WITHOUT_1260_FIX:
        assert _option(args, "--save") == ""
        assert _option(args, "--auto-aof-rewrite-percentage") == "0"
