"""The checks of a plain value every layer makes (a text a store and an encoder can take) and how
an error message shows a value, apart from the memory model: a command that only sends a
request to a server checks it without building the model (memsearch.models re-exports them)."""

from __future__ import annotations

from memsearch.errors import InvalidInputError, short_repr


def check_text(name: str, value: object) -> str:
    """`value` if it is a string SQLite and the encoder can take: one without lone surrogates
    (what Python makes of invalid UTF-8 in arguments and stdin, or of a `\\ud800` JSON escape)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, not {shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"is not valid Unicode: a lone surrogate {value[error.start]!r} at character {error.start + 1} "
            "(invalid UTF-8 input or an unpaired \\ud800-style escape)",
            field=name,
        ) from None
    return value


def shown(value: object) -> str:
    """A value for a one-line error message: its type, and the value itself when short."""
    text = short_repr(value)
    return f"{type(value).__name__} {text}" if text is not None else f"a {type(value).__name__}"
