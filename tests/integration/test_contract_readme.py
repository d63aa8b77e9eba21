"""The seed contract's README runs here as its readers would run it.

The seed (``../shared/seeds/003_14b50c5030df8f9e.txt``) is the README of
betterdb-agent-memory 0.7.0, the library this one replaces. Both of its ``python``
blocks are taken from that file at test time and run with only what a reader must
change to run them:

* the import line: ``betterdb_agent_memory`` becomes ``betterdb_memory``;
* the placeholder body of ``embed`` (``...``) becomes a call to a small deterministic
  embedding (a bag of concepts, below), so that the example's recall really has
  something to find;
* the quick start's ``valkey.Valkey(host="localhost", port=6379)`` becomes the test's
  own client to the session server (the block creates the client inside ``main`` and
  never closes it; the test closes its own).

Nothing else is touched: store names (``betterdb_ac``, ``myapp``), thread ids and calls
are the README's. The second block is a fragment (top-level ``await``, ``client`` and
``embed`` from the first), so it runs in the first block's namespace.
"""

from __future__ import annotations

import ast
import contextlib
import math
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SEED = REPO.parent / "shared" / "seeds" / "003_14b50c5030df8f9e.txt"
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)

REFERENCE_IMPORT = "betterdb_agent_memory"
OUR_IMPORT = "betterdb_memory"
PLACEHOLDER_CLIENT = 'valkey.Valkey(host="localhost", port=6379)'
PLACEHOLDER_EMBED = re.compile(
    r"(async def embed\(text: str\) -> list\[float\]:\n(?:    #[^\n]*\n)*)    \.\.\.\n"
)
README_NAMES = ("betterdb_ac", "myapp")  # the store names the blocks use
REMEMBERED = "User prefers dark mode and concise answers."

# -- the embedding put in place of the placeholder ------------------------------------
# A bag of concepts: each word of a concept adds 1 to that concept's dimension; other
# words (minus a few stop words) go to 16 hashed buckets; a constant last component keeps
# a text without words off the zero vector. The quick start's query shares the
# "interface", "preference" and "person" concepts with the remembered memory (cosine
# distance ~0.23, inside the documented default threshold 0.33); "hello" and "hi" are
# both greetings.
_CONCEPTS: dict[str, frozenset[str]] = {
    "interface": frozenset({"ui", "interface", "settings", "setting", "dark", "light", "mode", "theme"}),
    "preference": frozenset({"prefers", "prefer", "like", "likes", "wants", "favourite", "favorite"}),
    "person": frozenset({"user", "users", "customer"}),
    "style": frozenset({"concise", "answers", "answer", "short", "brief", "verbose"}),
    "greeting": frozenset({"hello", "hi", "hey", "greetings"}),
}
_STOP_WORDS = frozenset({"what", "does", "the", "and", "a", "an", "is", "of", "to"})
_BUCKETS = 16


def concept_embedding(text: str) -> list[float]:
    concepts = list(_CONCEPTS.values())
    vector = [0.0] * (len(concepts) + _BUCKETS + 1)
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in _STOP_WORDS:
            continue
        for i, members in enumerate(concepts):
            if word in members:
                vector[i] += 1.0
                break
        else:
            vector[len(concepts) + zlib.crc32(word.encode()) % _BUCKETS] += 1.0
    vector[-1] = 0.1
    return vector


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# -- reading the seed -----------------------------------------------------------------


def seed_python_blocks() -> list[str]:
    if not SEED.is_file():
        pytest.skip(f"the seed README is not here ({SEED}): ../shared is absent in this checkout")
    text = SEED.read_text(encoding="utf-8")
    blocks = [m["code"] for m in FENCE.finditer(text) if m["lang"] == "python"]
    assert len(blocks) == 2, f"the seed README should have exactly two python blocks, found {len(blocks)}"
    return blocks


def adapt(code: str) -> str:
    """The only edits a reader makes: the import line and the placeholder embed body."""
    import_lines = [line for line in code.splitlines() if line.startswith(f"from {REFERENCE_IMPORT} import")]
    assert len(import_lines) == 1, "each seed block has one import of betterdb_agent_memory"
    code = code.replace(f"from {REFERENCE_IMPORT} import", f"from {OUR_IMPORT} import")
    code, n = PLACEHOLDER_EMBED.subn(r"\1    return __contract_embed__(text)\n", code)
    assert n <= 1
    return code


async def run_block(code: str, ns: dict[str, Any], filename: str) -> None:
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, ns)
    if result is not None and hasattr(result, "__await__"):
        await result


async def drop_readme_stores(client: Any) -> None:
    """Remove what the README's fixed-name stores left (a long-lived VALKEY_URL server)."""
    for name in README_NAMES:
        with contextlib.suppress(Exception):
            await client.execute_command("FT.DROPINDEX", f"{name}:mem:idx")
        keys = [key async for key in client.scan_iter(match=f"{name}:*", count=500)]
        if keys:
            await client.delete(*keys)


@pytest.fixture(autouse=True)
def no_product_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    # The facade may bring the ecosystem's cache tiers, whose analytics default on.
    monkeypatch.setenv("BETTERDB_TELEMETRY", "false")
    monkeypatch.setenv("DO_NOT_TRACK", "1")


# -- tests ----------------------------------------------------------------------------


def test_the_embedding_really_separates_the_example() -> None:
    """The filled-in embed puts the quick start's query inside the documented 0.33."""
    query = concept_embedding("what UI settings does the user like?")
    assert cosine_distance(query, concept_embedding(REMEMBERED)) < 0.33
    assert cosine_distance(concept_embedding("hi"), concept_embedding("hello")) < 0.01
    assert cosine_distance(query, concept_embedding("the invoice is due on Friday")) > 0.9


def test_only_the_import_and_the_embed_body_change() -> None:
    quick_start, standalone = seed_python_blocks()
    for original in (quick_start, standalone):
        adapted = adapt(original)
        changed = [(a, b) for a, b in zip(original.splitlines(), adapted.splitlines(), strict=True) if a != b]
        for before, after in changed:
            assert before.startswith(f"from {REFERENCE_IMPORT} import") or before.strip() == "..."
            assert after.startswith(f"from {OUR_IMPORT} import") or "__contract_embed__" in after
    assert PLACEHOLDER_CLIENT in quick_start, "the quick start's client line changed in the seed"
    assert "__contract_embed__" in adapt(quick_start)


async def test_quick_start_runs_and_recalls_the_remembered_memory(
    client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    quick_start, _ = seed_python_blocks()
    code = adapt(quick_start).replace(PLACEHOLDER_CLIENT, "__contract_client__")
    await drop_readme_stores(client)
    ns: dict[str, Any] = {
        "__name__": "seed_readme_quick_start",
        "__contract_embed__": concept_embedding,
        "__contract_client__": client,
    }
    try:
        await run_block(code, ns, "seed-003-README:quick-start")
        await ns["main"]()
        printed = capsys.readouterr().out.splitlines()
    finally:
        await drop_readme_stores(client)

    # `for hit in hits: print(hit.score, hit.item.content)`
    assert printed, "the quick start's recall printed no hit"
    rows = [line.split(" ", 1) for line in printed]
    assert all(len(row) == 2 for row in rows), printed
    assert any(content == REMEMBERED for _, content in rows), printed
    for score, _ in rows:
        assert 0.0 < float(score) <= 1.0 + 1e-9  # the composite score of the README's Scoring section


async def test_standalone_block_runs_in_the_quick_starts_namespace(client: Any) -> None:
    quick_start, standalone = seed_python_blocks()
    await drop_readme_stores(client)
    ns: dict[str, Any] = {
        "__name__": "seed_readme_standalone",
        "__contract_embed__": concept_embedding,
    }
    # The quick start defines `embed` (and imports); the fragment also uses `client`.
    await run_block(adapt(quick_start), ns, "seed-003-README:quick-start")
    ns["client"] = client
    try:
        await run_block(adapt(standalone), ns, "seed-003-README:standalone")
        hits = ns["hits"]
        assert isinstance(hits, list)
        assert [hit.item.content for hit in hits] == ["hello"]
        hit = hits[0]
        assert hit.item.thread_id == "t1"
        assert hit.distance == pytest.approx(0.0, abs=1e-3)
        assert hit.similarity == pytest.approx(1 - hit.distance / 2, abs=1e-6)
    finally:
        store = ns.get("store")
        if store is not None:
            await store.close()
        await drop_readme_stores(client)
