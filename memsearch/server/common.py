"""What the MCP server and the HTTP API share: requests from plain JSON values, and the warm-up."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError

if TYPE_CHECKING:
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory

from memsearch.operations import MAX_QUERY_CHARS, MAX_TEXT_CHARS, parse_ref

__all__ = [
    "MAX_QUERY_CHARS", "MAX_TEXT_CHARS", "WarmService", "check_text", "delete_by_fields", "health_document",
    "new_memory", "parse_ref",
]  # fmt: skip


def check_text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"must be a string, not {value!r}", field=name)
    if len(value) > limit:
        raise InvalidInputError(f"is {len(value):,} characters long; the limit is {limit:,}", field=name)
    return value


def new_memory(fields: Mapping[str, Any]) -> NewMemory:
    """A memory from a JSON object with the fields of a JSONL import line."""
    from memsearch.models import NewMemory

    if isinstance(fields, Mapping) and "text" in fields:
        check_text("text", fields["text"], MAX_TEXT_CHARS)
    return NewMemory.from_json(dict(fields) if isinstance(fields, Mapping) else fields)


def delete_by_fields(ms: Memsearch, fields: dict[str, Any]) -> dict[str, Any]:
    """The delete operation's checked fields (memsearch.operations.DELETE) as one library call
    (`Memsearch.delete_matching`): `{"deleted": [ids]}`, or with `dry_run` `{"would_delete": [ids]}`."""
    from memsearch.retrieval.request import scope_from_fields

    refs, everything, dry_run = fields.pop("refs", None), fields.pop("everything", False), fields.pop("dry_run", False)
    scope = scope_from_fields(**fields) if fields else None
    gone = ms.delete_matching(refs, scope, everything=everything, dry_run=dry_run)
    return {"would_delete" if dry_run else "deleted": [memory.id for memory in gone]}


def health_document(authenticated: bool, db: object) -> dict[str, Any]:
    """`/health` of either HTTP server: liveness for anyone; with the token (or when none is
    required) also the version, the store and the pid, by which the CLI knows its server."""
    if not authenticated:
        return {"status": "ok"}
    from memsearch import __version__

    return {"status": "ok", "version": __version__, "db": str(db), "pid": os.getpid()}


class WarmService:
    """One `Memsearch` for the life of the process, opened and warmed before the first request:
    the store created if need be, the model and its ONNX session loaded, the vector matrix read."""

    def __init__(self, db: str | os.PathLike[str] | None, model: str | None = None, *, warm: bool = True) -> None:
        from memsearch.api import Memsearch

        self.ms: Memsearch = Memsearch(db, model=model)
        self._lock = threading.Lock()
        if warm:
            self.warm()

    def warm(self) -> None:
        with self._lock:
            self.ms.warm()

    def close(self) -> None:
        self.ms.close()
