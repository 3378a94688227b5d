"""The CLI's client of a running `memsearch serve` (stdlib only, so a call through the server
imports nothing heavy): `--server URL`, else the trusted server of the same store found through
its discovery file (memsearch.server.discovery says what is trusted). A discovered server that
does not answer, or wants a token the CLI lacks, leaves the work in-process; an explicit one that
does not answer is an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from memsearch import errors
from memsearch.errors import MemsearchError

CONNECT_TIMEOUT_S = 1.0  # a server that does not accept by then is not used
REPLY_TIMEOUT_S = 600.0  # an import may embed for a long time


class ServerUnavailable(Exception):
    """No server answered; the CLI works in-process instead."""


class Remote:
    def __init__(self, url: str, token: str | None, *, explicit: bool) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port or 80
        except ValueError:
            port = None
        if parts.scheme != "http" or not parts.hostname or port is None:
            raise errors.InvalidInputError(f"--server must be an http:// URL, not {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = port
        self.token = token
        self.explicit = explicit  # named by --server: one that does not answer is an error

    def call(self, method: str, path: str, body: bytes | None = None, query: dict[str, Any] | None = None) -> Any:
        """The reply's JSON document; a library error of the server is raised as the same error here."""
        if query:
            path = f"{path}?{urlencode({k: v for k, v in query.items() if v is not None})}"
        import http.client  # here, not at import: most calls find no server and never connect

        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT_S)
        try:
            try:
                connection.connect()
            except OSError as error:
                reason = f"the server at {self.url} does not answer ({error.strerror or error})"
                raise (MemsearchError(reason) if self.explicit else ServerUnavailable(reason)) from None
            assert connection.sock is not None
            connection.sock.settimeout(REPLY_TIMEOUT_S)
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        logging.getLogger("memsearch").debug("%s %s through the server at %s", method, path, self.url)
        try:
            document = json.loads(payload)
        except ValueError:
            raise MemsearchError(f"the server answered {response.status} without JSON") from None
        if response.status == 401:
            raise MemsearchError("the server wants a bearer token: set MEMSEARCH_API_KEY")
        if response.status >= 400:
            raise _library_error(document)
        return document

    def post_json(self, path: str, document: dict[str, Any]) -> Any:
        return self.call("POST", path, json.dumps(document).encode("utf-8"))


def _library_error(document: dict[str, Any]) -> MemsearchError:
    """The server's error as the library error it was, so the CLI words it exactly as in-process."""
    kind = getattr(errors, str(document.get("type")), None)
    cls = kind if isinstance(kind, type) and issubclass(kind, MemsearchError) else MemsearchError
    message = str(document.get("error", "the server failed"))
    field = document.get("field")
    problem = message[len(field) + 1 :] if field and message.startswith(f"{field} ") else message
    error = cls.__new__(cls)
    MemsearchError.__init__(error, problem, field=field if problem is not message else None)
    return error


def is_unicode(text: str) -> bool:
    """Whether `text` can be sent as UTF-8 (no lone surrogates from invalid UTF-8 input)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def import_query(options: dict[str, Any]) -> dict[str, str]:
    """The import's URL query from its fields (operations.IMPORT, every one of which must be
    given): booleans as the server reads them, defaults and absent values left out."""
    from memsearch.operations import IMPORT

    query = {}
    for field in IMPORT.fields:
        value = options[field.name]
        if value is None or (isinstance(value, bool) and value == field.default):
            continue
        query[field.query_name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return query


def find_server(db: Path | str | None, explicit: str | None) -> Remote | None:
    """`--server URL` (`--server ''`: none), else the trusted server of the same store, if one runs."""
    from memsearch.config import configured_token
    from memsearch.paths import resolve_db_path
    from memsearch.server.discovery import discover

    if explicit is not None:
        if not explicit:
            return None
        return Remote(explicit, _made_token(resolve_db_path(db), explicit) or configured_token(), explicit=True)
    advertised = discover(resolve_db_path(db), configured_token())
    return Remote(advertised.url, advertised.token, explicit=False) if advertised is not None else None


def _made_token(db: Path | str, url: str) -> str | None:
    """The token the store's own running server made at start, when `url` is that server's."""
    from memsearch.errors import MemsearchError
    from memsearch.server.discovery import running_token

    try:
        advertised, made = running_token(db)
    except MemsearchError:
        return None
    return made if advertised.url.rstrip("/") == url.rstrip("/") else None
