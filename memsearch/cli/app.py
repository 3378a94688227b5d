"""The `memsearch` command: the Typer app assembled from the command modules, its root options
and the console entry point `main`.

The commands live by use in memories, searching, serving, admin and evaluation; the error
policy in failures, the shared options in options, the consoles (and --color) in consoles.
Library modules are imported inside the commands, so `--help` and the read commands stay fast
and never import torch. The entry point imports only the module of the command it runs
(`command_app`); `app`, every command, is assembled on first use. The annotations are objects,
not strings (no `from __future__ import annotations`): Typer reads each command's signature, and
evaluating string annotations took it longer than building the command.
"""

import copy
import functools
import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from memsearch import __version__
from memsearch.cli import metavars
from memsearch.cli.consoles import set_color
from memsearch.cli.failures import debugging, ends_cleanly, run_reporting_failures
from memsearch.cli.options import DB_HELP, Color, Format, Shell
from memsearch.cli.startup import command_name, only_command, plain_values
from memsearch.errors import ExitCode

if TYPE_CHECKING:
    import logging

    from memsearch.config import Config

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class MemsearchGroup(TyperGroup):
    """Turns every failure into one line on stderr and a documented exit code (see failures)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        metavars.apply(self, CONTEXT_SETTINGS["help_option_names"])
        plain_values(self, CONTEXT_SETTINGS["help_option_names"])

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with ends_cleanly():  # `memsearch --help | head -1`
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with ends_cleanly():
            return super().invoke(ctx)

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        extra["standalone_mode"] = False
        parent_main = super().main
        run_reporting_failures(
            lambda: parent_main(args=args, prog_name=prog_name or "memsearch", **extra),
            list(sys.argv[1:] if args is None else args),
        )


_root_app = typer.Typer(
    cls=MemsearchGroup,
    name="memsearch",
    help="Local-first memory search for AI agents and terminal users.",
    invoke_without_command=True,
    add_completion=False,
    context_settings=CONTEXT_SETTINGS,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memsearch {__version__}")
        raise typer.Exit()


@_root_app.callback()
def _root(
    context: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    db: Annotated[
        str | None, typer.Option("--db", help=f"{DB_HELP} Here, before the command, it is every command's --db.")
    ] = None,
    color: Annotated[
        Color,
        typer.Option(
            "--color", help="Colour in tables: auto (on a terminal), always (in a pipe too), never (as NO_COLOR)."
        ),
    ] = "auto",
) -> None:
    debugging["on"] = debug
    set_color(str(color))
    _log_to_stderr(debug)
    if context.invoked_subcommand is None:
        typer.echo(context.get_help())
        return
    defaults: dict[str, Any] = {}
    if context.invoked_subcommand != "completions":
        from memsearch.config import load_config

        defaults = _configured_defaults(context.command, load_config())
    if db is not None:
        for name in _commands_with_the_store_option(context.command):
            defaults.setdefault(name, {})["db"] = db
    context.default_map = defaults or None


# The options whose defaults come from the config (memsearch.config): per command, the option's
# parameter and the setting. `--format` of every command that prints library output is added.
CONFIGURED_OPTIONS = {
    "search": {"profile": "profile", "k": "limit", "project": "project"},
    "list": {"project": "project"},
    "tags": {"project": "project"},
    "add": {"project": "project"},
}
# `eval --db` names a PostgreSQL store to measure on (and empty): never the store of the root's --db.
_OWN_DB_OPTION = ("eval",)


def _configured_defaults(group: Any, config: "Config") -> dict[str, Any]:
    """Click's default map (command → parameter → default) from the effective settings, so that
    a flag beats the environment, which beats the config file."""
    defaults: dict[str, Any] = {}
    for name, command in group.commands.items():
        values = _configured_defaults(command, config) if isinstance(command, TyperGroup) else {}
        for param in command.params:
            if param.name == "fmt" and param.type_descriptor.annotation is Format:
                values["fmt"] = config["format"]
        for param_name, setting in CONFIGURED_OPTIONS.get(name, {}).items():
            if config[setting] is not None:
                values[param_name] = config[setting]
        if values:
            defaults[name] = values
    return defaults


def _commands_with_the_store_option(group: Any) -> list[str]:
    """The commands whose --db the root's --db stands for (as a default: a --db after the command wins)."""
    return [
        name
        for name, command in group.commands.items()
        if name not in _OWN_DB_OPTION and any(param.name == "db" for param in command.params)
    ]


@functools.cache
def _stderr_handler() -> "logging.Handler":
    """The one handler of the process that writes to whatever sys.stderr is at the time (test
    runners swap it); logging is imported here, by the commands, not by `--help`."""
    import logging

    class StderrHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sys.stderr.write(f"memsearch: {record.getMessage()}\n")

    return StderrHandler()


def _log_to_stderr(debug: bool) -> None:
    """Library notices (such as the one-time model export) as plain lines on stderr."""
    import logging

    logger = logging.getLogger("memsearch")
    if _stderr_handler() not in logger.handlers:
        logger.addHandler(_stderr_handler())
    logger.setLevel(logging.DEBUG if debug else logging.INFO)


def completions(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the shell-completion script (static: tab completion never starts Python)."""
    from memsearch.cli.shells import generate

    sys.stdout.write(generate(str(shell), _full_app()))


def _operation_commands() -> tuple[str, ...]:
    from memsearch.cli.generated import GENERATED

    return GENERATED


# The commands, in the order of `memsearch --help` (and of the completion scripts): the command
# module and function (the name is the function's, or the one given), and the `profiles` group.
_COMMANDS: tuple[tuple[str, str, str | None], ...] = (
    ("memories", "add", None),
    ("memories", "import_", "import"),
    ("searching", "search", None),
    ("memories", "get", None),
    ("memories", "list_", "list"),
    ("memories", "tags", None),
    ("memories", "delete", None),
    ("admin", "stats", None),
    ("admin", "path", None),
    ("admin", "reindex", None),
    ("admin", "index", None),
    ("memories", "set_", "set"),
    ("memories", "edit", None),
    ("memories", "pin", None),
    ("memories", "unpin", None),
    ("admin", "consolidate", None),
    ("searching", "profiles_app", "profiles"),  # a group
    ("memories", "timeline", None),
    ("serving", "mcp", None),
    ("serving", "serve", None),
    ("serving", "token", None),
    ("evaluation", "eval_", "eval"),
    ("app", "completions", None),
    ("admin", "copy", None),
    ("memories", "export", None),
    ("admin", "config", None),
    ("admin", "doctor", None),
    # The operations without a command of their own: a command made from their fields (cli.generated).
    *(("generated", name, None) for name in _operation_commands()),
)


def _command_of(entry: tuple[str, str, str | None]) -> str:
    return entry[2] or entry[1]


def _register(target: typer.Typer, entries: tuple[tuple[str, str, str | None], ...]) -> None:
    for module, function, name in entries:
        callback = completions if module == "app" else getattr(import_module(f"memsearch.cli.{module}"), function)
        if isinstance(callback, typer.Typer):
            target.add_typer(callback, name=name)
        elif name is not None:
            target.command(name)(callback)
        else:
            target.command()(callback)


@functools.cache
def _full_app() -> typer.Typer:
    _register(_root_app, _COMMANDS)
    return _root_app


def __getattr__(name: str) -> typer.Typer:
    """`app`: every command (help, completions, tests), their modules imported on first use."""
    if name == "app":
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command_app(args: list[str]) -> typer.Typer:
    """The app to run `args` with: the root and the one command they name, only its module
    imported; every command (`only_command` of the full app) for anything else (the root's
    help, --version, a group, a typo)."""
    named = [entry for entry in _COMMANDS if _command_of(entry) == command_name(args)]
    if len(named) != 1 or named[0][0] == "app" or named[0][1] == "profiles_app":
        return only_command(_full_app(), args)
    lean = copy.copy(_root_app)
    lean.registered_commands, lean.registered_groups = [], []
    _register(lean, tuple(named))
    return lean


def main() -> None:
    """The console entry point. It ends the process without the interpreter's teardown, which
    after onnxruntime and numpy costs a tenth of a second on every call; every store was closed
    by then and the output is flushed here."""
    code: int | str | None = 0
    try:
        command_app(sys.argv[1:])()
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:  # before or after a command runs (a command's own is caught in the group)
        sys.stderr.write("memsearch: interrupted\n")
        code = ExitCode.INTERRUPTED
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = ExitCode.ERROR
    os._exit(int(code or 0))
