"""What the MCP server and the HTTP API share: requests from plain JSON values, and the warm-up."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError

if TYPE_CHECKING:
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory
    from memsearch.retrieval.pipeline import SearchRequest

MAX_QUERY_CHARS = 4_000  # a query longer than this is not a question; refuse it before embedding
MAX_TEXT_CHARS = 100_000  # one memory's text


def check_text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"must be a string, not {value!r}", field=name)
    if len(value) > limit:
        raise InvalidInputError(f"is {len(value)} characters long; the limit is {limit}", field=name)
    return value


def search_request(
    query: object,
    *,
    k: int | None = None,
    mode: str = "auto",
    project: str | None = None,
    namespace: str | None = None,
    tags: Sequence[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    granularity: str = "turn",
    max_tokens: int | None = None,
    as_of: str | None = None,
    touch: bool = True,
    boost: Sequence[str] | None = None,
    rerank: str | None = None,
    max_ms: int | None = None,
) -> SearchRequest:
    """A validated search request from JSON values (the same checks as the CLI's)."""
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.retrieval.request import Boost
    from memsearch.store import Scope
    from memsearch.timeutil import parse_time

    for name, strings in (("tags", tags), ("boost", boost)):
        if strings is not None and (isinstance(strings, str) or not all(isinstance(s, str) for s in strings)):
            raise InvalidInputError("must be a list of strings", field=name)
    if rerank is not None and not isinstance(rerank, str):
        raise InvalidInputError(f"must be a string, not {rerank!r}", field="rerank")
    for name, value in (("k", k), ("max_tokens", max_tokens), ("max_ms", max_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInputError(f"must be a whole number, not {value!r}", field=name)
    scope = Scope(
        project=project,
        namespace=namespace,
        tags=tuple(tags or ()),
        since=parse_time(since, what="since") if since else None,
        until=parse_time(until, what="until") if until else None,
    )
    return SearchRequest(
        query=check_text("query", query, MAX_QUERY_CHARS),
        k=k,
        mode=mode,
        scope=scope,
        as_of=parse_time(as_of, what="as_of") if as_of else None,
        max_tokens=max_tokens,
        touch=touch,
        granularity=granularity,
        boosts=tuple(Boost.parse(text) for text in boost or ()),
        rerank=rerank,
        max_ms=max_ms,
    )


def new_memory(fields: Mapping[str, Any]) -> NewMemory:
    """A memory from a JSON object with the fields of a JSONL import line."""
    from memsearch.models import NewMemory

    if isinstance(fields, Mapping) and "text" in fields:
        check_text("text", fields["text"], MAX_TEXT_CHARS)
    return NewMemory.from_json(dict(fields) if isinstance(fields, Mapping) else fields)


def parse_ref(ref: object) -> int | str:
    """An id (an int, or a string of digits) or a key (any other string)."""
    if isinstance(ref, bool) or not isinstance(ref, int | str) or (isinstance(ref, str) and not ref.strip()):
        raise InvalidInputError(f"must be a memory id or key, not {ref!r}", field="ref")
    return int(ref) if isinstance(ref, str) and ref.isdigit() else ref


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
        from memsearch.retrieval.pipeline import SearchRequest

        with self._lock:
            store = self.ms.store(create=True)
            self.ms.encoder()
            if store.vector_count():  # reads the vector matrix and runs the model once
                self.ms.search(SearchRequest("warm up", k=1, mode="hybrid", touch=False))
            else:
                self.ms.encoder().encode(["warm up"])

    def close(self) -> None:
        self.ms.close()
