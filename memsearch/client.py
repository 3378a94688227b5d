"""`memsearch.Client`: the library's client of a running `memsearch serve`, with the facade's
methods (`search`, `add`, `import_text`, `get`, `delete`, `timeline`, `stats`) and its typed
outcomes and errors, over the server's HTTP JSON API.

    from memsearch import Client

    client = Client.connect(db="notes.db")            # the store's own running server, with its token
    client = Client("http://127.0.0.1:8765", token)   # or any server by URL
    reply = client.search("where is the deploy key?", k=5)

`client.run(operation, **fields)` sends any operation of `memsearch.operations` that has an HTTP
route (`Operation.route`: its method and path, the one the server serves it at) and gives back its
JSON document; each typed method is a thin wrapper of it. The operation's fields go as the JSON
body or the URL's parameters, under the names the operation gives them. A library error of the
server comes back as the same `memsearch.errors` class with its `field`; a server that does not
accept connections is `ServerUnavailableError` (nothing was sent), a 401 `UnauthorizedError`,
anything else outside the API `ServerError`.

Stdlib, h11 (memsearch.http_exchange: the HTTP/1.1 exchange) and the library's light modules only
(operations, errors; models and outcomes when a reply is read): the CLI's calls through a server
import nothing heavy, and neither does this.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import memsearch.errors as errors  # (not `from memsearch import`: the package re-exports Client)
from memsearch.errors import (
    InvalidInputError,
    MemsearchError,
    ServerError,
    ServerUnavailableError,
    UnauthorizedError,
)
from memsearch.fields import AFTER, BEFORE, FACETS, IMPORT_FORMAT, REPLACE, SESSIONS
from memsearch.operations import OPERATIONS, Field, Operation

if TYPE_CHECKING:
    from memsearch.models import Memory, NewMemory
    from memsearch.outcomes import AddOutcome, ImportOutcome, Timeline
    from memsearch.retrieval.request import SearchRequest

__all__ = ["CONNECT_TIMEOUT_S", "REPLY_TIMEOUT_S", "Client", "SearchHit", "SearchReply"]

CONNECT_TIMEOUT_S = 1.0  # a server that does not accept by then is not answering
REPLY_TIMEOUT_S = 600.0  # an import may embed for a long time

_log = logging.getLogger("memsearch")


_OPERATIONS: dict[str, Operation] = {operation.name: operation for operation in OPERATIONS}


@dataclass(frozen=True)
class SearchHit:
    """One row of a search reply: a result (ranked) or, with `raw`, a candidate (`dropped` says
    why it is not a result). `fields` is the row as the server sent it."""

    id: int
    score: float
    text: str
    key: str | None
    rank: int | None
    dropped: str | None
    explain: Mapping[str, Any] | None
    fields: Mapping[str, Any]

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> SearchHit:
        return cls(
            id=row["id"],
            score=row["score"],
            text=row["text"],
            key=row.get("key"),
            rank=row.get("rank"),
            dropped=row.get("dropped"),
            explain=row.get("explain"),
            fields=row,
        )


@dataclass(frozen=True)
class SearchReply:
    """What a server's search answered: `results` best first (`candidates` too with `raw`), and
    `to_dict()`, the document itself (the `search --format json` document of the contract)."""

    query: str
    profile: str
    strategy: str
    results: list[SearchHit]
    candidates: list[SearchHit]
    document: Mapping[str, Any]

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> SearchReply:
        return cls(
            query=document["query"],
            profile=document["profile"],
            strategy=document["strategy"],
            results=[SearchHit.from_dict(row) for row in document["results"]],
            candidates=[SearchHit.from_dict(row) for row in document.get("candidates", ())],
            document=document,
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.document)


class Client:
    """A running `memsearch serve` at `url`, asked with `token` (its bearer token, if it wants
    one). Nothing is sent until a call; each call is one request on a connection of its own,
    which must be accepted within `connect_timeout` seconds and answered within `timeout`."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        timeout: float = REPLY_TIMEOUT_S,
    ) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port or 80
        except ValueError:
            port = None
        if parts.scheme != "http" or not parts.hostname or port is None:
            raise InvalidInputError(f"must be an http:// URL, not {url!r}", field="url")
        self.url = url.rstrip("/")
        self.host, self.port = parts.hostname, port
        self.token = token
        self.connect_timeout, self.timeout = connect_timeout, timeout

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None  # no connection outlives its call

    # -- finding a server ---------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        url: str | None = None,
        *,
        db: str | os.PathLike[str] | None = None,
        token: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        timeout: float = REPLY_TIMEOUT_S,
    ) -> Client:
        """The server at `url`, else the trusted running server of the store `db` (as `discover`;
        ServerUnavailableError when none runs). Its token: `token`, else the one the store's own
        server made at start when `url` is that server, else MEMSEARCH_API_KEY (or the config's)."""
        if url is None:
            found = cls.discover(db, token=token, connect_timeout=connect_timeout, timeout=timeout)
            if found is None:
                raise ServerUnavailableError(f"no trusted `memsearch serve` of {_store(db)} answers")
            return found
        if token is None:
            from memsearch.config import configured_token

            token = _made_token(_store(db), url) or configured_token()
        return cls(url, token, connect_timeout=connect_timeout, timeout=timeout)

    @classmethod
    def discover(
        cls,
        db: str | os.PathLike[str] | None = None,
        *,
        token: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        timeout: float = REPLY_TIMEOUT_S,
    ) -> Client | None:
        """The running server of the store `db` that its discovery file names and that passes
        every trust check (memsearch.discovery), with the token it made at start (else
        `token`, else MEMSEARCH_API_KEY); None when there is none (`--debug` logging says why)."""
        from memsearch.discovery import discover

        if token is None:
            from memsearch.config import configured_token

            token = configured_token()
        advertised = discover(_store(db), token)
        if advertised is None:
            return None
        return cls(advertised.url, advertised.token, connect_timeout=connect_timeout, timeout=timeout)

    # -- the facade's methods -----------------------------------------------------------------

    def search(
        self, request: SearchRequest | str, *, raw: bool = False, explain: bool = False, **fields: Any
    ) -> SearchReply:
        """A search: a `SearchRequest`, or a query with the search operation's fields (`k`, `mode`,
        `profile`, `tags`, …). `raw` adds every candidate; `explain` each row's score breakdown."""
        if isinstance(request, str):
            body: dict[str, Any] = {"query": request}
        else:
            if request.profile is not None and not isinstance(request.profile, str):
                raise InvalidInputError("must be a profile's name to go to a server", field="profile")
            body = request.to_fields()
        document = self.run("search", **{**body, **fields, "raw": raw, "explain": explain})
        return SearchReply.from_dict(document)

    def add(self, memory: NewMemory | str, *, replace: bool = False, profile: str | None = None) -> AddOutcome:
        """Store one memory (a `NewMemory`, or its text); as `Memsearch.add`."""
        fields = {"text": memory} if isinstance(memory, str) else memory.to_fields()
        return _add_outcome(self.run("add", **fields, replace=replace, profile=profile))

    def import_text(
        self,
        content: str,
        *,
        source: str | None = None,
        fmt: str = IMPORT_FORMAT.default,
        sessions: bool = SESSIONS.default,
        facets: bool = FACETS.default,
        replace: bool = REPLACE.default,
        profile: str | None = None,
        conversation: str | None = None,
    ) -> ImportOutcome:
        """Import a JSONL or conversation file's text: all of it is stored, or none; as
        `Memsearch.import_text` (`source` names it in messages)."""
        options = {"format": fmt, "source": source, "conversation": conversation, "sessions": sessions}
        options |= {"facets": facets, "replace": replace, "profile": profile}
        return _import_outcome(self.run("import", content=content, **options))

    def get(self, ref: int | str) -> Memory:
        """One memory with every field, by id (an int, or ASCII digits) or key."""
        from memsearch.models import Memory

        return Memory.from_dict(self.run("get", ref=ref))

    def delete(self, refs: Sequence[int | str]) -> list[int]:
        """Delete memories by id or key: all of them, or none if any is not found; their ids."""
        deleted: list[int] = self.run("delete", refs=list(refs))["deleted"]
        return deleted

    def delete_matching(self, *, everything: bool = False, dry_run: bool = False, **filters: Any) -> list[int]:
        """Delete every memory the filters (the delete operation's: `project`, `tags`, `since`, …)
        match, or with `everything` every memory; with `dry_run` only say which. Their ids."""
        document = self.run("delete", **filters, everything=everything, dry_run=dry_run)
        ids: list[int] = document["would_delete" if dry_run else "deleted"]
        return ids

    def timeline(self, ref: int | str, *, before: int = BEFORE.default, after: int = AFTER.default) -> Timeline:
        """The memories around one in order; as `Memsearch.timeline`."""
        from memsearch.models import Memory
        from memsearch.outcomes import Timeline

        document = self.run("timeline", ref=ref, before=before, after=after)
        return Timeline([Memory.from_dict(memory) for memory in document["memories"]], document["current"])

    def stats(self) -> dict[str, Any]:
        """What the store holds; as `Memsearch.stats`."""
        return self.run("stats")

    def health(self) -> dict[str, Any]:
        """`/health`: `{status}`, and with the token (or when none is wanted) the version, store and pid."""
        document: dict[str, Any] = self.request("GET", "/health")
        return document

    # -- the wire -----------------------------------------------------------------------------

    def run(self, operation: str | Operation, /, **fields: Any) -> dict[str, Any]:
        """Any operation with an HTTP route (`Operation.route`), by name or itself, with its fields
        as keywords (and `content=`, the text of an operation that takes one, such as import): the
        server's JSON document, as `Operation.answer` gives it in-process."""
        spec = _operation(operation)
        content = fields.pop("content", None) if "content" in spec.inputs else None
        document = self.call(spec, fields, content=content)
        if not isinstance(document, dict):
            raise ServerError(f"the server at {self.url} answered {spec.name} with {type(document).__name__}")
        return document

    def call(
        self, operation: str | Operation, fields: Mapping[str, Any] | None = None, *, content: str | None = None
    ) -> Any:
        """One operation (of memsearch.operations, by name, or an Operation with a route) with its
        fields: the server's JSON reply. Fields the operation does not have are refused here; the
        server checks the rest. `content`: the text an operation sent as content (import) carries
        as its body."""
        spec = _operation(operation)
        route = spec.route
        assert route is not None  # (_operation refuses an operation without one)
        given = {name: value for name, value in (fields or {}).items() if value is not None}
        unknown = sorted(set(given) - {f.name for f in spec.fields})
        if unknown:
            known = ", ".join(f.name for f in spec.fields)
            raise InvalidInputError(f"is not a field of {spec.name} (known: {known})", field=unknown[0])
        path = route.path
        for name in list(given):
            if "{" + name + "}" in path:
                path = path.replace("{" + name + "}", quote(str(given.pop(name)), safe=""))
        if route.sends == "body":
            return self.request(route.method, path, json.dumps(given).encode("utf-8"), "application/json")
        query = _query(spec, given)
        target = f"{path}?{query}" if query else path
        if route.sends == "content":
            try:
                body = (content or "").encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInputError("is not valid Unicode text", field="content") from None
            return self.request(route.method, target, body, "application/x-ndjson")
        return self.request(route.method, target)

    def request(self, method: str, target: str, body: bytes | None = None, content_type: str | None = None) -> Any:
        """One HTTP request: the reply's JSON document, or the typed error it carries."""
        from memsearch.http_exchange import NotConnected, ReplyError, ask

        headers = {"Content-Type": content_type} if content_type else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            reply = ask(
                self.host,
                self.port,
                method,
                target,
                connect_timeout=self.connect_timeout,
                timeout=self.timeout,
                headers=headers,
                body=body,
            )
        except NotConnected as error:
            reason = f"the server at {self.url} does not answer ({error.strerror or error})"
            raise ServerUnavailableError(reason) from None
        except (OSError, ReplyError) as error:
            raise ServerError(f"the server at {self.url} did not reply ({error or type(error).__name__})") from None
        _log.debug("%s %s through the server at %s", method, target, self.url)
        if reply.status == 401:
            raise UnauthorizedError(
                f"the server at {self.url} wants a bearer token it was not given: set MEMSEARCH_API_KEY"
            )
        try:
            document = json.loads(reply.body)
        except ValueError:
            raise ServerError(f"the server at {self.url} answered {reply.status} without JSON") from None
        if reply.status >= 400:
            raise error_from(document, reply.status)
        return document


def _operation(operation: str | Operation) -> Operation:
    """The operation of that name (or that one), if it has an HTTP route."""
    spec = operation if isinstance(operation, Operation) else _OPERATIONS.get(operation)
    if spec is None:
        raise InvalidInputError(f"is not an operation (known: {', '.join(_OPERATIONS)})", field="operation")
    if spec.route is None:
        raise InvalidInputError(f"{spec.name} has no HTTP route", field="operation")
    return spec


def error_from(document: object, status: int) -> MemsearchError:
    """A server's error document (`{error, type, field}`) as the library error it was: the
    `memsearch.errors` class of that name (with its `field` and wording), a refusal before any
    library call (400, 415) an InvalidInputError, anything else a ServerError."""
    if not isinstance(document, Mapping):
        return ServerError(f"the server answered {status} with {type(document).__name__}, not an error document")
    kind, field = str(document.get("type")), document.get("field")
    message = str(document.get("error", "the server failed"))
    cls: type[MemsearchError] = ServerError
    found = getattr(errors, kind, None)
    if kind == "DatasetError":
        from memsearch.ingest.readers import DatasetError

        found = DatasetError
    if isinstance(found, type) and issubclass(found, MemsearchError):
        cls = found
    elif status in (400, 415):
        cls = InvalidInputError
    field = field if isinstance(field, str) and field else None
    problem = message[len(field) + 1 :] if field and message.startswith(f"{field} ") else message
    error = cls.__new__(cls)  # the message as sent, whatever the class's own constructor words
    MemsearchError.__init__(error, problem, field=field if problem is not message else None)
    return error


def _query(operation: Operation, given: Mapping[str, Any]) -> str:
    """The fields as URL parameters, in the operation's order and under its parameter names: an
    array repeated, a boolean as true or false (left out at its default)."""
    pairs: list[tuple[str, str]] = []
    for field in operation.fields:
        if field.name not in given:
            continue
        value, name = given[field.name], _parameter(field)
        if isinstance(value, bool):
            if value != field.default:
                pairs.append((name, "true" if value else "false"))
        elif isinstance(value, list | tuple):
            pairs.extend((name, str(item)) for item in value)
        else:
            pairs.append((name, str(value)))
    return urlencode(pairs)


def _parameter(field: Field) -> str:
    """The field's name as a URL parameter (`tag` for tags, …)."""
    parameter: str | None = getattr(field, "parameter", None)
    return parameter or field.name


def _add_outcome(document: Mapping[str, Any]) -> AddOutcome:
    from dataclasses import fields

    from memsearch.outcomes import AddOutcome

    return AddOutcome(**{f.name: document[f.name] for f in fields(AddOutcome) if f.name in document})


def _import_outcome(document: Mapping[str, Any]) -> ImportOutcome:
    from memsearch.outcomes import ImportOutcome

    numbered_by = "item" if any("item" in duplicate for duplicate in document["duplicates"]) else "line"
    duplicates = []
    for duplicate in document["duplicates"]:
        duplicates.append((duplicate[numbered_by], _add_outcome(duplicate)))
    return ImportOutcome(
        source=document["source"],
        counts=dict(document["counts"]),
        duplicates=duplicates,
        numbered_by=numbered_by,
        ignored=tuple(document.get("ignored_fields", ())),
        repeats=document.get("repeats", 0),
    )


def _store(db: str | os.PathLike[str] | None) -> Path | str:
    from memsearch.paths import resolve_db_path

    return resolve_db_path(db)


def _made_token(db: Path | str, url: str) -> str | None:
    """The token the store's own running server made at start, when `url` is that server's."""
    from memsearch.discovery import running_token

    try:
        advertised, made = running_token(db)
    except MemsearchError:
        return None
    return made if advertised.url.rstrip("/") == url.rstrip("/") else None
