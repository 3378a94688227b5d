"""The Python API's arguments, checked at `memsearch.api.Memsearch`'s public methods before anything
is read or written: a value of the wrong type or out of range is an `InvalidInputError` naming the
argument (its `field`), never a TypeError, OverflowError or UnicodeEncodeError from deeper down.

A flag is checked by a boolean field (memsearch.fields: one wording for every front end and the
Python API); these add what a Python caller may pass (a bool where an id goes, a lone string where
a list of refs goes, a naive datetime, an offset beyond SQLite's 64-bit integers).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memsearch.checks import check_text, shown
from memsearch.choices import KINDS
from memsearch.errors import InvalidInputError
from memsearch.fields import Field

if TYPE_CHECKING:
    from memsearch.embedding import Progress
    from memsearch.profiles import Profile
    from memsearch.scope import Scope

MAX_ROWS = 2**62  # a limit or offset past this cannot be a row count (SQLite's integers are 64-bit)


def check_ref(ref: object, field: str = "ref") -> int | str:
    """An id (an int, 0 or more) or a key (a non-empty str); the type decides, as `Memsearch.resolve`
    made it from typed text (ASCII digits are an id)."""
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        raise InvalidInputError(f"must be a memory id (an int) or key (a str), not {shown(ref)}", field=field)
    if isinstance(ref, int):
        if ref < 0:
            raise InvalidInputError(f"must be a memory id (0 or more) or a key, not {ref}", field=field)
        return ref
    check_text(field, ref)
    if not ref.strip():
        raise InvalidInputError("must be a memory id or a non-empty key", field=field)
    return ref


def check_refs(refs: object, field: str = "refs") -> list[int | str]:
    """A list of refs; a lone str or int is refused (a str would be taken letter by letter)."""
    if isinstance(refs, str | bytes | bytearray | Mapping) or not isinstance(refs, Iterable):
        raise InvalidInputError(f"must be a list of memory ids or keys, not {shown(refs)}", field=field)
    return [check_ref(ref, field) for ref in refs]


def check_whole(
    field: str, value: object, low: int, high: int | None = MAX_ROWS, *, optional: bool = False
) -> int | None:
    """A whole number from `low` to `high` (no upper bound if None; None too, if `optional`)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"must be a whole number, not {shown(value)}", field=field)
    if value < low or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"from {low} to {high}"
        raise InvalidInputError(f"must be {bounds}, not {shown(value)}", field=field)
    return value


def check_flag(field: str, value: object) -> bool:
    """True or false, checked as a boolean field of the operations (memsearch.fields) is."""
    if value is None:
        raise InvalidInputError("must be true or false, not None", field=field)
    return bool(Field(field, "boolean", "").check(value))


def check_name(field: str, value: object, *, optional: bool = True) -> str | None:
    """A non-empty string of valid Unicode (or None, if `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"must be a string, not {shown(value)}", field=field)
    if not check_text(field, value).strip():
        raise InvalidInputError("must be a non-empty string", field=field)
    return value


def check_progress(progress: object) -> Progress | None:
    if progress is not None and not callable(progress):
        raise InvalidInputError(f"must be a function of (done, total), not {shown(progress)}", field="progress")
    return progress


def check_on_progress(on_progress: object) -> Callable[[Any], None] | None:
    if on_progress is not None and not callable(on_progress):
        raise InvalidInputError(
            f"must be a function of one IndexProgress, not {shown(on_progress)}", field="on_progress"
        )
    return on_progress


def check_location(field: str, value: object) -> str | os.PathLike[str]:
    """A store's path or URL: a str or path-like of valid Unicode, without NUL characters."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidInputError(f"must be a store path or URL, not {shown(value)}", field=field)
    text = os.fspath(value)
    if not isinstance(text, str) or "\x00" in check_text(field, text) or not text.strip():
        raise InvalidInputError(f"must be a store path or URL, not {shown(value)}", field=field)
    return value


def check_profile(profile: object, field: str = "profile") -> Profile | str | None:
    from memsearch.profiles import Profile

    if profile is None or isinstance(profile, Profile):
        return profile
    return check_name(field, profile)


def check_scope(scope: object, field: str = "scope") -> Scope:
    """A `Scope` whose fields have the types the stores read: strings of valid Unicode, tuples of
    them (a lone string would be read letter by letter), times with their UTC offset."""
    from memsearch.scope import Scope

    if not isinstance(scope, Scope):
        raise InvalidInputError(f"must be a Scope, not {shown(scope)}", field=field)
    for name in ("project", "namespace", "conversation"):
        check_name(name, getattr(scope, name))
    for name in ("tags", "kinds", "roles", "sessions"):
        values = getattr(scope, name)
        if not isinstance(values, tuple | list) or not all(isinstance(value, str) for value in values):
            raise InvalidInputError(f"must be a tuple of strings, not {shown(values)}", field=name)
        for value in values:
            check_text(name, value)
    unknown = [kind for kind in scope.kinds if kind not in KINDS]
    if unknown:
        raise InvalidInputError(f"must be among {', '.join(KINDS)}, not {unknown[0]!r}", field="kinds")
    for name in ("since", "until"):
        moment = getattr(scope, name)
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise InvalidInputError(f"must be a datetime with its UTC offset, not {shown(moment)}", field=name)
    return scope


def check_threshold(field: str, value: object) -> float:
    """A cosine threshold from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"threshold must be a number from 0 to 1, not {shown(value)}", field=field)
    if not 0 <= value <= 1:
        raise InvalidInputError(f"threshold must be from 0 to 1, not {value:g}", field=field)
    return float(value)


def check_paths(paths: object, field: str = "paths") -> list[str]:
    """Folder or file paths: one (a str or path-like) or a list of them, each valid Unicode
    without NUL characters, and not empty (which would mean the current folder)."""
    items = [paths] if isinstance(paths, str | os.PathLike) else check_iterable(field, paths)
    checked = []
    for item in items:
        path = os.fspath(item) if isinstance(item, str | os.PathLike) else None
        if not isinstance(path, str):
            raise InvalidInputError(f"must be folder or file paths (str or path-like), not {shown(item)}", field=field)
        if not check_text(field, path).strip() or "\x00" in path:
            raise InvalidInputError(f"must be folder or file paths, not {shown(path)}", field=field)
        checked.append(path)
    return checked


def check_patterns(field: str, patterns: object) -> tuple[str, ...]:
    """Gitignore patterns: one str or a list of them, each valid Unicode."""
    items = [patterns] if isinstance(patterns, str) else check_iterable(field, patterns)
    for pattern in items:
        if not isinstance(pattern, str):
            raise InvalidInputError(f"must be gitignore patterns (strings), not {shown(pattern)}", field=field)
        check_text(field, pattern)
    return tuple(items)


def check_iterable(field: str, values: object) -> list[Any]:
    """The items of a list (or any iterable but a str, bytes or mapping)."""
    if isinstance(values, str | bytes | bytearray | Mapping) or not isinstance(values, Iterable):
        raise InvalidInputError(f"must be a list, not {shown(values)}", field=field)
    return list(values)
