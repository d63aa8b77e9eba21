"""Which L1 turns LangChain messages make (``adapters.langchain._messages``): pure, no server."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed (make test installs it)")

from langchain_core.messages import AIMessage, FunctionMessage, HumanMessage, SystemMessage, ToolMessage

from betterdb_memory.adapters.langchain._messages import message_items, plan_message_turns
from betterdb_memory.core.turns import ToolResult


def call(city: str, cid: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "weather", "args": {"city": city}, "id": cid, "type": "tool_call"}]
    )


def test_a_question_and_its_reply_make_one_turn() -> None:
    turns, consumed = plan_message_turns([SystemMessage("Be brief."), HumanMessage("Hi"), AIMessage("Hello")])
    assert [(t.user, t.assistant) for t in turns] == [("Hi", "Hello")]
    assert consumed == 3


def test_a_turn_stays_open_until_the_reply() -> None:
    """Human, then a tool call and its answer: nothing consumed, the messages are read again later."""
    assert plan_message_turns(
        [HumanMessage("Weather?"), call("Lisbon", "c1"), ToolMessage("sunny", tool_call_id="c1")]
    ) == (
        [],
        0,
    )


def test_tool_calls_pair_with_tool_messages_by_id() -> None:
    messages = [
        HumanMessage("Weather in Lisbon and Porto?"),
        AIMessage(
            "Checking.",
            tool_calls=[
                {"name": "weather", "args": {"city": "Lisbon"}, "id": "a", "type": "tool_call"},
                {"name": "weather", "args": {"city": "Porto"}, "id": "b", "type": "tool_call"},
            ],
        ),
        ToolMessage("rain", tool_call_id="b"),
        ToolMessage("sun", tool_call_id="a"),
        AIMessage("Sun in Lisbon, rain in Porto."),
    ]
    [turn], consumed = plan_message_turns(messages)
    assert consumed == 5
    assert turn.assistant == "Checking.\n\nSun in Lisbon, rain in Porto."
    assert turn.tools == (
        ToolResult("weather", {"city": "Lisbon"}, "sun", True),
        ToolResult("weather", {"city": "Porto"}, "rain", True),
    )


def test_consumed_counts_messages_not_planner_items() -> None:
    """An AI message with text and two calls is three planner items but one message."""
    messages = [
        HumanMessage("Q1"),
        AIMessage(
            "A1",
            tool_calls=[
                {"name": "t", "args": {}, "id": "x", "type": "tool_call"},
                {"name": "t", "args": {}, "id": "y", "type": "tool_call"},
            ],
        ),
        HumanMessage("Q2"),
        call("Lisbon", "z"),
    ]
    turns, consumed = plan_message_turns(messages)
    assert [(t.user, t.assistant) for t in turns] == [("Q1", "A1")]
    assert consumed == 2  # up to the open turn's human message


def test_list_content_and_other_types() -> None:
    assert message_items(
        HumanMessage([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}])
    ) == [{"role": "user", "content": "look\n[image_url]"}]
    assert message_items(FunctionMessage(name="f", content="{}")) == [{"type": "other"}]
    assert message_items(SystemMessage("s")) == [{"type": "other"}]
    assert message_items(AIMessage("")) == [{"type": "other"}]
