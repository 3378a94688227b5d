"""How a command reaches the library: a `Memsearch` in this process, or a running `memsearch
serve` of the same store (memsearch.cli.remote); and the input files a command reads."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError

if TYPE_CHECKING:
    from memsearch.api import Memsearch


@contextmanager
def open_memsearch(db: str | None, model: str | None = None) -> Iterator[Memsearch]:
    from memsearch.api import Memsearch

    with Memsearch(db, model=model) as ms:
        yield ms


def server_for(db: str | None, server: str | None, model: str | None, *, no_server: bool, writes: bool) -> Any:
    """The running server to use, if any: never with --model (the server has its own), never
    for a write under MEMSEARCH_READ_ONLY (the store refuses it in-process, as without a server).
    With autoserve on and none running, one is started for the next commands (cli.autoserve)."""
    if model is not None or no_server:
        return None
    from memsearch.paths import read_only_requested

    if writes and read_only_requested():
        return None
    from memsearch.cli.remote import find_server

    found = find_server(db, server)
    if found is None and server is None:
        from memsearch.cli.autoserve import autoserve_idle, start_server

        idle_s = autoserve_idle()
        if idle_s is not None:
            start_server(db, idle_s)  # for the next commands: this one works in-process
    return found


def through(remote: Any, path: str, body: dict[str, Any] | bytes, query: dict[str, Any] | None = None) -> Any:
    """The server's document, or None when a discovered server does not answer (then the caller
    works in-process; an explicit --server that does not answer is an error)."""
    import logging

    from memsearch.cli.remote import ServerUnavailable

    try:
        if isinstance(body, bytes):
            return remote.call("POST", path, body, query)
        return remote.post_json(path, {name: value for name, value in body.items() if value is not None})
    except ServerUnavailable as reason:
        logging.getLogger("memsearch").debug("%s; working in-process", reason)
        return None


def read_source(source: str) -> tuple[str, str]:
    """The text of FILE, or of stdin for `-`, with the name to use in messages."""
    if source == "-":
        return sys.stdin.read(), "stdin"
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except OSError as error:
        raise InvalidInputError(f"cannot read {source}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"{source} is not UTF-8 text") from None
