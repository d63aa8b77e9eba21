"""LangChain messages as OpenAI-Agents-style items, for ``_agent_items.plan_turns``: pure, no I/O.

The chat history keeps every message as written (``message_to_dict``); which L1 turns
they make is the same question the Agents session answers, so the messages are mapped
to that planner's items and its rules apply (``_agent_items``): a human message opens a
turn, AI text is the reply, an AI message's tool calls pair with the tool messages
that answer them by id, system and other messages make no turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .._agent_items import TurnDraft, plan_turns

__all__ = ["message_items", "plan_message_turns"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content if isinstance(content, Sequence) else ():
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(part.get("type"), str):
                parts.append(f"[{part['type']}]")
    return "\n".join(p for p in parts if p)


def message_items(message: BaseMessage) -> list[dict[str, Any]]:
    """The planner items of one message (an AI message with tool calls gives its text, then one per call)."""
    if isinstance(message, HumanMessage):
        return [{"role": "user", "content": _text(message.content)}]
    if isinstance(message, AIMessage):
        items: list[dict[str, Any]] = []
        text = _text(message.content)
        if text.strip():
            items.append({"role": "assistant", "content": text})
        for call in message.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id") or "",
                    "name": call["name"],
                    "arguments": json.dumps(call.get("args", {}), ensure_ascii=False, default=str),
                }
            )
        return items or [{"type": "other"}]
    if isinstance(message, ToolMessage):
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": _text(message.content),
            }
        ]
    return [{"type": "other"}]


def plan_message_turns(messages: Sequence[BaseMessage]) -> tuple[list[TurnDraft], int]:
    """The turns ``messages`` complete and how many leading messages they consume (``plan_turns``'s rules)."""
    items: list[dict[str, Any]] = []
    owner: list[int] = []  # item index -> message index
    for index, message in enumerate(messages):
        for item in message_items(message):
            items.append(item)
            owner.append(index)
    turns, consumed = plan_turns(items)
    # plan_turns consumes up to a user item (a human message's only item) or to the end.
    return turns, (len(messages) if consumed >= len(items) else owner[consumed])
