"""Pure text work on memory files: daily-note bullets, ``## section`` edits, and search chunks.

Nothing here touches the disk. The rules are those a person editing the files would expect:

- A note is one bullet, ``- HH:MM text``; the lines after the first are indented so the bullet stays one.
- A section of ``MEMORY.md`` is a ``## heading`` and everything up to the next ``#`` or ``##`` heading
  (headings inside fenced code blocks do not count). Names match case-insensitively.
- A chunk (the unit of search) is a paragraph, or one top-level bullet with its indented continuation,
  remembered with its line range and the heading it sits under.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Chunk", "append_text", "check_section", "note_bullet", "replace_section", "split_chunks"]

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BULLET_RE = re.compile(r"^ ?(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_MAX_SECTION_CHARS = 200
_MAX_CHUNK_LINES = 40
_MAX_CHUNK_CHARS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """A searchable piece of a memory file: lines ``start_line``-``end_line`` (1-based, inclusive)."""

    start_line: int
    end_line: int
    text: str
    heading: str = ""


# --- writing -------------------------------------------------------------------------------------


def note_bullet(text: str, time: str) -> str:
    """``text`` as one timestamped bullet (with its trailing newline); later lines are indented."""
    lines = _clean(text).split("\n")
    rest = "".join(f"\n  {line}" if line.strip() else "\n" for line in lines[1:])
    return f"- {time} {lines[0]}{rest}\n"


def check_section(section: str) -> str:
    """The section name without ``#`` marks, or :class:`ValueError` if it cannot be a heading."""
    name = section.strip().lstrip("#").strip()
    if not name:
        raise ValueError("the section name is empty; give a short heading such as 'Preferences'")
    if _CONTROL_RE.search(name):
        raise ValueError(f"the section name must be one line of text, got {section!r}")
    if len(name) > _MAX_SECTION_CHARS:
        raise ValueError(f"the section name is longer than {_MAX_SECTION_CHARS} characters")
    return name


def append_text(document: str, text: str, section: str | None) -> str:
    """``document`` with ``text`` added at its end, or at the end of ``## section`` (created if missing)."""
    body = _clean(text).split("\n")
    lines = _lines(document)
    if section is None:
        return _join(_insert(lines, len(lines), body))
    found = _find_section(lines, section)
    if found is None:
        return _join(_new_section(lines, section, body))
    start, end = found
    return _join(_insert(lines, end, body, floor=start + 1))


def replace_section(document: str, text: str, section: str) -> str:
    """``document`` with the body of ``## section`` replaced by ``text`` (created if missing)."""
    body = _clean(text).split("\n")
    lines = _lines(document)
    found = _find_section(lines, section)
    if found is None:
        return _join(_new_section(lines, section, body))
    start, end = found
    after = lines[end:]
    return _join([*lines[: start + 1], "", *body, *([""] if after else []), *after])


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip()
    if not text.strip():
        raise ValueError("the text is empty; give the note to remember")
    if "\x00" in text:
        raise ValueError("the text contains a NUL character")
    return text


def _lines(document: str) -> list[str]:
    text = document.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []


def _join(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _insert(lines: list[str], end: int, body: list[str], *, floor: int = 0) -> list[str]:
    """Put ``body`` after the last non-blank line before ``end``; bullets join a list, prose gets a gap."""
    last = end
    while last > floor and not lines[last - 1].strip():
        last -= 1
    after = lines[end:]
    if last == 0:
        return [*body, *([""] if after else []), *after]
    joins_list = bool(_BULLET_RE.match(body[0])) and _last_item_is_bullet(lines[floor:last])
    gap = [] if joins_list or last == floor else [""]
    return [*lines[:last], *gap, *body, *([""] if after else []), *after]


def _last_item_is_bullet(lines: list[str]) -> bool:
    for line in reversed(lines):
        if _BULLET_RE.match(line):
            return True
        if not line.startswith((" ", "\t")):
            return False
    return False


def _new_section(lines: list[str], section: str, body: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return [*lines, *([""] if lines else []), f"## {section}", "", *body]


def _find_section(lines: list[str], section: str) -> tuple[int, int] | None:
    """(heading line, end) of the first ``## section``, as indexes into ``lines``."""
    wanted = _key(section)
    start: int | None = None
    for index, level, title in _headings(lines):
        if start is not None and level <= 2:
            return start, index
        if start is None and level == 2 and _key(title) == wanted:
            start = index
    return None if start is None else (start, len(lines))


def _key(title: str) -> str:
    return " ".join(title.split()).casefold()


def _headings(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """(index, level, title) of every heading outside fenced code blocks."""
    fence: str | None = None
    for index, line in enumerate(lines):
        marker = _FENCE_RE.match(line)
        if marker is not None:
            if fence is None:
                fence = marker.group(1)[0] * 3
            elif marker.group(1).startswith(fence):
                fence = None
            continue
        if fence is None and (match := _HEADING_RE.match(line)) is not None:
            yield index, len(match.group(1)), (match.group(2) or "").rstrip("#").strip()


# --- chunking ------------------------------------------------------------------------------------


def split_chunks(text: str) -> list[Chunk]:
    """The chunks of a markdown document, in order."""
    lines = _lines(text)
    headings = {index: title for index, _, title in _headings(lines)}
    chunks: list[Chunk] = []
    heading = ""
    current: list[str] = []
    first = 0
    is_bullet = False
    fence: str | None = None

    def flush() -> None:
        nonlocal current
        while current and not current[-1].strip():
            current.pop()
        if current:
            end = first + len(current)
            chunks.append(Chunk(start_line=first + 1, end_line=end, text="\n".join(current), heading=heading))
        current = []

    for index, line in enumerate(lines):
        marker = _FENCE_RE.match(line)
        if fence is not None:  # inside a code block: it belongs to the current chunk, whatever it holds
            current.append(line)
            if marker is not None and marker.group(1).startswith(fence):
                fence = None
            continue
        if index in headings:
            flush()
            heading = headings[index]
            continue
        if not line.strip():
            if current and not is_bullet:
                flush()
            elif current:
                current.append(line)  # a blank line may sit inside a bullet; trimmed if the bullet ends
            continue
        starts_bullet = bool(_BULLET_RE.match(line))
        indented = line.startswith(("  ", "\t"))
        ends_bullet = is_bullet and not indented and (starts_bullet or not current or not current[-1].strip())
        too_big = len(current) >= _MAX_CHUNK_LINES or sum(map(len, current)) >= _MAX_CHUNK_CHARS
        if current and (starts_bullet or ends_bullet or too_big):
            flush()
        if not current:
            first = index
            is_bullet = starts_bullet
        current.append(line)
        if marker is not None:
            fence = marker.group(1)[0] * 3
    flush()
    return chunks
