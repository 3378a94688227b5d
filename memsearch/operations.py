"""The operations: each owns its use case. An operation is its fields (`memsearch.fields`: name,
JSON type, bounds, choices, default, description, command-line option), the typed request made from
their values (`Operation.request`: every value checked once, by its field, as the request is built)
and the library call that runs it (`Operation.run(memsearch, request) -> outcome`), with the
outcome's JSON document (`Operation.document`).

The front ends are made from these tables: the HTTP API's routes (an operation's `HttpRoute`: its
method, path and how its fields are sent, which the server (`memsearch.server.http.ENDPOINTS`, one
generic handler) and `memsearch.Client` both read), its OpenAPI document, the MCP tools
(`memsearch.server.mcp.TOOLS`, one generic call), and the CLI's options
(`memsearch.cli.options.with_fields`) and error wording. A value of the wrong JSON type, out of
bounds or not among the choices is an `InvalidInputError` naming the field; a field the operation
does not have is one too.

This module imports nothing heavy: the library is imported by the builders and runners, when an
operation is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError
from memsearch.fields import (
    AFTER,
    BEFORE,
    DEDUP_PROFILE,
    DRY_RUN,
    EVERYTHING,
    EXPLAIN,
    IMPORT_OPTIONS,
    MAX_K,
    MAX_MESSAGE_BYTES,
    MAX_MS,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_TIMELINE,
    MEMORY_FIELDS,
    MEMORY_NAMES,
    QUERY,
    RAW,
    REF,
    REFS,
    REPLACE,
    REQUEST_FIELDS,
    REQUEST_NAMES,
    SCOPE_FIELDS,
    SCOPE_NAMES,
    TYPES,
    Field,
    _shown,
    parse_ref,
)

if TYPE_CHECKING:
    from memsearch.models import NewMemory
    from memsearch.retrieval.request import SearchRequest

__all__ = [
    "ADD", "DELETE", "GET", "IMPORT", "MAX_K", "MAX_MESSAGE_BYTES", "MAX_MS", "MAX_QUERY_CHARS", "MAX_TEXT_CHARS",
    "MAX_TIMELINE", "MEMORY_FIELDS", "MEMORY_NAMES", "OPERATIONS", "REQUEST_FIELDS", "REQUEST_NAMES",
    "SCOPE_FIELDS", "SCOPE_NAMES", "SEARCH", "STATS", "TIMELINE", "TYPES", "AddRequest", "Field", "HttpRoute",
    "Operation", "Search", "parse_ref",
]  # fmt: skip

Values = dict[str, Any]


def _checked(operation: Operation, values: Mapping[str, Any]) -> Values:
    """Every field's value checked by its field, absent ones given their default; the values the
    library method checks by the same field (`Operation.checked_by_run`) are left to it: each
    value is checked once."""
    checked = {
        f.name: values.get(f.name) if f.name in operation.checked_by_run else f.check(values.get(f.name))
        for f in operation.fields
    }
    return {name: value if value is not None else operation.field(name).default for name, value in checked.items()}


def _document(request: Any, outcome: Any) -> Any:
    return outcome.to_dict() if hasattr(outcome, "to_dict") else outcome


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class HttpRoute:
    """Where an operation is served over HTTP, read by the server (its endpoint) and by
    `memsearch.Client` (what it sends): the method and path (`{name}`: that field, in the path),
    how the other fields are sent (`body`: a JSON object; `query`: URL parameters; `content`: URL
    parameters, with the operation's `content` input as the body), and what the API's docs say."""

    method: str
    path: str
    sends: str = "query"  # body | query | content
    operation_id: str = ""  # OpenAPI's operationId; default: method_name (get_stats)
    summary: str = ""  # default: the operation's
    returns: str = "the CLI's JSON document"

    def __post_init__(self) -> None:
        assert self.sends in ("body", "query", "content"), self.sends

    @property
    def path_names(self) -> tuple[str, ...]:
        """The fields the path carries, in its order."""
        return tuple(part[1:-1] for part in self.path.split("/") if part.startswith("{") and part.endswith("}"))


@dataclass(frozen=True)
class Operation:
    """A use case: its fields, the typed request made from their values, and the call that runs it."""

    name: str
    summary: str
    fields: tuple[Field, ...]
    # The typed request from the values given (absent ones left out), each checked once by its field.
    build: Callable[[Operation, Values], Any] = _checked
    # The library call: (Memsearch, request) -> outcome.
    runner: Callable[[Any, Any], Any] = lambda ms, request: None
    # (request, outcome) -> the JSON document every front end answers with.
    documenter: Callable[[Any, Any], Any] = _document
    # Inputs that are no field (not in any schema): an import's content, a progress callback.
    inputs: tuple[str, ...] = ()
    # The fields the library method `runner` calls checks itself, by the same field (its Python
    # callers' values too): the request leaves them to it.
    checked_by_run: tuple[str, ...] = ()
    # Where the HTTP API serves it (and memsearch.Client sends it); None: not over HTTP.
    route: HttpRoute | None = None

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        assert len(names) == len(set(names)), f"{self.name} names a field twice"
        if self.route is not None:
            unknown = set(self.route.path_names) - set(names)
            assert not unknown, f"{self.name}'s path names no field of it: {sorted(unknown)}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {f.name: f.json_schema() for f in self.fields},
            "required": [f.name for f in self.fields if f.required],
            "additionalProperties": False,
        }

    # -- the use case ------------------------------------------------------------------------

    def request(self, values: object, **inputs: Any) -> Any:
        """The typed request from JSON values (or parsed query parameters, or option values):
        an unknown or missing field is refused here, and every value is checked once, by its
        field, as the request is built. `inputs` are the operation's inputs that are no field."""
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"the {self.name} request must be a JSON object, not {_shown(values)}")
        self._refuse_unknown(values)
        given = {name: value for name, value in values.items() if value is not None}
        for f in self.fields:
            if f.required and f.name not in given:
                raise InvalidInputError("is missing", field=f.name)
        unknown = sorted(set(inputs) - set(self.inputs))
        assert not unknown, f"{self.name} takes no input {unknown}"
        return self.build(self, {**given, **inputs})

    def run(self, ms: Any, request: Any) -> Any:
        """The use case on `ms` (a `memsearch.api.Memsearch`): its outcome."""
        return self.runner(ms, request)

    def document(self, request: Any, outcome: Any) -> Any:
        """The outcome as the JSON document the HTTP API, the MCP tools and `--format json` give."""
        return self.documenter(request, outcome)

    def answer(self, ms: Any, values: object, **inputs: Any) -> Any:
        """The JSON document for these values: request, run, document (what HTTP and MCP call)."""
        request = self.request(values, **inputs)
        return self.document(request, self.run(ms, request))

    # -- front ends' parsing -----------------------------------------------------------------

    def check(self, body: object) -> dict[str, Any]:
        """The values of a JSON object, each checked by its field; absent and null ones left out
        (for a client that checks before it sends: `request` checks what it builds)."""
        if not isinstance(body, Mapping):
            raise InvalidInputError(f"the {self.name} request must be a JSON object, not {_shown(body)}")
        self._refuse_unknown(body)
        checked = {name: self.field(name).check(value) for name, value in body.items()}
        return self._complete({name: value for name, value in checked.items() if value is not None})

    def from_query(self, params: Mapping[str, Sequence[str]], *, skip: Sequence[str] = ()) -> dict[str, Any]:
        """The values of URL query parameters, parsed by type (`Field.from_text`; checked by
        `request`), by field name (`skip`: parameters handled apart)."""
        by_parameter = {f.query_name: f for f in self.fields if f.type != "object"}
        unknown = sorted(set(params) - set(by_parameter) - set(skip))
        if unknown:
            raise InvalidInputError(
                f"is not a parameter of {self.name} (known: {', '.join(sorted(by_parameter))})", field=unknown[0]
            )
        parsed = {
            by_parameter[name].name: by_parameter[name].from_text(values)
            for name, values in params.items()
            if name not in skip
        }
        return self._complete({name: value for name, value in parsed.items() if value is not None})

    def _refuse_unknown(self, body: Mapping[Any, Any]) -> None:
        unknown = sorted(str(name) for name in body if name not in self.names)
        if unknown:
            raise InvalidInputError(f"is not a field of {self.name} (known: {', '.join(self.names)})", field=unknown[0])

    def _complete(self, checked: dict[str, Any]) -> dict[str, Any]:
        for f in self.fields:
            if f.required and f.name not in checked:
                raise InvalidInputError("is missing", field=f.name)
        return checked


# -- search ------------------------------------------------------------------------------------


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Search:
    """A search as a front end asks it: the library's request, and what its document keeps."""

    request: SearchRequest
    raw: bool = False  # every candidate before filtering, with why it was dropped
    explain: bool = False  # each result's score breakdown


def _search_request(operation: Operation, values: Values) -> Search:
    """`SearchRequest`'s constructor checks its values (once); raw and explain are checked here."""
    from memsearch.retrieval.request import request_from_fields

    values = dict(values)
    raw, explain = RAW.check(values.pop("raw", None)), EXPLAIN.check(values.pop("explain", None))
    request = request_from_fields(values.pop("query"), **values)
    return Search(request, raw=bool(raw), explain=bool(explain))


SEARCH = Operation(
    "search",
    "Search the memories",
    (QUERY, *REQUEST_FIELDS, RAW, EXPLAIN),
    build=_search_request,
    runner=lambda ms, search: ms.search(search.request),
    documenter=lambda search, outcome: outcome.to_dict(raw=search.raw, explain=search.explain),
    route=HttpRoute("POST", "/search", "body", summary="Search with memsearch's own fields"),
)

# -- writes ------------------------------------------------------------------------------------


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class AddRequest:
    """An add as a front end asks it: the memory, whether it replaces one, the profile for dedup."""

    memory: NewMemory
    replace: bool = False
    profile: str | None = None


def _add_request(operation: Operation, values: Values) -> AddRequest:
    from memsearch.models import NewMemory
    from memsearch.timeutil import parse_moment, to_iso, utc_now

    checked = _checked(operation, values)
    if checked["created_at"] is not None:  # a relative time too (7d: seven days ago)
        checked["created_at"] = to_iso(parse_moment(checked["created_at"], now=utc_now(), field="created_at"))
    memory = {name: value for name, value in checked.items() if name in MEMORY_NAMES and value is not None}
    return AddRequest(NewMemory.from_json(memory), replace=checked["replace"], profile=checked["profile"])


ADD = Operation(
    "add",
    "Add one memory",
    (*MEMORY_FIELDS, REPLACE, DEDUP_PROFILE),
    build=_add_request,
    runner=lambda ms, add: ms.add(add.memory, replace=add.replace, profile=add.profile),
    route=HttpRoute("POST", "/add", "body", returns="{id, stored, duplicate_of, similarity}"),
)


def _import_request(operation: Operation, values: Values) -> Values:
    content = values.get("content")
    if not isinstance(content, str):
        raise InvalidInputError(f"the import's content must be text, not {_shown(content)}")
    return {**_checked(operation, values), "content": content, "progress": values.get("progress")}


def _import(ms: Any, request: Values) -> Any:
    return ms.import_text(
        request["content"],
        source=request["source"] or "request body",
        fmt=request["format"],
        sessions=request["sessions"],
        facets=request["facets"],
        replace=request["replace"],
        profile=request["profile"],
        conversation=request["conversation"],
        progress=request["progress"],
    )


IMPORT = Operation(
    "import",
    "Import a JSONL or conversation file: all of it is stored, or none",
    IMPORT_OPTIONS,
    build=_import_request,
    runner=_import,
    inputs=("content", "progress"),
    checked_by_run=("sessions", "facets", "replace"),
    route=HttpRoute("POST", "/import", "content"),
)

# -- reads and deletes -------------------------------------------------------------------------

GET = Operation(
    "get",
    "One memory with every field, by id or key",
    (REF,),
    runner=lambda ms, request: ms.get(request["ref"]),
    route=HttpRoute("GET", "/memories/{ref}", operation_id="get_memory"),
)


def _delete(ms: Any, request: Values) -> dict[str, Any]:
    """`{"deleted": [ids]}`, or with `dry_run` `{"would_delete": [ids]}`."""
    from memsearch.retrieval.request import scope_from_fields

    filters = {name: request[name] for name in SCOPE_NAMES if request[name] is not None}
    scope = scope_from_fields(**filters) if filters else None
    gone = ms.delete_matching(request["refs"], scope, everything=request["everything"], dry_run=request["dry_run"])
    return {"would_delete" if request["dry_run"] else "deleted": [memory.id for memory in gone]}


DELETE = Operation(
    "delete",
    "Delete memories by id or key (all of them, or none if any is not found), or every one the filters match",
    (
        REFS,
        *SCOPE_FIELDS,
        EVERYTHING,
        DRY_RUN,
    ),
    runner=_delete,
    checked_by_run=("everything", "dry_run"),
    route=HttpRoute(
        "DELETE",
        "/memories",
        operation_id="delete_matching",
        returns="{deleted: [id]}; with dry_run, {would_delete: [id]}",
    ),
)

TIMELINE = Operation(
    "timeline",
    "The memories around one in order",
    (REF, BEFORE, AFTER),
    runner=lambda ms, request: ms.timeline(request["ref"], before=request["before"], after=request["after"]),
    checked_by_run=("before", "after"),
    route=HttpRoute("GET", "/timeline/{ref}"),
)

STATS = Operation(
    "stats", "What the store holds", (), runner=lambda ms, request: ms.stats(), route=HttpRoute("GET", "/stats")
)

OPERATIONS: tuple[Operation, ...] = (SEARCH, ADD, IMPORT, GET, DELETE, TIMELINE, STATS)
