"""Where memsearch keeps its files (see the contract in the README)."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "memsearch"
DB_FILENAME = "memsearch.db"


def _location(value: str | os.PathLike[str]) -> Path | str:
    """A `postgresql://` URL stays a URL; anything else is a SQLite path."""
    if isinstance(value, str) and value.startswith(("postgresql://", "postgres://")):
        return value
    return Path(value).expanduser().absolute()


def resolve_db_path(explicit: str | os.PathLike[str] | None = None) -> Path | str:
    """`--db PATH|URL` > `MEMSEARCH_DB` > `db` in config.toml > `$MEMSEARCH_HOME/memsearch.db` > the user data dir. A
    `postgresql://` URL selects the PostgreSQL store and is returned as it is."""
    if explicit:
        return _location(explicit)
    from memsearch.config import load_config

    if configured := load_config()["db"]:  # MEMSEARCH_DB, else db in config.toml
        return _location(configured)
    if home := os.environ.get("MEMSEARCH_HOME"):
        return Path(home).expanduser().absolute() / DB_FILENAME
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / DB_FILENAME


def cache_dir() -> Path:
    """`MEMSEARCH_CACHE_DIR` > `$MEMSEARCH_HOME/cache` > the user cache dir."""
    if env_cache := os.environ.get("MEMSEARCH_CACHE_DIR"):
        return Path(env_cache).expanduser().absolute()
    if home := os.environ.get("MEMSEARCH_HOME"):
        return Path(home).expanduser().absolute() / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and any missing parents readable by the owner only (mkdir's mode applies
    to the last folder alone, and only through the umask)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # another process made it first
            pass
        else:
            path.chmod(0o700)


def write_private(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to the new file `path`, readable by the owner only whatever the umask."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_private_tree(folder: Path) -> None:
    """Make `folder` and everything in it the owner's alone (folders 0700, files 0600): for files
    that libraries (torch, onnxruntime) create with the umask's modes, before they are renamed
    into a cache."""
    for path in (folder, *folder.rglob("*")):
        if not path.is_symlink():
            path.chmod(0o700 if path.is_dir() else 0o600)


def is_private(path: Path) -> bool:
    """Whether neither group nor others may read, write or enter `path`."""
    return not path.stat().st_mode & 0o077


def read_only_requested() -> bool:
    """`MEMSEARCH_READ_ONLY=1`: open every store for reading only (a shared or archived store;
    searches then skip recording access)."""
    return os.environ.get("MEMSEARCH_READ_ONLY", "").strip().lower() not in ("", "0", "false", "no")


def shown_location(location: Path | str) -> str:
    """A store's location for people and logs: a path as it is, a URL without its password."""
    if isinstance(location, Path):
        return str(location)
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(location)
    if not parts.password:
        return location
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
