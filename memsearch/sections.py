"""Memories indexed from note files (`memsearch index`), as the rest of memsearch sees them: a
section's key names its file (`note:{path}#{h}`, see memsearch.ingest.notes), its metadata its
place, and search results group by their file (`group_by_file`, what `search --per-file` shows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memsearch.models import Memory

NOTE_KEY_PREFIX = "note:"


def key_path(key: str | None) -> str | None:
    """The file a note section's key names (`note:{path}#…`), or None for another key."""
    if key is None or not key.startswith(NOTE_KEY_PREFIX) or "#" not in key:
        return None
    return key[len(NOTE_KEY_PREFIX) :].rpartition("#")[0] or None


def _place(key: str | None, metadata: Mapping[str, Any]) -> tuple[str, int] | None:
    path, line = metadata.get("path"), metadata.get("start_line")
    if not isinstance(path, str) or key_path(key) != path:
        return None
    return path, line if isinstance(line, int) and not isinstance(line, bool) else 1


def section_of(memory: Memory) -> tuple[str, int] | None:
    """The file and first line of a memory indexed from a note file, or None for a memory of its
    own: a section's text is its file's, so it is changed in the file, not in the store."""
    return _place(memory.key, memory.metadata) if memory.kind == "note" else None


def group_by_file(results: Sequence[Mapping[str, Any]], per_file: int) -> list[dict[str, Any]]:
    """Search results (a search document's `results`, best first) as rows: the sections of one
    file share a row (its `ids`, at most `per_file`; `more` counts the others), any other memory
    is a row of its own; rows in the order of their best result, ranked from 1.

    A row: `{"rank", "path" (None for a memory of its own), "line" (its best section's), "title"
    (the front matter's, or None), "score" (its best), "ids", "more"}`."""
    rows: list[dict[str, Any]] = []
    of_path: dict[str, dict[str, Any]] = {}
    for result in results:
        metadata = result.get("metadata") or {}
        place = _place(result.get("key"), metadata) if result.get("kind", "note") == "note" else None
        if place is not None and place[0] in of_path:
            row = of_path[place[0]]
            if len(row["ids"]) < per_file:
                row["ids"].append(result["id"])
            else:
                row["more"] += 1
            continue
        title = metadata.get("title") if place is not None else None
        row = {
            "rank": len(rows) + 1, "path": place[0] if place else None, "line": place[1] if place else None,
            "title": title if isinstance(title, str) else None, "score": result["score"], "ids": [result["id"]],
            "more": 0,
        }  # fmt: skip
        rows.append(row)
        if place is not None:
            of_path[place[0]] = row
    return rows
