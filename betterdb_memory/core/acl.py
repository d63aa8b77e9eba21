"""The ACL rules of one store: the key patterns and commands its user needs, and nothing else.

One tenant per store name, one ACL user per tenant: the user's key patterns cover
only its store's keys (``<name>:mem:*``, ``<name>:l1:*``, ...; ``core.keys`` builds
them), so another tenant's store is out of reach of every command, FT.* included:

* RediSearch 2.10 checks the index *name* of FT.SEARCH / FT.INFO / FT.CREATE /
  FT.AGGREGATE ... against the key patterns (``<name>:mem:idx`` lies under
  ``<name>:mem:*``), but not the index's key prefixes: a user allowed FT.CREATE may
  create an index of its own name over another tenant's prefix and read every
  document there. So a tenant's user gets no FT.CREATE (``create_index=False``); an
  operator creates each tenant's index once, as an administrator.
* valkey-search 1.2 checks the index's key *prefixes* against the key patterns (the
  name not at all): FT.CREATE over a foreign prefix is refused, but a user allowed
  FT.CREATE may take the index name of a store not created yet. Same advice.

``bench/probe_ft_acl.py`` measures both; docs/operations/acl.md states the guarantees.

Store names nest: the store ``a:l1`` keeps its documents under ``a:l1:mem:``, inside
the pattern ``a:l1:*`` of the store ``a``. Tenants on one server need names none of
which begins with another's name followed by ``:`` (``names_overlap``).

Monitor discovery (``discovery=True``) needs the shared registry hash
``__betterdb:caches``. A selector grants it HGET / HSET / HEXISTS only: a tenant can
neither list the registry (HGETALL, HKEYS, HSCAN) nor delete from it, but it can read
or overwrite the marker of a store whose name it knows (a marker holds the store's
name, index and stats key names, version, capabilities, pid, host name and start
time; no memory, config or statistic). ``discovery=False`` leaves the registry out.
"""

from __future__ import annotations

from collections.abc import Iterable

from .keys import validate_store_name

__all__ = ["acl_rules", "acl_setuser_line", "names_overlap"]

# Every key family the store writes, under its name (core.keys.KeySpace).
_STORE_PATTERNS = ("mem", "acc", "upd", "caplock", "cons", "hist", "l1", "subj")
# Every command the store sends, the Lua scripts' own included (ACLs apply inside
# scripts). ``module|list`` is the engine probe; ``client|setinfo`` only keeps
# valkey-py's connect handshake out of the ACL log.
_COMMAND_TEXT = (
    "+hset +hsetnx +hget +hmget +hgetall +hincrby +hkeys +hdel +hscan +get +set +incr +del +unlink +exists "
    "+rename +pexpire +pttl +persist +rpush +lpush +lindex +lrange +llen +ltrim +sadd +srem +smembers "
    "+zadd +zrange +zrem +zmscore +evalsha +script|load +ft.search +ft.info +module|list +client|setinfo"
)
_STORE_COMMANDS = tuple(_COMMAND_TEXT.split())
# A cluster client's start-up: the slot map and the commands' key positions.
_CLUSTER_COMMANDS = ("+cluster|slots", "+command")
# AgentMemory's cache tiers (betterdb-agent-cache): llm / tool / session, its stats hash
# and tool policies; SCAN for ``invalidate_by_tool`` / ``destroy_thread``.
_CACHE_PATTERNS = ("llm:*", "tool:*", "session:*", "__stats", "__tool_policies")
# Monitor's keys (observability.discovery; betterdb-agent-cache's are the same but for
# the field, the cache tiers' one being ``<name>``).
_REGISTRY = "__betterdb:caches"
_PROTOCOL = "__betterdb:protocol"
_HEARTBEAT = "__betterdb:heartbeat:"


def acl_rules(
    name: str,
    *,
    discovery: bool = True,
    agent_cache: bool = False,
    create_index: bool = True,
    cluster: bool = False,
) -> tuple[str, ...]:
    """The ``ACL SETUSER`` rules (after ``reset on >password``) of a user limited to one store.

    The least set: ``tests/reliability/test_acl.py`` runs the store's whole surface as
    this user and finds no denial in ``ACL LOG``, and removing any rule breaks an
    operation; ``tests/integration/test_tenants.py`` checks that such a user reaches
    nothing of another store.

    Args:
        name: the store name (validated as the store validates it).
        discovery: add Monitor discovery: the store's own heartbeat keys, and a selector
            allowing HGET / HSET / HEXISTS on the shared registry and SET on the protocol
            key (see the module docstring for what a tenant sees there).
        agent_cache: add ``AgentMemory``'s cache tiers (their keys and SCAN; SCAN lists
            every key name of the server, other tenants' too, never a value).
        create_index: grant FT.CREATE, so the store creates its index itself. ``False``
            for a tenant (an administrator creates the index once): on RediSearch 2.10
            FT.CREATE reaches any prefix.
        cluster: add what a cluster client reads when it starts: the slot map
            (``+cluster|slots``) and the commands' key positions (``+command``). Without
            them valkey-py's cluster client cannot start (``tests/cluster/test_cluster_acl.py``);
            run the line on every node, replicas included (ACL users are per node).

    Returns:
        The rules, in order, each one argument of ``ACL SETUSER`` (a selector is one
        argument in parentheses).
    """
    validate_store_name(name)
    patterns = [f"~{name}:{p}:*" for p in _STORE_PATTERNS] + [f"~{name}:__mem_*"]
    commands = list(_STORE_COMMANDS)
    if create_index:
        commands.insert(commands.index("+ft.info"), "+ft.create")
    selectors: list[str] = []
    if agent_cache:
        patterns += [f"~{name}:{p}" for p in _CACHE_PATTERNS]
        commands.append("+scan")
    if discovery:
        # The heartbeat of ``<name>:mem`` and of its fallback field ``<name>:mem:agent_memory``
        # (no other store's, names not nesting); the cache tiers' field is ``<name>``.
        patterns.append(f"~{_HEARTBEAT}{name}:mem*")
        if agent_cache:
            patterns.append(f"~{_HEARTBEAT}{name}")
        selectors += [f"(~{_REGISTRY} +hget +hset +hexists)", f"(~{_PROTOCOL} +set)"]
    if cluster:
        commands += list(_CLUSTER_COMMANDS)
    return (*patterns, *commands, *selectors)


def acl_setuser_line(
    name: str,
    *,
    user: str,
    password: str = "<password>",
    discovery: bool = True,
    agent_cache: bool = False,
    create_index: bool = True,
    cluster: bool = False,
) -> str:
    """``ACL SETUSER <user> reset on ><password> <rules>`` as one ``valkey-cli`` line.

    A selector holds spaces, so it is double-quoted (``valkey-cli`` splits on spaces
    outside quotes); no other rule needs quoting.
    """
    words = ["ACL", "SETUSER", user, "reset", "on", f">{password}"]
    words += acl_rules(
        name, discovery=discovery, agent_cache=agent_cache, create_index=create_index, cluster=cluster
    )
    return " ".join(f'"{w}"' if " " in w else w for w in words)


def names_overlap(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of store names whose ACL patterns overlap: the second begins with the first and ``:``.

    The store ``a:l1`` writes ``a:l1:mem:<id>``, which the pattern ``~a:l1:*`` of the
    store ``a`` covers (and so for every key family: ``a:acc``, ``a:hist``, ``a:__mem_x``...).
    Tenants sharing a server need an empty answer.
    """
    ordered = sorted(set(names))
    return [(a, b) for a in ordered for b in ordered if a != b and b.startswith(f"{a}:")]
