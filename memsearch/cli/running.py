"""How a command reaches the library: a `Memsearch` in this process, or a running `memsearch
serve` of the same store (the library's client, memsearch.Client); and the input files a
command reads."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError

if TYPE_CHECKING:
    from memsearch.api import Memsearch
    from memsearch.client import Client


@contextmanager
def open_memsearch(db: str | None, model: str | None = None) -> Iterator[Memsearch]:
    from memsearch.api import Memsearch

    with Memsearch(db, model=model) as ms:
        ms.background_work = False  # a process a command: nothing is left to a thread (Memsearch.background_work)
        yield ms


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Remote:
    """The running server a command goes through (memsearch.Client), and whether --server named
    it: an explicit server that does not answer is an error, a discovered one is passed over."""

    client: Client
    explicit: bool


def server_for(
    db: str | None, server: str | None, model: str | None, *, no_server: bool, writes: bool
) -> Remote | None:
    """The running server to use, if any: `--server URL` (`--server ''`: none), else the trusted
    server of the same store (memsearch.Client.discover); never with --model (the server has its
    own), never for a write under MEMSEARCH_READ_ONLY (the store refuses it in-process, as without
    a server). With autoserve on and none running, one is started for the next commands
    (cli.autoserve)."""
    if model is not None or no_server:
        return None
    from memsearch.paths import read_only_requested

    if writes and read_only_requested():
        return None
    from memsearch.client import Client

    if server is not None:
        if not server:
            return None
        try:
            return Remote(Client.connect(server, db=db), explicit=True)
        except InvalidInputError as error:
            raise InvalidInputError(f"--server {error.problem}") from None
    found = Client.discover(db)
    if found is None:
        from memsearch.cli.autoserve import autoserve_idle, start_server

        idle_s = autoserve_idle()
        if idle_s is not None:
            start_server(db, idle_s)  # for the next commands: this one works in-process
        return None
    return Remote(found, explicit=False)


def through(remote: Remote, call: Callable[[Client], dict[str, Any]]) -> dict[str, Any] | None:
    """`call`'s document from the server, or None when a discovered server does not answer (then
    the caller works in-process; an explicit --server that does not answer is an error)."""
    from memsearch.errors import ServerUnavailableError

    try:
        return call(remote.client)
    except ServerUnavailableError as reason:
        if remote.explicit:
            raise
        logging.getLogger("memsearch").debug("%s; working in-process", reason)
        return None


def is_unicode(text: str) -> bool:
    """Whether `text` can be sent as UTF-8 (no lone surrogates from invalid UTF-8 input)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
