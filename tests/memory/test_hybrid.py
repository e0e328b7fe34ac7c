"""Hybrid search through a real local embeddings server (OpenAI wire format), vectors cached in SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from loopwright.errors import ModelError
from loopwright.memory import (
    Embedder,
    MemoryIndex,
    OpenAICompatibleEmbedder,
    memory_context,
    memory_search_tool,
    reciprocal_rank_fusion,
)
from loopwright.testing import ReplayResponse, ReplayServer
from loopwright.tools import ToolContext
from tests.memory.helpers import age_all, bag_of_words, embedded_texts, embeddings_responder, write

NOTES = {
    "MEMORY.md": "# Memory\n\n## Garage\n\nThe red car needs new tyres before winter.\n",
    "memory/2024-04-01.md": "- 08:00 Walked the dog in the park.\n- 12:00 Paid the electricity bill.\n",
    "memory/2024-04-02.md": "- 09:00 Renewed the insurance for the vehicle fleet.\n",
}


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer(embeddings_responder) as running:
        yield running


@pytest.fixture
async def embedder(server: ReplayServer) -> AsyncIterator[OpenAICompatibleEmbedder]:
    async with OpenAICompatibleEmbedder(server.base_url, "bow-64", api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture
def index(root: Path, embedder: OpenAICompatibleEmbedder) -> MemoryIndex:
    write(root, NOTES)
    age_all(root)
    return MemoryIndex(root, embedder=embedder)


def test_the_embedder_meets_the_protocol(embedder: OpenAICompatibleEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "bow-64"
    assert OpenAICompatibleEmbedder("http://127.0.0.1:9/v1", "m", dimensions=256).name == "m@256"


async def test_embed_speaks_the_openai_wire_format(
    embedder: OpenAICompatibleEmbedder, server: ReplayServer
) -> None:
    vectors = await embedder.embed(["a car", "a dog"])
    assert vectors == [pytest.approx(bag_of_words("a car")), pytest.approx(bag_of_words("a dog"))]
    request = server.requests[-1]
    assert (request.method, request.path) == ("POST", "/v1/embeddings")
    assert request.json == {"model": "bow-64", "input": ["a car", "a dog"], "encoding_format": "float"}
    assert request.headers["authorization"] == "Bearer test"
    assert await embedder.embed([]) == []


async def test_batches_are_split(server: ReplayServer) -> None:
    async with OpenAICompatibleEmbedder(server.base_url, "bow-64", api_key="t", batch_size=2) as small:
        assert len(await small.embed(["a", "b", "c", "d", "e"])) == 5
    assert [len(r.json["input"]) for r in server.requests] == [2, 2, 1]


async def test_meaning_finds_what_words_miss(index: MemoryIndex) -> None:
    assert index.search("automobile") == []  # no shared word
    hits = await index.hybrid_search("automobile", k=2)
    assert hits[0].location == "MEMORY.md:5"
    assert hits[0].text == "The red car needs new tyres before winter."
    assert hits[0].score > hits[1].score


async def test_a_note_found_both_ways_ranks_first(index: MemoryIndex) -> None:
    hits = await index.hybrid_search("insurance vehicle", k=3)
    assert hits[0].location == "memory/2024-04-02.md:1"
    keyword_rank, semantic_rank = 1, 1
    assert hits[0].score == pytest.approx(1 / (60 + keyword_rank) + 1 / (60 + semantic_rank))


async def test_vectors_are_cached_by_chunk_hash(index: MemoryIndex, root: Path, server: ReplayServer) -> None:
    await index.hybrid_search("dog")
    assert sorted(embedded_texts(server.requests)) == sorted(
        [
            "Garage\nThe red car needs new tyres before winter.",
            "- 08:00 Walked the dog in the park.",
            "- 12:00 Paid the electricity bill.",
            "- 09:00 Renewed the insurance for the vehicle fleet.",
            "dog",
        ]
    )
    server.requests.clear()
    await index.hybrid_search("puppy")
    assert embedded_texts(server.requests) == ["puppy"]  # only the query: every chunk is cached

    server.requests.clear()
    write(root, {"memory/2024-04-01.md": NOTES["memory/2024-04-01.md"] + "- 18:00 Fed the hound.\n"})
    hits = await index.hybrid_search("puppy", k=2)
    assert embedded_texts(server.requests) == ["- 18:00 Fed the hound.", "puppy"]
    assert {hit.location for hit in hits} == {"memory/2024-04-01.md:1", "memory/2024-04-01.md:3"}


async def test_vectors_of_deleted_chunks_are_dropped(index: MemoryIndex, root: Path) -> None:
    await index.hybrid_search("car")
    (root / "memory" / "2024-04-01.md").unlink()
    await index.hybrid_search("car")
    with sqlite3.connect(index.db_path) as conn:
        count = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    conn.close()
    assert count == 2


async def test_a_server_error_is_a_model_error(root: Path) -> None:
    failure = ReplayResponse.json_body(
        {"error": {"message": "model not loaded", "type": "server_error"}}, status=503
    )
    with ReplayServer([failure]) as server:
        async with OpenAICompatibleEmbedder(server.base_url, "bow-64", api_key="t", max_retries=0) as broken:
            with pytest.raises(ModelError) as info:
                await broken.embed(["x"])
    assert (info.value.status, info.value.model) == (503, "bow-64")
    assert "model not loaded" in str(info.value)


async def test_tools_and_context_fall_back_to_keywords_when_embeddings_fail(root: Path) -> None:
    write(root, NOTES)
    failure = ReplayResponse.json_body({"error": {"message": "down"}}, status=500)
    with ReplayServer([failure, failure]) as server:
        async with OpenAICompatibleEmbedder(server.base_url, "bow-64", api_key="t", max_retries=0) as broken:
            search = memory_search_tool(root, embedder=broken)
            ctx = ToolContext(run_id="r", session_id="s", call_id="c", tool_name="memory_search", step=0)
            text = await search.call(search.validate('{"query": "dog"}'), ctx)
            block = await memory_context(root, "dog", embedder=broken)
    assert text.startswith("(keyword search only; embeddings failed: ")
    assert text.endswith("\nmemory/2024-04-01.md:1 (2024-04-01): 08:00 Walked the dog in the park.")
    assert (
        block
        == "## Relevant memory\n- memory/2024-04-01.md:1 (2024-04-01): 08:00 Walked the dog in the park."
    )


async def test_the_search_tool_is_hybrid_with_an_embedder(
    root: Path, embedder: OpenAICompatibleEmbedder
) -> None:
    write(root, NOTES)
    search = memory_search_tool(root, embedder=embedder)
    ctx = ToolContext(run_id="r", session_id="s", call_id="c", tool_name="memory_search", step=0)
    text = await search.call(search.validate('{"query": "automobile", "k": 1}'), ctx)
    assert text == "MEMORY.md:5: The red car needs new tyres before winter."
    assert await memory_context(root, "automobile", k=1, embedder=embedder) == (
        "## Relevant memory\n- MEMORY.md:5: The red car needs new tyres before winter."
    )


async def test_hybrid_search_needs_an_embedder(root: Path) -> None:
    with pytest.raises(ValueError, match="needs an embedder"):
        await MemoryIndex(root).hybrid_search("x")


def test_reciprocal_rank_fusion() -> None:
    scores = reciprocal_rank_fusion(["a", "b", "c"], ["c", "a"])
    assert scores == {
        "a": pytest.approx(1 / 61 + 1 / 62),
        "b": pytest.approx(1 / 62),
        "c": pytest.approx(1 / 63 + 1 / 61),
    }
    assert sorted(scores, key=scores.__getitem__, reverse=True) == ["a", "c", "b"]
