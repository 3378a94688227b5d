"""Impact index files made off the search path (memsearch.store.lexical_cache): in a process that
lives on after a search (`memsearch serve`, the MCP server, a library user), a search that finds
its file missing, or too far behind the store (more changed rows than SEARCH_REBUILD_SHARE),
answers at once — from the file and the rows changed since, or through FTS5 — and asks for a new
file here; one thread of the store's makes it, in a read snapshot of its own connection, and
swaps it in for the searches that follow (memsearch.store.sqlite_lexical).

A one-shot process (a command of the CLI) starts no thread (the process would end before the
file is made): see ImpactLexical.impact_background.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from memsearch.store.sqlite_driver import sqlite3

log = logging.getLogger(__name__)


class ImpactBuilds:
    """The files asked for (by view) and the thread that makes them, one after the other.
    `build(view, columns, connection_seen)` makes one, in that thread; it tells the thread's
    connection through `connection_seen` (so `stop` can interrupt a statement)."""

    def __init__(self, build: Callable[[str | None, tuple[str, ...], Callable[[sqlite3.Connection], None]], None]):
        self._build = build
        self._lock = threading.Lock()
        self._wanted: dict[str | None, tuple[str, ...]] = {}
        self._busy: str | bool | None = False  # the view being made (False: none)
        self._thread: threading.Thread | None = None
        self._connection: sqlite3.Connection | None = None
        self._stopping = False
        self.idle = threading.Event()  # set while no file is being made or waiting to be
        self.idle.set()
        self.made = 0  # files made (for tests and benchmarks)

    def want(self, view: str | None, columns: tuple[str, ...]) -> bool:
        """Ask for a new file of `view`'s `columns`; False when one is being made or asked for."""
        with self._lock:
            if self._stopping or view in self._wanted or (self._busy is not False and self._busy == view):
                return False
            self._wanted[view] = columns
            if self._thread is None:
                self.idle.clear()
                self._thread = threading.Thread(target=self._run, name="memsearch-impact-build", daemon=True)
                self._thread.start()
            return True

    def _seen(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            self._connection = connection

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping or not self._wanted:
                    self._wanted.clear()
                    self._busy, self._thread = False, None
                    self.idle.set()
                    return
                view = next(iter(self._wanted))
                columns = self._wanted.pop(view)
                self._busy = view
            try:
                self._build(view, columns, self._seen)
                self.made += 1
            except Exception as error:  # a file not made: searches go on as they were, the next asks again
                log.warning("full-text impact index not made in the background (%s): searches go on without it", error)
            with self._lock:
                self._busy = False

    def wait(self, timeout: float) -> bool:
        """Wait until no file is being made or asked for; False when `timeout` (s) passed first."""
        return self.idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask for no more files and stop the one being made (its statement interrupted; what it
        wrote is a temporary file, removed, or a file no record names), waiting up to `timeout` s."""
        with self._lock:
            self._stopping = True
            self._wanted.clear()
            thread = self._thread
        if thread is None:
            return
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            with self._lock:
                connection = self._connection
            if connection is not None:  # again and again: an interrupt between two statements is lost
                with contextlib.suppress(sqlite3.Error):
                    connection.interrupt()
            thread.join(0.05)


__all__ = ["ImpactBuilds"]
