"""The user's settings: `config.toml` (in `$MEMSEARCH_HOME`, else the user config dir), each key
overridden by its environment variable; front ends put their own flags over both.

    profile = "default"   # the ranking profile of searches
    limit = 10            # how many results a search returns
    format = "table"      # the output format
    project = "web"       # the project searched, listed and added to
    db = "~/notes.db"     # the store (a path or a postgresql:// URL)
    api_key = "…"         # the bearer token of `memsearch serve`
    autoserve = true      # start a `memsearch serve` on first use, stopped when idle (or: idle seconds)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.choices import OUTPUT_FORMATS, switch
from memsearch.errors import ConfigError
from memsearch.fields import MAX_K as MAX_LIMIT  # the largest k a search takes

CONFIG_FILENAME = "config.toml"


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value.strip()


def _limit(value: object) -> int:
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):  # from the environment; ASCII only
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"must be a whole number from 1 to {MAX_LIMIT}")
    return value


def _format(value: object) -> str:
    if value not in OUTPUT_FORMATS:
        raise ValueError(f"must be one of {', '.join(OUTPUT_FORMATS)}")
    return str(value)


AUTOSERVE_IDLE_S = 900  # `autoserve = true`: the started server exits after this long without a request


def _autoserve(value: object) -> int | None:
    """The idle time of an autostarted server in seconds, or None (off): true/false (1/0, yes/no,
    on/off), or a whole number of seconds from 2 on."""
    if isinstance(value, str) and (on := switch(value)) is not None:
        return AUTOSERVE_IDLE_S if on else None
    if isinstance(value, bool):
        return AUTOSERVE_IDLE_S if value else None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):
        value = int(value)
    if not isinstance(value, int) or not 2 <= value <= 10**9:
        raise ValueError("must be true, false or a whole number of idle seconds from 2")
    return value


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Key:
    """A setting: its environment variable, how a value is checked, and its default."""

    env: str
    check: Callable[[object], Any]
    default: Any = None
    secret: bool = False


KEYS: Mapping[str, Key] = {
    "profile": Key("MEMSEARCH_PROFILE", _text, "default"),
    "limit": Key("MEMSEARCH_LIMIT", _limit, None),  # None: the profile's k
    "format": Key("MEMSEARCH_FORMAT", _format, "table"),
    "project": Key("MEMSEARCH_PROJECT", _text, None),
    "db": Key("MEMSEARCH_DB", _text, None),  # None: see memsearch.paths.resolve_db_path
    "api_key": Key("MEMSEARCH_API_KEY", _text, None, secret=True),
    "autoserve": Key("MEMSEARCH_AUTOSERVE", _autoserve, None),  # None: off
}


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Setting:
    """One effective value and where it came from: "env" (`origin` is the variable), "file"
    (`origin` is the file and line) or "default"."""

    name: str
    value: Any
    source: str
    origin: str | None = None
    secret: bool = False

    def to_dict(self) -> dict[str, Any]:
        shown = "(set)" if self.secret and self.value is not None else self.value
        return {"name": self.name, "value": shown, "source": self.source, "origin": self.origin}


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Config:
    """The effective settings and the config file they were read from."""

    path: Path  # the config file, whether it exists or not
    exists: bool
    settings: Mapping[str, Setting]

    def __getitem__(self, name: str) -> Any:
        return self.settings[name].value

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "exists": self.exists,
            "settings": [setting.to_dict() for setting in self.settings.values()],
        }


def config_path() -> Path:
    """`$MEMSEARCH_HOME/config.toml`, else the user config dir's."""
    if home := os.environ.get("MEMSEARCH_HOME"):
        return Path(home).expanduser().absolute() / CONFIG_FILENAME
    import platformdirs

    return Path(platformdirs.user_config_dir("memsearch", appauthor=False)) / CONFIG_FILENAME


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    return next((number for number, line in enumerate(text.splitlines(), 1) if pattern.match(line)), None)


def _read_file(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    import tomllib  # here: without a config file, a command never loads the parser

    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as error:  # its message ends "(at line N, column M)"
        raise ConfigError(f"{path} is not valid TOML: {error}") from None


_warned_about: set[Path] = set()


def _warn_if_readable(path: Path, document: Mapping[str, Any]) -> None:
    """A config file that holds the API key should be the owner's alone: say so once a process,
    on the library's logger (the CLI prints it as one line on stderr)."""
    if "api_key" not in document or path in _warned_about:
        return
    mode = path.stat().st_mode & 0o777
    if not mode & 0o044:  # neither group nor others may read it
        return
    import logging

    _warned_about.add(path)
    readers = " and ".join(who for who, bit in (("its group", 0o040), ("others", 0o004)) if mode & bit)
    logging.getLogger(__name__).warning(
        "%s holds api_key and %s can read it (mode %s); run: chmod 600 %s", path, readers, oct(mode), path
    )


def load_config(environ: Mapping[str, str] | None = None) -> Config:
    """The effective settings: the environment's over the file's over the defaults. A malformed
    file, an unknown key or a bad value raises ConfigError naming the file and line (or variable)."""
    env = os.environ if environ is None else environ
    path = config_path()
    exists = path.is_file()
    document, text = _read_file(path) if exists else ({}, "")
    if exists:
        _warn_if_readable(path, document)
    unknown = sorted(set(document) - set(KEYS))
    if unknown:
        line = _line_of(text, unknown[0])
        where = f"{path}, line {line}" if line else str(path)
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    settings: dict[str, Setting] = {}
    for name, key in KEYS.items():
        if (raw := env.get(key.env, "")).strip():
            value, source, origin = raw, "env", key.env
        elif name in document:
            line = _line_of(text, name)
            value, source, origin = document[name], "file", f"{path}, line {line}" if line else str(path)
        else:
            settings[name] = Setting(name, key.default, "default", secret=key.secret)
            continue
        try:
            checked = key.check(value)
        except ValueError as error:
            raise ConfigError(f"{origin}: {name} {error}, not {value!r}") from None
        settings[name] = Setting(name, checked, source, origin, key.secret)
    return Config(path, exists, settings)


def configured_token() -> str | None:
    """The HTTP API's bearer token: `MEMSEARCH_API_KEY`, else `api_key` in the config file."""
    token: str | None = load_config()["api_key"]
    return token
