"""The discovery file beside a store: how a CLI call finds the server of the same store.

`STORE.server.json` holds the server's URL and pid, readable by its owner only. The client side
is stdlib only (json, urllib), so a CLI call that uses the server starts no faster-growing imports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HEALTH_TIMEOUT_S = 0.5


def discovery_path(db: Path | str) -> Path:
    """Beside a store file; for a database URL, in the cache dir under a hash of the URL."""
    if isinstance(db, str):
        import hashlib

        from memsearch.paths import cache_dir, make_private_dirs

        folder = cache_dir() / "servers"
        make_private_dirs(folder)
        return folder / f"{hashlib.sha256(db.encode()).hexdigest()[:16]}.server.json"
    return db.with_name(db.name + ".server.json")


def write_discovery(db: Path | str, url: str, pid: int, *, authenticated: bool) -> Path:
    path = discovery_path(db)
    temporary = path.with_name(f".{path.name}.{pid}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": pid, "db": str(db), "authenticated": authenticated}, handle)
    os.replace(temporary, path)  # never a half-written file to a reader
    return path


def remove_discovery(path: Path, pid: int) -> None:
    """Remove the file if it is still ours (a newer server of the same store may have replaced it)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def read_discovery(db: Path | str) -> dict[str, Any] | None:
    """The discovery document of a live server process of this store, if there is one."""
    try:
        document = json.loads(discovery_path(db).read_text(encoding="utf-8"))
        pid = int(document["pid"])
        url = str(document["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a server that died without cleaning up
    except PermissionError:
        pass
    return {**document, "url": url, "pid": pid}
