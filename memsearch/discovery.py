"""Discovery files: how a CLI call finds the server of the same store, and what it trusts.

A server advertises itself in `STORE.server.json` beside the store (`memsearch mcp --http` in
`STORE.mcp.json`), or, when that folder cannot be written (or other users may write it), in the
user's runtime dir under a hash of the store's path; a store named by URL is advertised in the
cache dir under a hash of the URL. The document holds the server's URL and pid, and the bearer
token the server made at start (when it was not given one), readable by its owner only: that is
how the owner's CLI, and `memsearch token`, get the token, and no other user can.

A client trusts a discovery file only when all of these hold (else it works in-process):
the file is a regular file of the current user that no one else may write, in a folder that other
users may not write (or sticky); it names an http:// URL on a loopback address and a live process
of the current user; and that URL answers `/health` for this store and that pid. The same check
keeps a second server off a store that is served already.

Stdlib and memsearch.paths only (memsearch.http_exchange, and h11 with it, on demand): a CLI call through
the server imports nothing heavy.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memsearch.errors import MemsearchError
from memsearch.paths import file_problem, folder_problem

HEALTH_TIMEOUT_S = 0.5
SUFFIX = ".server.json"
SUFFIXES = {"serve": SUFFIX, "mcp": ".mcp.json"}  # each server kind's discovery file
_log = logging.getLogger("memsearch")
RUNTIME_NAME = "memsearch"  # the runtime dir's own folder


class Untrusted(Exception):
    """A discovery file or the server it names is not to be used; the message says why."""


class NotAnswering(Untrusted):
    """The server named does not accept connections (it is gone, or stuck)."""


class WantsToken(Untrusted):
    """The server wants a bearer token this process does not have (or has another one)."""


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Advertised:
    """A discovery file's document, from a file that passed the ownership checks."""

    url: str
    pid: int
    authenticated: bool
    path: Path
    token: str | None = None  # the token the server made at start, if it made one


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def same_store(a: Path | str, b: Path | str) -> bool:
    """Paths are the same store when they resolve to the same file; URLs when they are equal."""
    if isinstance(a, Path) and isinstance(b, Path):
        return a.resolve() == b.resolve()
    return str(a) == str(b)


# -- where --------------------------------------------------------------------------------------


def _hashed(location: Path | str, suffix: str = SUFFIX) -> str:
    import hashlib  # (OpenSSL's start) by a lookup that gets this far: most find their file beside the store

    key = str(location.resolve()) if isinstance(location, Path) else location
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16] + suffix


def runtime_dir() -> Path | None:
    """The user's runtime dir (XDG_RUNTIME_DIR; platformdirs' fallback when it is unset or not
    the user's); None when there is none to trust (the fallback, /tmp/runtime-UID, is another
    user's: recent platformdirs refuse it, and `_place_problem` checks it for older ones)."""
    import warnings

    import platformdirs

    with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set": the fallback is checked like any folder
        warnings.simplefilter("ignore")
        try:
            return Path(platformdirs.user_runtime_dir(RUNTIME_NAME, appauthor=False))
        except PermissionError as error:
            _log.debug("no runtime folder: %s", error)
            return None


def discovery_path(db: Path | str, kind: str = "serve") -> Path:
    """Beside a store file; for a database URL, in the cache dir under a hash of the URL."""
    if isinstance(db, str):
        from memsearch.paths import cache_dir

        return cache_dir() / "servers" / _hashed(db, SUFFIXES[kind])
    return db.with_name(db.name + SUFFIXES[kind])


def discovery_paths(db: Path | str, kind: str = "serve") -> tuple[Path, ...]:
    """Where a client looks, in order: beside the store (or the URL's file), then the runtime dir."""
    runtime = runtime_dir()
    beside = discovery_path(db, kind)
    return (beside,) if runtime is None else (beside, runtime / _hashed(db, SUFFIXES[kind]))


def _place_problem(folder: Path) -> str | None:
    """Why a discovery file in `folder` is not to be trusted (or written); None when it may be.
    The runtime dir's parent too must be safe: without XDG_RUNTIME_DIR it is /tmp/runtime-UID,
    a name any user can take first."""
    problem = folder_problem(folder)
    # The runtime dir is named after the app (platformdirs appends it): a folder of another name
    # is not it, and a client that found its file beside the store never imports platformdirs.
    if problem is None and folder.name == RUNTIME_NAME and folder == runtime_dir():
        problem = folder_problem(folder.parent)
    return problem


# -- what a client trusts -----------------------------------------------------------------------


def read_advertised(path: Path) -> Advertised:
    """The document of a discovery file the current user owns and no one else may change."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Untrusted(f"no discovery file at {path}") from None
    except OSError as error:
        raise Untrusted(f"cannot open {path}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"{path} is not a regular file")
        if (problem := file_problem(path, info)) is not None:
            raise Untrusted(problem)
        raw = handle.read(65536)
    if (problem := _place_problem(path.parent)) is not None:
        raise Untrusted(problem)
    try:
        document = json.loads(raw)
        url, pid, authenticated = document["url"], document["pid"], document.get("authenticated", False)
        token = document.get("token")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Untrusted(f"{path} is not a discovery document") from None
    if not isinstance(url, str) or isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise Untrusted(f"{path} is not a discovery document")
    if token is not None and (not isinstance(token, str) or not token.isascii() or not token.isprintable()):
        raise Untrusted(f"{path} is not a discovery document")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or not is_loopback(parts.hostname) or port is None:
        raise Untrusted(f"{path} names {url!r}, not an http:// URL on a loopback address")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise Untrusted(f"the server of {path} (pid {pid}) is gone") from None
    except PermissionError:
        raise Untrusted(f"{path} names pid {pid}, another user's process") from None
    except OSError as error:
        raise Untrusted(f"cannot check pid {pid} of {path}: {error.strerror or error}") from None
    return Advertised(url, pid, authenticated is True, path, token)


def health(url: str, token: str | None, timeout: float = HEALTH_TIMEOUT_S) -> dict[str, Any]:
    """The server's `/health` document, asked with the token when there is one."""
    from memsearch.http_exchange import NotConnected, ReplyError, ask

    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = ask(
            host, port, "GET", "/health", connect_timeout=timeout, timeout=timeout, headers=headers, body_limit=65536
        )
    except NotConnected as error:
        raise NotAnswering(f"the server at {url} does not answer ({error.strerror or error})") from None
    except (OSError, ReplyError) as error:
        raise NotAnswering(f"the server at {url} does not answer /health ({error})") from None
    if response.status == 401:
        raise WantsToken(f"the server at {url} wants a bearer token that MEMSEARCH_API_KEY does not give")
    try:
        document = json.loads(response.body)
    except ValueError:
        document = None
    if response.status != 200 or not isinstance(document, dict):
        raise Untrusted(f"the server at {url} answered /health with {response.status}, not a health document")
    return document


def verify(advertised: Advertised, db: Path | str, token: str | None) -> None:
    """Raise unless the advertised server answers as the server of `db` with the advertised pid."""
    if advertised.authenticated and not token:
        raise WantsToken(f"the server at {advertised.url} wants a bearer token (set MEMSEARCH_API_KEY)")
    document = health(advertised.url, token)
    served, pid = document.get("db"), document.get("pid")
    if advertised.authenticated and served is None:  # a bare liveness answer: the token was not taken
        raise WantsToken(f"the server at {advertised.url} wants a bearer token that MEMSEARCH_API_KEY does not give")
    if not isinstance(served, str) or not isinstance(pid, int):
        raise Untrusted(f"the server at {advertised.url} does not say which store it serves")
    if pid != advertised.pid:
        raise Untrusted(f"the server at {advertised.url} is pid {pid}, not pid {advertised.pid} of {advertised.path}")
    if not same_store(Path(served) if isinstance(db, Path) else served, db):
        raise Untrusted(f"the server at {advertised.url} serves {served}, another store")


def _each_place(db: Path | str, kind: str = "serve") -> Iterator[Path]:
    """`discovery_paths`, the runtime dir's found only once the first is passed over (a server
    advertised beside its store is found without platformdirs or a hash)."""
    yield discovery_path(db, kind)
    if (runtime := runtime_dir()) is not None:
        yield runtime / _hashed(db, SUFFIXES[kind])


def discover(db: Path | str, token: str | None) -> Advertised | None:
    """The trusted server of `db`, if one runs, with the token to send it (the one it made at
    start, else `token`). Each file passed over is said why under --debug; a server that wants a
    token this process lacks is said on stderr (the call works in-process)."""
    for path in _each_place(db):
        try:
            advertised = read_advertised(path)
            if advertised.token is None:
                advertised = replace(advertised, token=token)
            verify(advertised, db, advertised.token)
        except WantsToken as reason:
            _log.info("%s; working in-process", reason)
            return None
        except Untrusted as reason:
            if os.path.lexists(path):  # (Path.exists raises on a name too long)
                _log.debug("not using a server: %s; working in-process", reason)
            continue
        return advertised
    return None


# -- the server's side --------------------------------------------------------------------------


def _write_private(path: Path, document: dict[str, Any]) -> None:
    """Written whole (a reader never sees half a file), readable by the owner only."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class Advertisement:
    """A server's discovery file: `claim` before binding (refuses a store served already),
    `publish` once serving, `withdraw` on the way out (only a file that is still ours)."""

    def __init__(self, db: Path | str, token: str | None, kind: str = "serve") -> None:
        self.db = db
        self.token = token
        self.kind = kind
        self.path: Path | None = None

    @classmethod
    def claim(cls, db: str | os.PathLike[str] | None, token: str | None, kind: str = "serve") -> Advertisement:
        from memsearch.paths import resolve_db_path

        advertisement = cls(resolve_db_path(db), token, kind)
        advertisement.refuse_if_served()
        return advertisement

    def refuse_if_served(self) -> None:
        """One server per store: a second one would replace the first's file and remove it on exit."""
        for path in discovery_paths(self.db, self.kind):
            try:
                advertised = read_advertised(path)
                if advertised.pid == os.getpid():
                    continue
                verify(advertised, self.db, advertised.token or self.token)
            except WantsToken:  # a live server of ours, named by the file of this store, with another token
                pass
            except Untrusted:
                continue
            raise MemsearchError(
                f"{self.db} is served already at {advertised.url} (pid {advertised.pid}); "
                "use that server, or stop it first"
            )

    def publish(self, url: str, *, authenticated: bool, made_token: str | None = None) -> Path:
        """Write the discovery file where a client will trust it: beside the store when its folder
        is ours to write, else in the runtime dir. `made_token`, the token the server made at start,
        is kept in it (a token the user gave is not written anywhere)."""
        self.refuse_if_served()  # a server that started while this one warmed up
        document: dict[str, Any] = {
            "url": advertised_url(url), "pid": os.getpid(), "db": str(self.db), "authenticated": authenticated,
        }  # fmt: skip
        if made_token is not None:
            document["token"] = made_token
        from memsearch.paths import make_private_dirs

        problems = []
        for path in discovery_paths(self.db, self.kind):
            try:
                make_private_dirs(path.parent)  # the runtime dir, or the cache dir of a URL's store
            except OSError as error:
                problems.append(f"cannot make {path.parent}: {error.strerror or error}")
                continue
            if (problem := _place_problem(path.parent)) is not None:
                problems.append(problem)
                continue
            try:
                _write_private(path, document)
            except OSError as error:
                problems.append(f"cannot write {path}: {error.strerror or error}")
                continue
            self.path = path
            _log.debug("advertised in %s", path)
            return path
        if runtime_dir() is None:
            problems.append("no runtime folder of yours (set XDG_RUNTIME_DIR to one)")
        raise MemsearchError(f"cannot write the discovery file: {'; '.join(problems)}")

    def withdraw(self) -> None:
        """Remove the file if it is still ours (nothing else should, but a file is never taken from another)."""
        if self.path is None:
            return
        try:
            if json.loads(self.path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                self.path.unlink()
        except (OSError, ValueError):
            pass
        self.path = None


def running_token(db: Path | str, kind: str = "serve") -> tuple[Advertised, str | None]:
    """The running server of `db` (of `kind`) as its trusted discovery file names it, and the token
    it made at start (None when it was given one, or takes none). MemsearchError when none runs."""
    reasons = []
    for path in discovery_paths(db, kind):
        try:
            advertised = read_advertised(path)
        except Untrusted as reason:
            if os.path.lexists(path):
                reasons.append(str(reason))
            continue
        return advertised, advertised.token
    command = "memsearch serve" if kind == "serve" else "memsearch mcp --http"
    raise MemsearchError(f"no `{command}` of {db} runs" + (f" ({'; '.join(reasons)})" if reasons else ""))


def advertised_url(url: str) -> str:
    """The URL a local client should use: a wildcard bind (0.0.0.0, ::) is reached on loopback."""
    parts = urlsplit(url)
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(parts.hostname or "")
    if wildcard is None:
        return url
    return parts._replace(netloc=f"{wildcard}:{parts.port}").geturl()
