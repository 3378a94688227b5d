"""Two shortcuts that keep a command's start-up short, with output identical to Typer's own.

- `only_command`: Typer builds every command (signature, types, help) on every call; a call that
  names its command needs that one built.
- `plain_values`: Typer (0.29) checks every parameter's value through a pydantic TypeAdapter, and
  importing pydantic and building the adapters costs more than the rest of a command line. Plain
  values (text, a listed choice, a whole number in range, a default) are taken here as the adapters
  would take them; anything else, and every error, still goes through Typer's adapters. This is
  the one place the CLI relies on Typer's internals: a parameter's `_runtime_param` (its lazily
  built coercion) and RuntimeParam's `_coerce_value` hook, imported from the private modules that
  define them (typer._coercion, typer._param_types); tests/test_startup.py pins the values to what
  Typer's adapters make. Everything else uses Typer's public names (typer, typer.core).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, get_args, get_origin

import typer
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import normalize_choice_value
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.main import get_command_name

# Root options before the command's name: flags, and options whose value follows (`--db x.db`)
# unless joined to them (`--db=x.db`).
_ROOT_FLAGS = ("--debug",)
_ROOT_VALUED = ("--db", "--color")
_WHOLE_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)")


def only_command(app: typer.Typer, args: Sequence[str]) -> typer.Typer:
    """`app` holding just the command that `args` name (after the root's flags), or `app` itself
    when they name none (root help, --version, a typo: those want every command)."""
    name = command_name(args)
    named = [info for info in app.registered_commands if _name(info) == name]
    if not named:
        return app
    lean = copy.copy(app)
    lean.registered_commands = named
    return lean


def command_name(args: Sequence[str]) -> str | None:
    """The first argument that is neither a root option nor a root option's value."""
    words = iter(args)
    for arg in words:
        if arg in _ROOT_VALUED:
            next(words, None)
        elif arg not in _ROOT_FLAGS and arg.partition("=")[0] not in _ROOT_VALUED:
            return arg
    return None


def _name(info: Any) -> str:
    return str(info.name or get_command_name(info.callback.__name__))


_UNSURE = object()


def _plain(annotation: Any, descriptor: TypeDescriptor, value: Any, ctx: typer.Context) -> Any:
    """The value as Typer's adapter would give it, or _UNSURE."""
    info = descriptor.parameter_info
    if info.parser is not None:
        return _UNSURE
    if annotation is str:
        return value if isinstance(value, str) else _UNSURE
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return _choice(value, list(annotation), info.case_sensitive, ctx)
    if annotation is int and not info.clamp:
        if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
            value = int(value)
        if type(value) is not int:
            return _UNSURE
        if (info.min is not None and value < info.min) or (info.max is not None and value > info.max):
            return _UNSURE
        return value
    if annotation is float and type(value) is float and info.min is None and info.max is None:
        return value
    return _UNSURE


def _choice(value: Any, choices: list[Enum], case_sensitive: bool, ctx: typer.Context) -> Any:
    """The choice `value` names, compared as Typer compares them (normalised), or _UNSURE."""
    if any(value is choice for choice in choices):
        return value
    wanted = normalize_choice_value(value, case_sensitive, ctx)
    return next((c for c in choices if normalize_choice_value(c, case_sensitive, ctx) == wanted), _UNSURE)


@dataclass(frozen=True)
class _PlainValues(RuntimeParam):
    """Plain values taken directly; the rest through the adapter Typer would have built."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:  # ctx: a typer.Context
        annotation: object = self.annotation  # typer types it Any, which picks get_origin's ParamSpec overload
        if get_origin(annotation) is list and isinstance(value, list | tuple):
            (item_type,) = get_args(annotation)
            items = [_plain(item_type, self.descriptor, item, ctx) for item in value]
            if not any(item is _UNSURE for item in items):
                return items
        elif (plain := _plain(annotation, self.descriptor, value, ctx)) is not _UNSURE:
            return plain
        full = param._runtime_param = build_runtime_param(self.descriptor)
        return full._coerce_value(value, param=param, ctx=ctx)


def plain_values(command: TyperCommand | TyperGroup, help_option_names: list[str]) -> None:
    """Let every parameter of `command` and of its subcommands (their help option too, made here as
    click would make it later) take plain values without pydantic."""
    context = typer.Context(command, help_option_names=help_option_names)
    for param in [*command.params, command.get_help_option(context)]:
        if isinstance(param, TyperOption | TyperArgument) and param._runtime_param is None:
            descriptor = param.type_descriptor
            param._runtime_param = _PlainValues(descriptor.parameter_info, descriptor.annotation, descriptor)
    for sub in getattr(command, "commands", {}).values():
        plain_values(sub, help_option_names)
