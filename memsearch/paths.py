"""Where memsearch keeps its files (see the contract in the README)."""

from __future__ import annotations

import os
import stat
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
    return _user_cache_dir()


def _user_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def model_cache_dir() -> Path:
    """Where model exports are kept: `MEMSEARCH_CACHE_DIR/onnx` > the user cache dir's `onnx`, one
    for every MEMSEARCH_HOME of the user (an export is 174 MB and needs torch)."""
    if env_cache := os.environ.get("MEMSEARCH_CACHE_DIR"):
        return Path(env_cache).expanduser().absolute() / "onnx"
    return _user_cache_dir() / "onnx"


def home_model_cache_dir() -> Path | None:
    """Where memsearch 0.1.0 kept a MEMSEARCH_HOME's own model exports (`$MEMSEARCH_HOME/cache/onnx`),
    when that is not the model cache dir; None when there is no such place."""
    home = os.environ.get("MEMSEARCH_HOME")
    if not home or os.environ.get("MEMSEARCH_CACHE_DIR"):
        return None
    return Path(home).expanduser().absolute() / "cache" / "onnx"


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


def folder_problem(folder: Path) -> str | None:
    """Why another user could have put or replaced a file in `folder`; None when no one could."""
    try:
        info = folder.stat()
    except OSError as error:
        return f"cannot read folder {folder}: {error.strerror or error}"
    if info.st_uid not in (os.geteuid(), 0):
        return f"folder {folder} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        return f"other users may write folder {folder} (mode {stat.S_IMODE(info.st_mode):o}, not sticky)"
    return None


def file_problem(path: Path, info: os.stat_result) -> str | None:
    """Why another user could have written the file `path` (`info` is its stat); None when no one could."""
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"other users may write {path} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def own_folder_problem(folder: Path) -> str | None:
    """Why `folder` is not a folder of the current user's that no one else may write (a symbolic
    link is refused: memsearch makes none); None when it is. Unlike `folder_problem`, a folder of
    root's does not pass: this is where memsearch keeps files it trusts when it reads them back."""
    try:
        info = folder.lstat()
    except OSError as error:
        return f"cannot read folder {folder}: {error.strerror or error}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder" + (" (a symbolic link)" if stat.S_ISLNK(info.st_mode) else "")
    if info.st_uid != os.geteuid():
        return f"folder {folder} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"other users may write folder {folder} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def read_own_file(path: Path, limit: int = 1 << 20) -> bytes | None:
    """The first `limit` bytes of `path` when it is a regular file of the current user's that no
    one else may write, in a folder of theirs that no one else may write (opened without
    following a link or blocking on a FIFO); None otherwise: a cache memsearch reads back."""
    if own_folder_problem(path.parent) is not None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or file_problem(path, info) is not None:
            return None
        return handle.read(limit)


def tree_problem(folder: Path) -> str | None:
    """Why another user could have written `folder` or anything in it; None when no one could.
    Names starting with a dot (other processes' work in progress, never read) are passed over;
    a symbolic link is a problem (memsearch makes none)."""
    if (problem := folder_problem(folder)) is not None:
        return problem
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        try:
            info = path.lstat()
        except OSError as error:
            return f"cannot read {path}: {error.strerror or error}"
        if stat.S_ISLNK(info.st_mode):
            return f"{path} is a symbolic link"
        problem = tree_problem(path) if stat.S_ISDIR(info.st_mode) else file_problem(path, info)
        if problem is not None:
            return problem
    return None


def is_private(path: Path) -> bool:
    """Whether neither group nor others may read, write or enter `path`."""
    return not path.stat().st_mode & 0o077


def read_only_requested() -> bool:
    """`MEMSEARCH_READ_ONLY=1`: open every store for reading only (a shared or archived store;
    searches then skip recording access). Anything set but a "no" (0, false, no, off) asks for it:
    a misspelt value errs towards not writing."""
    from memsearch.choices import switch

    value = os.environ.get("MEMSEARCH_READ_ONLY", "")
    return bool(value.strip()) and switch(value) is not False


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
