"""Autoserve (`MEMSEARCH_AUTOSERVE=1`, or `autoserve = true` in config.toml): a command that
would use a running `memsearch serve` of its store, and finds none, starts one in the background
and does its own work in-process; the next commands find it through its discovery file and are
answered by the warm process. The server is an ordinary `memsearch serve --port 0 --idle-exit
SECONDS` of this user (loopback, the bearer token it makes at start or the one configured, its
discovery file readable by its owner only: memsearch.discovery's trust rules), detached
from the terminal, that exits once no request has come for the idle time. Two commands that
both start one leave one running: a store has one server (the later one refuses to start)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

# The started servers of this process (a test runs many commands in one): kept, so that Popen's
# finaliser does not warn about a child that is meant to outlive the command.
_started: list[subprocess.Popen[bytes]] = []


def autoserve_idle() -> int | None:
    """The idle seconds of an autostarted server, or None when autoserve is off."""
    from memsearch.config import load_config

    seconds: int | None = load_config()["autoserve"]
    return seconds


def start_server(db: str | None, idle_s: int) -> int | None:
    """Start `memsearch serve` of the store `db` names, detached; its pid, or None when there is no
    store file to serve (a search of a missing store says so in-process; nothing is created)."""
    from memsearch.paths import read_only_requested, resolve_db_path

    location = resolve_db_path(db)
    if isinstance(location, Path) and not location.is_file():
        return None
    if read_only_requested():  # a server would take writes the user asked this shell to refuse
        return None
    command = [sys.executable, "-m", "memsearch", "serve", "--db", str(location), "--port", "0"]
    command += ["--idle-exit", str(idle_s)]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not stopped by the terminal's Ctrl-C or hang-up
        close_fds=True,
    )  # in this command's working folder, with its environment: a relative MEMSEARCH_HOME means the same
    _started.append(process)
    logging.getLogger("memsearch").debug(
        "started `memsearch serve` of %s (pid %d), which exits after %d s without a request",
        location,
        process.pid,
        idle_s,
    )
    return process.pid
