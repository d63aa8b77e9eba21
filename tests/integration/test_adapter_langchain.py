"""The LangChain adapters on the real engine, beyond LangChain's standard suites.

The standard suites (retriever, vector store, embeddings) run with their own ini in
``tests/conformance/langchain``. Here: the chat message history, which has no published
suite (a differential test against ``InMemoryChatMessageHistory`` on random operation
sequences of every message type, and ``RunnableWithMessageHistory`` end to end with
LangChain's ``GenericFakeChatModel``), and what the suites do not look at (documents'
metadata, scope and tag filters, upserts, the async-store rules, the missing extra).
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import valkey
import valkey.asyncio as avalkey

pytest.importorskip("langchain_core", reason="the langchain extra is not installed (make test installs it)")

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from betterdb_memory import (
    ConfigurationError,
    HashingEmbedder,
    MemoryStore,
    SyncMemoryStore,
    SyncReentrancyError,
    ValidationError,
)
from betterdb_memory.adapters.langchain import (
    MemoryStoreChatMessageHistory,
    MemoryStoreEmbeddings,
    MemoryStoreKV,
    MemoryStoreRetriever,
    MemoryStoreVectorStore,
)
from betterdb_memory.adapters.langchain.history import history_keys
from tests.reliability.test_acl import STORE_RULES, _denials, _user_url

pytestmark = pytest.mark.integration

# langchain-core 1.6.4 deprecated InMemoryChatMessageHistory and RunnableWithMessageHistory
# (removal in 2.0; the langchain extra is <2): the differential reference and the end-to-end
# runnable warn when built. Our subclass of BaseChatMessageHistory does not warn.
legacy_reference = pytest.mark.filterwarnings(
    "ignore:.*(InMemoryChatMessageHistory|RunnableWithMessageHistory).*:langchain_core._api.deprecation.LangChainDeprecationWarning"
)


@pytest.fixture
def sync_store(valkey_url: str, unique_name: str) -> Iterator[SyncMemoryStore]:
    with SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder()) as store:
        yield store


@pytest.fixture
async def async_store(valkey_url: str, unique_name: str) -> AsyncIterator[MemoryStore]:
    store = await MemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    try:
        yield store
    finally:
        await store.close()


# -- chat message history ------------------------------------------------------------------------


def random_message(rng: random.Random, n: int) -> BaseMessage:
    """One message of any type LangChain has, with ids, tool calls, list content and extra fields."""
    kind = rng.choice(["human", "ai", "ai_tools", "tool", "system", "function", "chat", "parts"])
    text = rng.choice(["hello", "Where is Ada?", "In Lisbon.", "", "naïve ☃ text", "x" * 50])
    if kind == "human":
        return HumanMessage(text, id=f"h{n}")
    if kind == "ai":
        return AIMessage(text or "ok", id=f"a{n}", response_metadata={"model": "fake"})
    if kind == "ai_tools":
        return AIMessage(
            text,
            tool_calls=[
                {"name": "weather", "args": {"city": "Lisbon", "n": n}, "id": f"call{n}", "type": "tool_call"}
            ],
        )
    if kind == "tool":
        return ToolMessage(f"sunny {n}", tool_call_id=f"call{n - 1}", name="weather", status="success")
    if kind == "system":
        return SystemMessage("You are terse.")
    if kind == "function":
        return FunctionMessage(name="lookup", content='{"ok": true}')
    if kind == "chat":
        return ChatMessage(role="critic", content="too long")
    return HumanMessage(
        [{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {"url": "x"}}]
    )


@legacy_reference
def test_history_matches_in_memory_history_on_random_sequences(sync_store: SyncMemoryStore) -> None:
    """Every step of random add/clear/read sequences gives the same messages as InMemoryChatMessageHistory."""
    rng = random.Random(19)
    for run in range(6):
        ours = MemoryStoreChatMessageHistory(f"diff-{run}", sync_store, agent_id="bot")
        ref = InMemoryChatMessageHistory()
        for step in range(40):
            op = rng.random()
            if op < 0.08:
                ours.clear()
                ref.clear()
            elif op < 0.3:
                batch = [random_message(rng, step * 10 + i) for i in range(rng.randint(0, 4))]
                ours.add_messages(batch)
                ref.add_messages(batch)
            else:
                message = random_message(rng, step)
                ours.add_message(message)
                ref.add_message(message)
            assert ours.messages == ref.messages, (run, step)
        # A fresh object on the same session reads the same (nothing was held in process memory).
        assert (
            MemoryStoreChatMessageHistory(f"diff-{run}", sync_store, agent_id="bot").messages == ref.messages
        )


async def test_history_async_methods_on_an_async_store(async_store: MemoryStore) -> None:
    """aadd_messages / aget_messages / aclear on a MemoryStore; the sync side refuses with a clear error."""
    history = MemoryStoreChatMessageHistory("async-1", async_store)
    messages = [SystemMessage("Be brief."), HumanMessage("Where does Ada live?"), AIMessage("In Lisbon.")]
    await history.aadd_messages(messages)
    assert await history.aget_messages() == messages
    turns = await async_store.get_recent_turns("async-1")
    assert [(t.user_message, t.assistant_message) for t in turns] == [("Where does Ada live?", "In Lisbon.")]
    # Sync methods: from another thread while the store's loop runs, not on that loop itself.
    assert await asyncio.to_thread(lambda: history.messages) == messages
    with pytest.raises(SyncReentrancyError):
        _ = history.messages
    await history.aclear()
    assert await history.aget_messages() == []
    assert await async_store.get_recent_turns("async-1") == []


def test_history_stores_completed_exchanges_as_l1_turns(sync_store: SyncMemoryStore) -> None:
    """Human question, AI tool call, tool answer, AI reply: one L1 turn with its tool result; system messages none."""
    history = MemoryStoreChatMessageHistory("turns-1", sync_store, agent_id="bot")
    history.add_messages([SystemMessage("You are helpful."), HumanMessage("Weather in Lisbon?")])
    history.add_message(
        AIMessage(
            "", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "c1", "type": "tool_call"}]
        )
    )
    assert sync_store.get_recent_turns("turns-1", agent_id="bot") == []  # the turn is still open
    history.add_messages([ToolMessage("sunny", tool_call_id="c1"), AIMessage("Sunny in Lisbon.")])
    turns = sync_store.get_recent_turns("turns-1", agent_id="bot")
    assert len(turns) == 1
    assert (turns[0].user_message, turns[0].assistant_message) == ("Weather in Lisbon?", "Sunny in Lisbon.")
    assert [(r.tool_name, r.params, r.result) for r in turns[0].tool_results] == [
        ("weather", {"city": "Lisbon"}, "sunny")
    ]
    assert len(history.messages) == 5


def test_history_keys_live_in_the_store_key_space_with_the_session_ttl(
    sync_store: SyncMemoryStore, valkey_url: str
) -> None:
    history = MemoryStoreChatMessageHistory("ttl-1", sync_store, agent_id="bot")
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    messages_key, folded_key = history_keys(sync_store.async_store.keys, "bot", "ttl-1")
    assert messages_key.startswith(f"{sync_store.name}:l1:")
    ttl_ms = sync_store.async_store.session_config.ttl_ms
    with valkey.Valkey.from_url(valkey_url) as client:
        assert client.llen(messages_key) == 2
        assert 0 < client.pttl(messages_key) <= ttl_ms
        assert 0 < client.pttl(folded_key) <= ttl_ms
        history.clear()
        assert client.exists(messages_key, folded_key) == 0


@legacy_reference
def test_runnable_with_message_history_end_to_end(sync_store: SyncMemoryStore) -> None:
    """RunnableWithMessageHistory with GenericFakeChatModel: the second call sees the first exchange."""
    model = GenericFakeChatModel(messages=iter([AIMessage("Hello Ada."), AIMessage("You are Ada.")]))
    seen: list[list[BaseMessage]] = []

    def record(prompt: Any) -> Any:
        seen.append(prompt.to_messages())
        return prompt

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You remember names."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(record) | model,
        lambda session_id: MemoryStoreChatMessageHistory(session_id, sync_store),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "ada-chat"}}
    assert chain.invoke({"question": "I am Ada."}, config=config).content == "Hello Ada."
    assert chain.invoke({"question": "Who am I?"}, config=config).content == "You are Ada."
    assert [m.content for m in seen[1]] == ["You remember names.", "I am Ada.", "Hello Ada.", "Who am I?"]
    history = MemoryStoreChatMessageHistory("ada-chat", sync_store)
    assert [type(m).__name__ for m in history.messages] == ["HumanMessage", "AIMessage"] * 2
    turns = sync_store.get_recent_turns("ada-chat")
    assert [t.user_message for t in turns] == ["I am Ada.", "Who am I?"]


@legacy_reference
async def test_runnable_with_message_history_async(sync_store: SyncMemoryStore) -> None:
    """ainvoke through RunnableWithMessageHistory on a SyncMemoryStore (async callers wait in a thread)."""
    model = GenericFakeChatModel(messages=iter([AIMessage("One."), AIMessage("Two.")]))
    chain = RunnableWithMessageHistory(
        model, lambda session_id: MemoryStoreChatMessageHistory(session_id, sync_store)
    )
    config: Any = {"configurable": {"session_id": "count"}}
    await chain.ainvoke([HumanMessage("Count.")], config=config)
    await chain.ainvoke([HumanMessage("Again.")], config=config)
    history = MemoryStoreChatMessageHistory("count", sync_store)
    assert [m.content for m in await history.aget_messages()] == ["Count.", "One.", "Again.", "Two."]


def test_history_rejects_bad_session_ids(sync_store: SyncMemoryStore) -> None:
    with pytest.raises(ValidationError):
        MemoryStoreChatMessageHistory("a,b", sync_store)


# -- retriever ------------------------------------------------------------------------------------


def test_retriever_documents_carry_id_score_and_metadata(sync_store: SyncMemoryStore) -> None:
    mid = sync_store.remember(
        "Ada takes the 7:40 train.",
        thread_id="ada",
        tags=["travel"],
        metadata={"src": "chat", "score": "mine"},
    )
    sync_store.remember("Grace likes tea.", thread_id="grace")
    retriever = MemoryStoreRetriever(sync_store, thread_id="ada", threshold=2.0)
    [doc] = retriever.invoke("When does Ada's train leave?")
    assert doc.id == mid
    assert doc.page_content == "Ada takes the 7:40 train."
    assert doc.metadata["src"] == "chat"
    assert doc.metadata["tags"] == ["travel"] and doc.metadata["thread_id"] == "ada"
    assert 0 < doc.metadata["similarity"] <= 1 and isinstance(doc.metadata["score"], float)
    # A call overrides the constructor's options; recall_tags are the recall's tags.
    assert retriever.invoke("train", thread_id="grace", k=1)[0].page_content == "Grace likes tea."
    assert MemoryStoreRetriever(sync_store, recall_tags=["nope"], threshold=2.0).invoke("train") == []
    with pytest.raises(ValidationError):
        retriever.invoke("train", colour="red")


def test_retriever_takes_time_and_where_and_documents_carry_validity(sync_store: SyncMemoryStore) -> None:
    """Issue 26's as_of / since / until and issue 27's where, as constructor options or per call."""
    lisbon = sync_store.remember(
        "Ada lives in Lisbon.", thread_id="ada", subject="home city", valid_from="2020-03-01"
    )
    berlin = sync_store.remember(
        "Ada moved to Berlin.", thread_id="ada", subject="home city", valid_from="2024-05-01"
    )
    rowing = sync_store.remember("Ada took up rowing.", thread_id="ada", valid_from="2022-06-01")
    retriever = MemoryStoreRetriever(sync_store, thread_id="ada", threshold=2.0)
    now = {d.id: d for d in retriever.invoke("Where does Ada live?")}
    assert set(now) == {berlin, rowing} and now[berlin].metadata["subject"] == "home city"
    assert "valid_until" not in now[berlin].metadata
    [then] = retriever.invoke("Where does Ada live?", as_of="2021-01-01")
    assert then.id == lisbon and then.metadata["valid_until"] == now[berlin].metadata["valid_from"]
    window = MemoryStoreRetriever(sync_store, thread_id="ada", threshold=2.0, since="2022", until="2023")
    assert [d.id for d in window.invoke("Ada")] == [rowing]
    assert [d.id for d in retriever.invoke("Ada", where={"valid_from": {"$lt": 1672531200000}})] == [rowing]
    with pytest.raises(ValidationError) as info:
        retriever.invoke("Ada", since="2024", until="2023")
    assert info.value.code == "validation.time_window"


async def test_retriever_documents_name_the_newer_statement_they_rank_below(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Same-slot supersession (the shipped ONNX embedder) reaches the documents' metadata."""
    from betterdb_memory.embedders import OnnxEmbedder

    store = make_store(embedder=OnnxEmbedder())
    older = await store.remember("Maya Varga banks with Barclays.", valid_from="2020-04-20")
    tennis = await store.remember("Maya Varga plays tennis.", valid_from="2018-06-01")
    newer = await store.remember("Maya Varga moved their account to HSBC.", valid_from="2020-06-16")
    docs = await MemoryStoreRetriever(store, threshold=2.0, k=3).ainvoke("Which bank does Maya Varga use?")
    by_id = {d.id: d.metadata for d in docs}
    assert docs[0].id == newer and "superseded_by" not in by_id[newer]
    assert by_id[older]["superseded_by"] == newer and "superseded_by" not in by_id[tennis]


async def test_retriever_on_an_async_store(async_store: MemoryStore) -> None:
    await async_store.remember("Ada takes the 7:40 train.", thread_id="ada")
    retriever = MemoryStoreRetriever(async_store, thread_id="ada", threshold=2.0)
    assert [d.page_content for d in await retriever.ainvoke("train")] == ["Ada takes the 7:40 train."]
    assert len(await asyncio.to_thread(retriever.invoke, "train")) == 1


def test_sync_call_on_an_async_store_without_its_loop_raises(valkey_url: str, unique_name: str) -> None:
    """A MemoryStore whose loop is not running cannot serve sync calls: a ConfigurationError says so."""
    store = MemoryStore(
        client=avalkey.Valkey.from_url(valkey_url), name=unique_name, embedder=HashingEmbedder()
    )
    with pytest.raises(ConfigurationError) as err:
        MemoryStoreRetriever(store).invoke("train")
    assert err.value.code == "configuration.sync_without_loop"
    with pytest.raises(ConfigurationError):
        MemoryStoreVectorStore(store).similarity_search("train")


# -- vector store ---------------------------------------------------------------------------------


def test_vector_store_scope_tags_filters_and_upsert(sync_store: SyncMemoryStore) -> None:
    docs = MemoryStoreVectorStore(sync_store, namespace="docs", tags=["kb"])
    other = MemoryStoreVectorStore(sync_store, namespace="other")
    docs.add_documents([Document("Lisbon trains", id="t1", metadata={"n": 1})])
    docs.add_texts(["Porto trains"], [{"n": 2}], ids=["t2"])
    other.add_texts(["Lisbon trains too"], ids=["o1"])
    sync_store.remember("Lisbon trains untagged", namespace="docs", id="u1")
    assert [d.id for d in docs.similarity_search("Lisbon trains", k=5)] == ["t1", "t2"]
    assert docs.get_by_ids(["t1", "o1", "u1", "missing"]) == [
        Document("Lisbon trains", id="t1", metadata={"n": 1})
    ]
    # filter: scope replaced, tags added (all required)
    assert [
        d.id for d in docs.similarity_search("trains", k=5, filter={"namespace": "other", "tags": []})
    ] == []
    assert {d.id for d in other.similarity_search("trains", k=5, filter={"namespace": "docs"})} == {
        "u1",
        "t1",
        "t2",
    }
    with pytest.raises(ValidationError):
        docs.similarity_search("trains", filter={"n": 1})  # metadata is not indexed
    # upsert by id: the same id replaces the memory
    docs.add_texts(["Lisbon trains at 7:40"], [{"n": 3}], ids=["t1"])
    assert docs.get_by_ids(["t1"]) == [Document("Lisbon trains at 7:40", id="t1", metadata={"n": 3})]
    assert sync_store.history("t1")[0].content == "Lisbon trains"
    # scores are similarities, best first
    pairs = docs.similarity_search_with_score("Lisbon trains at 7:40", k=2)
    assert pairs[0][0].id == "t1" and 1 >= pairs[0][1] >= pairs[1][1] >= 0
    assert docs.similarity_search_with_relevance_scores("Lisbon trains at 7:40", k=1)[0][1] == pairs[0][1]
    # delete() without ids deletes this vector store's scope only
    docs.delete()
    assert docs.similarity_search("trains", k=5) == []
    assert sync_store.get("u1") is not None and other.get_by_ids(["o1"]) != []
    with pytest.raises(ValidationError):
        MemoryStoreVectorStore(sync_store).delete()


def test_vector_store_with_langchain_embeddings(valkey_url: str, unique_name: str) -> None:
    """embedding= given: vectors come from it (searches too), in the store's dimensions."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    with SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder(8)) as store:
        vs = MemoryStoreVectorStore.from_texts(
            ["alpha", "beta"], DeterministicFakeEmbedding(size=8), ids=["a", "b"], store=store
        )
        assert vs.similarity_search("alpha", k=1)[0].id == "a"
        assert (
            vs.similarity_search_by_vector(DeterministicFakeEmbedding(size=8).embed_query("beta"), k=1)[0].id
            == "b"
        )


def test_embeddings_are_the_store_vectors(sync_store: SyncMemoryStore) -> None:
    """MemoryStoreEmbeddings gives the vectors the store writes (same embedder, same numbers)."""
    emb = MemoryStoreEmbeddings(sync_store.embedder)
    vs = MemoryStoreVectorStore(sync_store)
    [mid] = vs.add_texts(["Ada takes the 7:40 train."])
    vec = emb.embed_query("Ada takes the 7:40 train.")
    assert len(vec) == emb.dimensions
    assert vs.similarity_search_by_vector(vec, k=1)[0].id == mid
    assert emb.embed_documents([]) == []


def test_missing_extra_names_it() -> None:
    """Without langchain-core, importing the adapters raises ConfigurationError naming the extra."""
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "try:\n    import betterdb_memory.adapters.langchain\n"
        "except Exception as e:\n    print(type(e).__name__, e.code, e.details['extra'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ConfigurationError", "configuration.missing_extra", "langchain"]


async def test_adapters_run_as_the_stores_least_privilege_user(
    valkey_url: str, unique_name: str, text_client: Any
) -> None:
    """History, vector store, retriever and key-value store work with the store's ACL rules (the
    key-value store adds its key pattern ``~<name>:kv:*``), leaving no denial."""
    user, password = f"u{unique_name}", "langchain-pw"
    rules = list(dict.fromkeys([*STORE_RULES.format(name=unique_name).split(), f"~{unique_name}:kv:*"]))
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
            history = MemoryStoreChatMessageHistory("t", store, agent_id="a")
            await history.aadd_messages([SystemMessage("s"), HumanMessage("Hi"), AIMessage("Hello")])
            assert len(await history.aget_messages()) == 3
            await history.aclear()
            vs = MemoryStoreVectorStore(store, namespace="kb")
            await vs.aadd_texts(["Lisbon trains"], ids=["k1"])
            assert [d.id for d in await vs.asimilarity_search("trains", k=1)] == ["k1"]
            assert (
                len(await MemoryStoreRetriever(store, namespace="kb", threshold=2.0).ainvoke("trains")) == 1
            )
            await vs.adelete()
            kv = MemoryStoreKV(store, namespace="docs", ttl=60)
            await kv.amset([("a", b"1")])
            assert await kv.amget(["a"]) == [b"1"] and [k async for k in kv.ayield_keys()] == ["a"]
            await kv.amdelete(["a"])
        finally:
            await store.close()
        assert await _denials(text_client, user) == []
    finally:
        await text_client.execute_command("ACL", "DELUSER", user)


# -- key-value store and erasure -------------------------------------------------------------------


async def test_kv_namespaces_are_apart_and_expired_names_leave_the_listing(async_store: MemoryStore) -> None:
    docs, cache = MemoryStoreKV(async_store, namespace="docs"), MemoryStoreKV(async_store, namespace="cache")
    await docs.amset([("doc:1", b"one"), ("doc:2", b"two"), ("other", b"x")])
    await cache.amset([("doc:1", b"cached")])
    assert await docs.amget(["doc:1", "missing"]) == [b"one", None]
    assert await cache.amget(["doc:1", "doc:2"]) == [b"cached", None]
    assert [k async for k in docs.ayield_keys(prefix="doc:")] == ["doc:1", "doc:2"]
    short = MemoryStoreKV(async_store, namespace="short", ttl=0.05)
    await short.amset([("k", b"v")])
    await asyncio.sleep(0.1)
    assert await short.amget(["k"]) == [None] and [k async for k in short.ayield_keys()] == []
    with pytest.raises(ValidationError):
        await docs.amset([("k", "not bytes")])  # type: ignore[list-item]


async def test_erase_and_clear_session_delete_the_chat_messages(
    async_store: MemoryStore, text_client: Any
) -> None:
    """The right to erasure reaches the chat history: its keys are keys of the session."""
    for thread in ("t1", "t2"):
        await MemoryStoreChatMessageHistory(thread, async_store, agent_id="gone").aadd_messages(
            [HumanMessage("my address is 1 Main St"), AIMessage("noted")]
        )
    await async_store.clear_session("t1", agent_id="gone")
    assert await text_client.exists(*history_keys(async_store.keys, "gone", "t1")) == 0
    assert await async_store.erase(agent_id="gone") >= 1
    assert await text_client.exists(*history_keys(async_store.keys, "gone", "t2")) == 0
