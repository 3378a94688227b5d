"""Help that names values as people read them (TEXT, INTEGER, FILE, table|json) instead of the
Python types Typer 0.29 shows (`<str>`, `<list[str]>`, `<bool>`).

Applied to the whole command tree when it is built (see MemsearchGroup), so every option, also
ones added later, is covered without a metavar on each declaration.

Rich wraps the help's type column only at spaces and folds a longer word mid-letter, so a long
choice list (`auto|vector|hybrid|lexical`) is shown in help on lines of at most CHOICE_LINE
cells, broken after a `|`: at 80 columns no choice is cut and the help text keeps its room.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, get_args

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

_NAMES: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "NUMBER", bool: "BOOLEAN", Path: "PATH"}
CHOICE_LINE = 16  # the widest line of a choice list in help (as wide as `INTEGER [x>=1]` and a little more)


def type_label(param: TyperOption | TyperArgument) -> str:
    """TEXT, INTEGER, NUMBER, FILE, DIR, PATH, or the choices as `a|b|c`."""
    descriptor = param.type_descriptor  # Typer 0.29 keeps the type here; there is no `param.type`
    if descriptor.is_choice:
        return "|".join(str(c.value if isinstance(c, Enum) else c) for c in descriptor.choices or ())
    if descriptor.is_path:
        return {"file": "FILE", "dir": "DIR"}.get(str(descriptor.path_type), "PATH")
    annotation = descriptor.annotation
    if descriptor.is_list and get_args(annotation):
        annotation = get_args(annotation)[0]
    return _NAMES.get(annotation, "VALUE")


def wrapped_choices(label: str, width: int = CHOICE_LINE) -> str:
    """`label` (`a|b|c`) on lines of at most `width` cells, each line but the last ending in `|`;
    a single choice longer than `width` keeps a line of its own, whole."""
    lines: list[str] = []
    for choice in label.split("|"):
        if lines and len(lines[-1]) + len(choice) <= width:
            lines[-1] += choice + "|"
        else:
            lines.append(choice + "|")
    return "\n".join(lines)[:-1] if lines else label


def _shown_type(label: str) -> Any:
    return lambda ctx: label


def apply(command: TyperCommand | TyperGroup, help_option_names: list[str]) -> None:
    """Give every parameter of `command` and its subcommands a readable metavar, the help option
    too (made here, with the names the command line gives it, as click would make it later)."""
    context = typer.Context(command, help_option_names=help_option_names)
    for param in [*command.params, command.get_help_option(context)]:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = "" if param.is_flag or param.count else type_label(param)
            if param.type_descriptor.is_choice:  # the help's type column; the metavar stays one line
                setattr(param, "display_type_rich", _shown_type(wrapped_choices(param.metavar)))  # noqa: B010
        elif isinstance(param, TyperArgument):
            # An argument's metavar would be its name in help; its type column has a method of its own.
            label = type_label(param)
            shown = wrapped_choices(label) if param.type_descriptor.is_choice else label
            setattr(param, "display_type_rich", _shown_type(shown))  # noqa: B010 - on the instance
    for sub in getattr(command, "commands", {}).values():
        apply(sub, help_option_names)
