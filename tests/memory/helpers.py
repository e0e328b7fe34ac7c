"""Helpers for the memory tests: a fixed clock, file writing and ageing, a local embeddings server."""

from __future__ import annotations

import hashlib
import math
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopwright.testing import ReplayRequest, ReplayResponse

NOW = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
DIMENSIONS = 64
# Words the fake embedding model treats as the same meaning, as a real one would.
SYNONYMS = {"automobile": "car", "vehicle": "car", "cars": "car", "hound": "dog", "puppy": "dog"}


def clock() -> datetime:
    return NOW


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def age(path: Path, seconds: int = 3600) -> None:
    """Set ``path``'s modification time ``seconds`` in the past (older than the index's racy window)."""
    when = int(datetime.now(UTC).timestamp()) - seconds
    os.utime(path, (when, when), follow_symlinks=False)


def age_all(root: Path, seconds: int = 3600) -> None:
    for path in [root / "MEMORY.md", *sorted((root / "memory").glob("*.md"))]:
        if path.exists():
            age(path, seconds)


def bag_of_words(text: str) -> list[float]:
    """A deterministic embedding: word counts hashed into DIMENSIONS buckets, synonyms folded."""
    vector = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z]+", text.lower()):
        word = SYNONYMS.get(word, word)
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMENSIONS
        vector[bucket] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def embeddings_responder(request: ReplayRequest) -> ReplayResponse:
    """Answers ``POST /v1/embeddings`` as OpenAI does, with :func:`bag_of_words` vectors."""
    body: dict[str, Any] = request.json
    assert request.path == "/v1/embeddings", request.path
    assert body["encoding_format"] == "float"
    texts = body["input"]
    data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(texts)]
    tokens = sum(len(t.split()) for t in texts)
    payload = {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return ReplayResponse.json_body(payload)


def embedded_texts(requests: list[ReplayRequest]) -> list[str]:
    """Every text sent to the embeddings endpoint, in order."""
    return [text for request in requests for text in request.json["input"]]
