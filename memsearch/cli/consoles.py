"""The Rich consoles of the CLI: stdout for data, stderr for messages, and the `--color` choice
both follow.

`--color auto` leaves it to Rich (colour on a terminal; NO_COLOR, FORCE_COLOR, TTY_COMPATIBLE
as Rich reads them); `never` is Rich's no_color (styles such as bold stay, colours go), as
NO_COLOR; `always` is Rich's force_terminal, as FORCE_COLOR: tables with colour in a pipe too.
Rich is imported only when a console is made (machine output never loads it).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

COLOR_CHOICES = ("auto", "always", "never")
_color = {"choice": "auto"}


def set_color(choice: str) -> None:
    """Use `choice` (one of COLOR_CHOICES) for every console made from now on."""
    _color["choice"] = choice
    messages.cache_clear()


def _color_settings() -> dict[str, Any]:
    choice = _color["choice"]
    if choice == "never":
        return {"no_color": True}
    if choice == "always":
        return {"force_terminal": True}
    return {}


@functools.cache
def messages() -> Console:
    """Stderr, for messages: one message, one line; messages quote stored text (keys, file names),
    so never markup."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False, **_color_settings())


@functools.cache
def _stdout_class() -> type[Console]:
    from rich.console import Console

    class _Stdout(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # Rich would exit 1; a reader that went away is the command line's to handle

    return _Stdout


def stdout_console() -> Console:
    """Stdout for data: no markup, no emoji codes, no highlighting (stored text is shown as typed)."""
    return _stdout_class()(highlight=False, markup=False, emoji=False, **_color_settings())


def is_terminal() -> bool:
    """Whether stdout gets tables (Rich's answer). A plain pipe or file under `--color auto`, with
    none of the variables Rich heeds set, is answered without importing Rich."""
    import os
    import sys

    plain = _color["choice"] == "auto" and not ({"TTY_COMPATIBLE", "FORCE_COLOR"} & os.environ.keys())
    try:
        if plain and not sys.stdout.isatty() and not type(sys.stdin).__module__.startswith("idlelib"):
            return False
    except (AttributeError, ValueError):  # no stdout, or a closed one: Rich decides
        pass
    return stdout_console().is_terminal
