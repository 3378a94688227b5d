"""`--queries`: a JSONL text of search requests, {"query", optional "k" and "mode"} a line, every
other request field given once for all of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memsearch.errors import ImportLineError, InvalidInputError
from memsearch.jsonl import parse_jsonl
from memsearch.retrieval.request import SearchRequest

QUERY_FIELDS = ("query", "k", "mode")


def request_from_json(obj: Any, defaults: Mapping[str, Any]) -> SearchRequest:
    """A search request from a JSON object {"query", optional "k" and "mode"}; every other request
    field comes from `defaults` (which also gives `k` and `mode` when the object does not)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
        raise InvalidInputError('expected an object with a "query" string')
    unknown = sorted(set(obj) - set(QUERY_FIELDS))
    if unknown:
        raise InvalidInputError(f"unknown field {unknown[0]!r} (known: {', '.join(QUERY_FIELDS)})")
    k = obj.get("k", defaults.get("k"))
    if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
        raise InvalidInputError(f"k must be a whole number, not {k!r}")
    fields = {**defaults, **obj, "k": k}
    return SearchRequest(**fields)


def parse_queries(content: str | Iterable[str], source: str, defaults: Mapping[str, Any]) -> list[SearchRequest]:
    """Requests from a JSONL of {"query", optional "k" and "mode"}; all lines are checked first."""
    _check_defaults(defaults)
    requests = []
    for number, obj in parse_jsonl(content, source):
        try:
            requests.append(request_from_json(obj, defaults))
        except InvalidInputError as error:
            raise ImportLineError(source, number, str(error)) from None
    if not requests:
        raise InvalidInputError(f"{source} has no queries")
    return requests


def _check_defaults(defaults: Mapping[str, Any]) -> None:
    """The defaults of `parse_queries` must be SearchRequest fields (other than the query)."""
    from dataclasses import fields

    known = [f.name for f in fields(SearchRequest) if f.name != "query"]
    unknown = sorted(repr(name) for name in defaults if name not in known)
    if unknown:
        raise InvalidInputError(f"{unknown[0]} is not a search request field (known: {', '.join(known)})")
