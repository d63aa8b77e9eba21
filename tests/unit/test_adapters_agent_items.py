"""How OpenAI Agents SDK items become L1 turns (``adapters._agent_items.plan_turns``): pure, no SDK."""

from __future__ import annotations

import json
from typing import Any

from betterdb_memory import ToolResult
from betterdb_memory.adapters._agent_items import TurnDraft, item_kind, message_text, plan_turns
from betterdb_memory.core.turns import MAX_TOOL_RESULTS
from betterdb_memory.core.validation import MAX_CONTENT_BYTES


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str, mid: str = "m") -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Lisbon"}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, value: Any = "sunny") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": value}


REASONING = {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "think"}]}


def test_kinds_of_items() -> None:
    assert item_kind(user("hi")) == "user"
    assert item_kind({"type": "message", "role": "user", "content": []}) == "user"
    assert item_kind(reply("hi")) == "assistant"
    assert item_kind(call("c")) == "call"
    assert item_kind(output("c")) == "output"
    assert item_kind({"type": "computer_call", "call_id": "c", "action": {}}) == "call"
    assert item_kind(REASONING) == "other"
    assert item_kind({"role": "system", "content": "be brief"}) == "other"
    assert item_kind({"role": "developer", "content": "x"}) == "other"


def test_message_text_joins_parts_and_names_non_text_parts() -> None:
    item = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "data:..."},
        ],
    }
    assert message_text(item) == "what is this?\n[input_image]"
    assert message_text({"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}) == "no"
    assert message_text(user("plain")) == "plain"


def test_a_finished_exchange_is_one_turn_with_its_tool_calls() -> None:
    items = [user("Weather in Lisbon?"), REASONING, call("c1"), output("c1", "sunny"), reply("Sunny.")]
    turns, consumed = plan_turns(items)
    assert consumed == 5
    assert turns == [
        TurnDraft(
            "Weather in Lisbon?",
            "Sunny.",
            (ToolResult("get_weather", {"city": "Lisbon"}, "sunny", True),),
        )
    ]


def test_a_turn_without_its_reply_stays_open() -> None:
    """The SDK saves the input first and the reply later: nothing is folded until the reply."""
    for items in ([user("q")], [user("q"), call("c")], [user("q"), call("c"), output("c")]):
        assert plan_turns(items) == ([], 0)


def test_consecutive_user_messages_are_one_question() -> None:
    turns, consumed = plan_turns([user("first"), user("second"), reply("answer")])
    assert consumed == 3 and turns == [TurnDraft("first\n\nsecond", "answer")]


def test_replies_are_joined_and_several_turns_fold_at_once() -> None:
    items = [user("a"), reply("one"), call("c"), output("c"), reply("two"), user("b"), reply("three")]
    turns, consumed = plan_turns(items)
    assert consumed == 7
    assert [(t.user, t.assistant) for t in turns] == [("a", "one\n\ntwo"), ("b", "three")]


def test_a_run_that_stopped_at_a_tool_replies_with_the_tool_output() -> None:
    """Closed by the next question with no reply text: the last tool output is the reply."""
    items = [user("a"), call("c"), output("c", {"temp": 21}), user("b")]
    turns, consumed = plan_turns(items)
    assert consumed == 3  # the open turn "b" is not consumed
    assert turns == [
        TurnDraft(
            "a",
            json.dumps({"temp": 21}),
            (ToolResult("get_weather", {"city": "Lisbon"}, {"temp": 21}, True),),
        )
    ]


def test_items_without_a_question_make_no_turn_but_are_consumed_by_the_next_question() -> None:
    items = [{"role": "system", "content": "be brief"}, reply("orphan"), user("q"), reply("a")]
    turns, consumed = plan_turns(items)
    assert consumed == 4 and turns == [TurnDraft("q", "a")]
    assert plan_turns([REASONING, reply("orphan")]) == ([], 0)


def test_an_interrupted_turn_with_nothing_to_reply_is_dropped() -> None:
    turns, consumed = plan_turns([user("a"), call("c"), user("b"), reply("r")])
    assert consumed == 4 and turns == [TurnDraft("b", "r")]


def test_a_call_without_output_is_recorded_as_not_successful() -> None:
    turns, _ = plan_turns([user("a"), call("c", arguments="not json"), reply("r")])
    assert turns[0].tools == (ToolResult("get_weather", {"arguments": "not json"}, None, False),)


def test_tool_results_are_capped_and_text_is_clipped() -> None:
    calls = [x for i in range(MAX_TOOL_RESULTS + 5) for x in (call(f"c{i}"), output(f"c{i}"))]
    huge = "é" * MAX_CONTENT_BYTES
    turns, _ = plan_turns([user(huge), *calls, reply("r")])
    assert len(turns[0].tools) == MAX_TOOL_RESULTS
    assert len(turns[0].user.encode()) <= MAX_CONTENT_BYTES and turns[0].user == "é" * (
        MAX_CONTENT_BYTES // 2
    )
