"""The OpenAI Agents SDK ``Session`` adapter on the real engine.

``Runner.run(agent, input, session=...)`` runs offline with a scripted ``Model`` of our
own (the SDK's fake model lives in its test tree, not in the wheel); the session is
checked operation by operation against the SDK's own ``SQLiteSession``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
import valkey.asyncio as avalkey

pytest.importorskip("agents", reason="the openai-agents extra is not installed (make test installs it)")

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import Session, SessionSettings, SQLiteSession
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from betterdb_memory import HashingEmbedder, MemoryStore, ToolResult, ValidationError
from betterdb_memory.adapters.openai_agents import MemoryStoreSession, session_item_keys
from tests.reliability.test_acl import STORE_RULES, _denials, _user_url

pytestmark = pytest.mark.integration

OFFLINE = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """Answers each model call with the next canned list of output items; records what it was sent."""

    def __init__(self, responses: list[list[Any]]) -> None:
        self.responses = list(responses)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.responses.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError
        yield


def say(text: str, mid: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=mid,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def think(text: str, rid: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=rid, type="reasoning", summary=[Summary(type="summary_text", text=text)])


def call(city: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", type="function_call", call_id=call_id, name="get_weather",
        arguments=json.dumps({"city": city}),
    )  # fmt: skip


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def script() -> ScriptedModel:
    """Two runs: a tool call with reasoning then the answer; then a plain answer."""
    return ScriptedModel(
        [
            [think("the user wants the weather", "rs_1"), call("Lisbon", "call_1")],
            [say("It is sunny in Lisbon.", "msg_1")],
            [say("You asked about the weather in Lisbon.", "msg_2")],
        ]
    )


async def converse(session: Session) -> tuple[ScriptedModel, list[str]]:
    model = script()
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[get_weather])
    outputs = []
    for question in ("What is the weather in Lisbon?", "What did I ask you?"):
        result = await Runner.run(agent, question, session=session, run_config=OFFLINE)
        outputs.append(result.final_output)
    return model, outputs


@pytest.fixture
async def store(make_store: Callable[..., MemoryStore]) -> MemoryStore:
    return make_store(session_ttl=600)


async def test_implements_the_sdk_session_protocol(store: MemoryStore) -> None:
    session = MemoryStoreSession("t1", store)
    assert isinstance(session, Session)
    assert session.session_id == "t1" and session.session_settings == SessionSettings()


async def test_runner_replays_the_raw_history_exactly_as_sqlite_session_does(store: MemoryStore) -> None:
    """Same scripted runs over both sessions: same answers, same model inputs, same stored items."""
    ours = MemoryStoreSession("weather", store, agent_id="assistant")
    reference = SQLiteSession("weather")
    try:
        model, outputs = await converse(ours)
        ref_model, ref_outputs = await converse(reference)
        assert outputs == ref_outputs == ["It is sunny in Lisbon.", "You asked about the weather in Lisbon."]
        assert model.inputs == ref_model.inputs
        items = await ours.get_items()
        assert items == await reference.get_items()
    finally:
        reference.close()
    # The second run's model saw the first run's raw items: reasoning, the call and its output.
    assert [i.get("type") or i.get("role") for i in model.inputs[2]] == [
        "user", "reasoning", "function_call", "function_call_output", "message", "user",
    ]  # fmt: skip
    assert items[1] == {
        "id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "the user wants the weather"}],
    }  # fmt: skip


async def test_completed_exchanges_become_l1_turns(store: MemoryStore) -> None:
    session = MemoryStoreSession("weather", store, agent_id="assistant")
    await converse(session)
    turns = await store.get_recent_turns("weather", agent_id="assistant")
    assert [(t.user_message, t.assistant_message) for t in turns] == [
        ("What is the weather in Lisbon?", "It is sunny in Lisbon."),
        ("What did I ask you?", "You asked about the weather in Lisbon."),
    ]
    assert turns[0].tool_results == (ToolResult("get_weather", {"city": "Lisbon"}, "sunny in Lisbon", True),)
    ctx = await store.retrieve_context("weather", "weather", token_budget=1000, agent_id="assistant")
    assert "User: What did I ask you?" in ctx.render()


async def test_nothing_is_held_in_process_memory(
    store: MemoryStore, valkey_url: str, unique_name: str
) -> None:
    """Another session object on another store (another client) reads and continues the same history."""
    await converse(MemoryStoreSession("t", store))
    other_client = avalkey.Valkey.from_url(valkey_url, decode_responses=True)
    other = MemoryStore(client=other_client, name=unique_name, embedder=HashingEmbedder())
    try:
        again = MemoryStoreSession("t", other)
        assert await again.get_items() == await MemoryStoreSession("t", store).get_items()
        assert len(await again.get_items()) == 7
        await again.add_items([{"role": "user", "content": "and tomorrow?"}])
        await MemoryStoreSession("t", store).add_items([{"role": "assistant", "content": "Rain."}])
        turns = await store.get_recent_turns("t")
        assert (turns[-1].user_message, turns[-1].assistant_message) == ("and tomorrow?", "Rain.")
    finally:
        await other.close()
        await other_client.aclose()


async def test_keys_ttl_and_clear(store: MemoryStore, text_client: avalkey.Valkey, unique_name: str) -> None:
    session = MemoryStoreSession("t", store, agent_id="a")
    items_key, folded_key = session_item_keys(store.keys, "a", "t")
    assert (session.items_key, session.folded_key) == (items_key, folded_key)
    assert items_key.startswith(f"{unique_name}:l1:{{") and items_key.endswith("}:agents:items")
    turns_key = store.keys.session("a", "t").turns
    assert items_key.split("}")[0] == folded_key.split("}")[0] == turns_key.split("}")[0]  # one hash slot
    await session.add_items([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    assert 590_000 < await text_client.pttl(items_key) <= 600_000
    assert 590_000 < await text_client.pttl(folded_key) <= 600_000
    assert await text_client.get(folded_key) == "2"
    await session.clear_session()
    assert await text_client.exists(items_key, folded_key) == 0
    assert await store.get_recent_turns("t", agent_id="a") == []
    assert await session.get_items() == [] and await session.pop_item() is None


async def test_pop_takes_back_the_raw_item_but_not_a_stored_turn(store: MemoryStore) -> None:
    session = MemoryStoreSession("t", store)
    await session.add_items([{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}])
    assert await session.pop_item() == {"role": "assistant", "content": "a1"}
    await session.add_items([{"role": "assistant", "content": "a1, corrected"}])
    await session.add_items([{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}])
    assert [i["content"] for i in await session.get_items()] == ["q1", "a1, corrected", "q2", "a2"]
    turns = await store.get_recent_turns("t")
    assert [(t.user_message, t.assistant_message) for t in turns] == [("q1", "a1"), ("q2", "a2")]


async def test_concurrent_writers_store_a_turn_once(store: MemoryStore) -> None:
    await MemoryStoreSession("t", store).add_items([{"role": "user", "content": "q"}])
    replies = [{"role": "assistant", "content": f"r{i}"} for i in range(8)]
    await asyncio.gather(*(MemoryStoreSession("t", store).add_items([r]) for r in replies))
    turns = await store.get_recent_turns("t")
    assert len(turns) == 1 and turns[0].user_message == "q"
    assert len(await MemoryStoreSession("t", store).get_items()) == 9


async def test_bad_input_is_refused_before_anything_is_written(store: MemoryStore) -> None:
    with pytest.raises(ValidationError) as err:
        MemoryStoreSession("a,b", store)
    assert err.value.code == "validation.comma"
    session = MemoryStoreSession("t", store)
    with pytest.raises(ValidationError) as err:
        await session.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": object()}])  # type: ignore[list-item]
    assert err.value.code == "validation.type"
    assert await session.get_items() == []


# -- differential: the same operations on SQLiteSession ---------------------------------------

POOL: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Lisbon?"},
    {"role": "user", "content": [{"type": "input_text", "text": "Olá, ça va? 東京 🌧"}]},
    {"type": "message", "role": "assistant", "id": "m", "status": "completed",
     "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]},
    {"role": "assistant", "content": "Rain tomorrow."},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Lisbon\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "think"}]},
    {"role": "system", "content": "Be brief."},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "x"}]},
    {"role": "user", "content": "nested", "extra": {"a": [1, 2.5, None, True], "b": {"c": "d"}}},
]  # fmt: skip


async def _apply(session: Any, op: tuple[str, Any]) -> Any:
    name, arg = op
    if name == "add":
        return await session.add_items(arg)
    if name == "get":
        return await session.get_items(arg)
    if name == "get_default":
        return await session.get_items()
    if name == "pop":
        return await session.pop_item()
    return await session.clear_session()


def _operations(rng: random.Random, n: int) -> list[tuple[str, Any]]:
    ops: list[tuple[str, Any]] = []
    for _ in range(n):
        kind = rng.choices(["add", "get", "get_default", "pop", "clear"], weights=[5, 3, 1, 2, 0.5])[0]
        if kind == "add":
            ops.append(("add", [json.loads(json.dumps(rng.choice(POOL))) for _ in range(rng.randint(0, 4))]))
        elif kind == "get":
            ops.append(("get", rng.choice([None, 0, 1, 2, 3, 7, 100, -1])))
        else:
            ops.append((kind, None))
    return ops


@pytest.mark.parametrize("settings_limit", [None, 3])
@pytest.mark.parametrize("seed", range(6))
async def test_same_results_as_sqlite_session(
    store: MemoryStore, seed: int, settings_limit: int | None
) -> None:
    """Random operation sequences give the same result at every step on both sessions."""
    settings = SessionSettings(limit=settings_limit)
    ours = MemoryStoreSession(f"s{seed}", store, session_settings=settings)
    reference = SQLiteSession(f"s{seed}", session_settings=settings)
    try:
        for step, op in enumerate(_operations(random.Random(seed), 60)):
            got, want = await _apply(ours, op), await _apply(reference, op)
            assert got == want, f"step {step}: {op}"
        assert await ours.get_items(None) == await reference.get_items(None)
    finally:
        reference.close()


async def test_runs_as_the_stores_least_privilege_user(
    valkey_url: str, unique_name: str, text_client: avalkey.Valkey
) -> None:
    """Every session operation works with the store's ACL rules (no rule added) and leaves no denial."""
    user, password = f"u{unique_name}", "agents-pw"
    rules = list(dict.fromkeys(STORE_RULES.format(name=unique_name).split()))
    await text_client.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    try:
        store = await MemoryStore.connect(
            _user_url(valkey_url, user, password),
            name=unique_name,
            embedder=HashingEmbedder(),
            discovery=False,
        )
        try:
            await text_client.script_flush()  # the user loads the adapter's scripts itself
            session = MemoryStoreSession("t", store, agent_id="a")
            await converse(session)
            assert len(await session.get_items(2)) == 2
            assert (await session.pop_item() or {}).get("role") == "assistant"
            await session.clear_session()
            assert await session.get_items() == []
        finally:
            await store.close()
        assert await _denials(text_client, user) == []
    finally:
        await text_client.execute_command("ACL", "DELUSER", user)


async def test_erase_and_the_stores_clear_session_delete_the_raw_items(
    store: MemoryStore, text_client: avalkey.Valkey
) -> None:
    """The right to erasure reaches the adapter's raw items: they are keys of the session."""
    for thread in ("t1", "t2"):
        await MemoryStoreSession(thread, store, agent_id="gone").add_items(
            [
                {"role": "user", "content": "my address is 1 Main St"},
                {"role": "assistant", "content": "noted"},
            ]
        )
    await MemoryStoreSession("kept", store, agent_id="other").add_items([{"role": "user", "content": "hi"}])
    await store.clear_session("t1", agent_id="gone")
    assert await text_client.exists(*session_item_keys(store.keys, "gone", "t1")) == 0
    assert await store.erase(agent_id="gone") >= 1
    assert await text_client.exists(*session_item_keys(store.keys, "gone", "t2")) == 0
    assert await MemoryStoreSession("kept", store, agent_id="other").get_items() != []
