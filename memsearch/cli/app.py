"""The `memsearch` command: each command parses, makes one library call and renders.

Library modules are imported inside the commands, so `--help` and the read commands stay
fast and never import torch. The annotations are objects, not strings (no `from __future__
import annotations`): Typer reads each command's signature, and evaluating string annotations
took it longer than building the command.
"""

import errno
import functools
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer
from typer.core import TyperGroup

from memsearch import __version__
from memsearch.choices import (
    BENCHMARK_FORMATS,
    GRANULARITIES,
    IMPORT_FORMATS,
    KINDS,
    MODES,
    OUTPUT_FORMATS,
    RERANK_METHODS,
)
from memsearch.cli import metavars
from memsearch.cli.literal import visible
from memsearch.cli.render import messages
from memsearch.cli.startup import only_command, plain_values
from memsearch.errors import ExitCode, InvalidInputError, MemsearchError

if TYPE_CHECKING:
    import logging

    from memsearch.api import Memsearch
    from memsearch.config import Config

_state = {"debug": False}


def _fail(message: str, code: int) -> None:
    # A message may quote input that is not valid Unicode; it is shown escaped, never re-raised.
    shown = visible(message.encode("utf-8", "backslashreplace").decode("utf-8"))
    messages().print(f"memsearch: {shown}", markup=False, soft_wrap=True)
    sys.exit(code)


@contextmanager
def _ends_cleanly() -> Iterator[None]:
    """A reader that went away (`| head`) ends the command as a success, silently; Ctrl-C ends it
    with one line and 130. Both are caught here, before Typer turns them into exit 1 and a
    silent 130."""
    try:
        yield
    except BrokenPipeError:
        try:  # what is still buffered for stdout goes nowhere, and flushing it cannot fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # no file descriptor (a test runner's stream)
            pass
        sys.exit(ExitCode.OK)
    except SystemExit as stop:  # Typer's help console is Rich's: it points stdout at /dev/null and exits 1
        if stop.code == 1 and _stdout_is_devnull():
            sys.exit(ExitCode.OK)
        raise
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED)


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError):  # no file descriptor (a test runner's stream)
        return False


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


# What to do about an error of the environment, by errno.
_ADVICE_OF_ERRNO = {
    errno.EACCES: "permission denied; check its permissions or choose another path",
    errno.EPERM: "operation not permitted; check its permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose a path you can write to",
    errno.ENOSPC: "the disk is full; free some space and run it again",
    errno.EISDIR: "it is a directory; give a file",
    errno.ENOTDIR: "a part of the path is not a directory; check the path",
    errno.ENOENT: "no such file or directory; check the path",
    errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
}


def environment_message(error: OSError) -> str:
    """One line: what the system refused, where, and what to do."""
    advice = _ADVICE_OF_ERRNO.get(error.errno or 0, f"{error.strerror or error}; check the path and the disk")
    return f"{error.filename}: {advice}" if error.filename else advice


def _invalid_argument(args: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps its bytes as lone surrogates)."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return f"argument {number} ({shown!r}) is not valid UTF-8; pass text in UTF-8"
    return None


# The CLI's words for the library's parameters and errors.
OPTION_OF_FIELD = {
    "max_tokens": "--max-tokens",
    "tau_days": "--tau",
    "limit": "--limit",
    "mode": "--mode",
    "fmt": "--format",
    "conversation": "--conversation",
    "since": "--since",
    "until": "--until",
    "as_of": "--as-of",
    "kinds": "--kind",
    "roles": "--role",
    "sessions": "--session",
    "k": "--limit",
    "boost": "--boost",
    "rerank": "--rerank",
    "max_ms": "--max-ms",
    "include": "--include",
    "exclude": "--exclude",
}
HINT_OF_ERROR = {
    "StoreNotFoundError": "add a memory first or pass --db",
    "NothingToIndexError": "give one, as in `memsearch index ~/notes`",
    "DuplicateKeyError": "pass --replace to overwrite it",
    "ModelMismatchError": (
        "run `memsearch reindex` to re-embed the store with it, or pass the store's model with --model"
    ),
}


def cli_message(error: MemsearchError) -> str:
    """The library's message with the CLI's option for the field at fault and its hint."""
    message = f"{OPTION_OF_FIELD[error.field]} {error.problem}" if error.field in OPTION_OF_FIELD else str(error)
    hint = HINT_OF_ERROR.get(type(error).__name__)
    return f"{message}; {hint}" if hint else message


class MemsearchGroup(TyperGroup):
    """Turns every failure into one line on stderr and a documented exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        metavars.apply(self, CONTEXT_SETTINGS["help_option_names"])
        plain_values(self, CONTEXT_SETTINGS["help_option_names"])

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _ends_cleanly():  # `memsearch --help | head -1`
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _ends_cleanly():
            return super().invoke(ctx)

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        extra["standalone_mode"] = False
        bad_argument = _invalid_argument(list(sys.argv[1:] if args is None else args))
        if bad_argument:
            _fail(bad_argument, ExitCode.USAGE)
        try:
            result = super().main(args=args, prog_name=prog_name or "memsearch", **extra)
        except typer.Abort:
            _fail("interrupted", ExitCode.INTERRUPTED)
        except typer.TyperException as error:  # usage errors and other errors of the parser
            context = getattr(error, "ctx", None)
            where = f" (see `{context.command_path} --help`)" if context is not None else ""
            code = getattr(error, "exit_code", ExitCode.USAGE)
            _fail(f"{error.format_message()}{where}", code)
        except MemsearchError as error:
            if _state["debug"]:
                _print_traceback()
            _fail(cli_message(error), error.exit_code)
        except RecursionError:  # json's decoder on input nested thousands of levels deep
            _fail("the input is nested too deeply to read (JSON nested over 1000 levels); nothing was stored", 1)
        except UnicodeDecodeError as error:  # a file or stdin that is not UTF-8
            _fail(f"the input is not valid UTF-8 ({error.reason} at byte {error.start}); nothing was stored", 1)
        except OSError as error:  # the environment refused: say what, where and what to do
            _fail(environment_message(error), ExitCode.ERROR)
        except Exception as error:  # a bug, or a store's own error met outside a write (a damaged file)
            from memsearch.store import describe_store_error

            if (known := describe_store_error(error)) is not None:
                _fail(cli_message(known), known.exit_code)
            if _state["debug"]:
                _print_traceback()
            hint = "" if _state["debug"] else " (rerun with --debug for the traceback)"
            _fail(f"internal error: {type(error).__name__}: {error}{hint}", ExitCode.ERROR)
        sys.exit(result if isinstance(result, int) else ExitCode.OK)


CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    cls=MemsearchGroup,
    name="memsearch",
    help="Local-first memory search for AI agents and terminal users.",
    invoke_without_command=True,
    add_completion=False,
    context_settings=CONTEXT_SETTINGS,
    pretty_exceptions_enable=False,
)


def _choice(name: str, values: Sequence[str]) -> Any:
    """An option type whose values are the library's tuple (Typer takes choices from an Enum)."""
    return StrEnum(name, [(value, value) for value in values])


SHELLS = ("bash", "zsh", "fish")
if TYPE_CHECKING:  # to the type checker the options are the strings the library takes
    Mode: TypeAlias = str
    RerankMethod: TypeAlias = str
    Granularity: TypeAlias = str
    Format: TypeAlias = str
    ImportFormat: TypeAlias = str
    DatasetFormat: TypeAlias = str
    ReportFormat: TypeAlias = str
    Shell: TypeAlias = str
    Kind: TypeAlias = str
else:
    Mode = _choice("Mode", MODES)
    RerankMethod = _choice("RerankMethod", RERANK_METHODS)
    Granularity = _choice("Granularity", GRANULARITIES)
    Format = _choice("Format", OUTPUT_FORMATS)
    ImportFormat = _choice("ImportFormat", IMPORT_FORMATS)
    DatasetFormat = _choice("DatasetFormat", BENCHMARK_FORMATS)
    ReportFormat = _choice("ReportFormat", ("table", "json"))
    Shell = _choice("Shell", SHELLS)
    Kind = _choice("Kind", KINDS)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memsearch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    context: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    _state["debug"] = debug
    _log_to_stderr(debug)
    if context.invoked_subcommand is None:
        typer.echo(context.get_help())
    elif context.invoked_subcommand != "completions":
        from memsearch.config import load_config

        context.default_map = _configured_defaults(context.command, load_config())


# The options whose defaults come from the config (memsearch.config): per command, the option's
# parameter and the setting. `--format` of every command that prints library output is added.
CONFIGURED_OPTIONS = {
    "search": {"profile": "profile", "k": "limit", "project": "project"},
    "list": {"project": "project"},
    "add": {"project": "project"},
}


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


# -- options shared by several commands (declared once) ------------------------------------

DbOption = Annotated[
    str | None,  # a path or a postgresql:// URL (a Path would fold the URL's "//")
    typer.Option(
        "--db",
        help="Store file, or a postgresql://user@host/db URL. "
        "Default: $MEMSEARCH_DB, else db in config.toml, else $MEMSEARCH_HOME/memsearch.db, else the user data dir.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A sentence-transformers model directory. Default: $MEMSEARCH_MODEL, else the bundled all-MiniLM-L6-v2.",
    ),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", "-p", help="Ranking profile (see `memsearch profiles`). Default: default.")
]
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
ReplaceOption = Annotated[bool, typer.Option("--replace", help="Overwrite memories whose key exists already.")]
ProjectOption = Annotated[str | None, typer.Option("--project", help="Only memories of this project.")]
NamespaceOption = Annotated[str | None, typer.Option("--namespace", help="Only memories of this namespace.")]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeat: all of them).")
]
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since", help="Only memories created at or after this time: ISO-8601, or 7d, 2w, 3h, 30m, today, yesterday."
    ),
]
UntilOption = Annotated[
    str | None,
    typer.Option(
        "--until", help="Only memories created at or before this time: ISO-8601, or 7d, 2w, 3h, 30m, today, yesterday."
    ),
]
KindOption = Annotated[
    list[Kind] | None, typer.Option("--kind", help="Only memories of this kind (repeat: any of them).")
]
ConversationOption = Annotated[str | None, typer.Option("--conversation", help="Only memories of this conversation.")]
RoleOption = Annotated[
    list[str] | None, typer.Option("--role", help="Only memories of this role or speaker (repeat: any of them).")
]
SessionOption = Annotated[
    list[str] | None, typer.Option("--session", help="Only memories of this session (repeat: any of them).")
]
RefArgument = Annotated[str, typer.Argument(help="The memory's id, or its key.")]
RefsArgument = Annotated[list[str], typer.Argument(help="Ids or keys.")]
KeyOption = Annotated[bool, typer.Option("--key", help="Read REF as a key even if it is a number.")]
KeysOption = Annotated[bool, typer.Option("--key", help="Read every REF as a key.")]


ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="A `memsearch serve` URL to use (an error if it does not answer; '' means --no-server). "
        "Default: the server of the same store, if one runs that this user started; else in this process.",
    ),
]
NoServerOption = Annotated[
    bool, typer.Option("--no-server", help="Work in this process even if a server of the same store runs.")
]


def _remote(db: str | None, server: str | None, model: str | None, *, no_server: bool, writes: bool) -> Any:
    """The running server to use, if any: never with --model (the server has its own), never
    for a write under MEMSEARCH_READ_ONLY (the store refuses it in-process, as without a server)."""
    if model is not None or no_server:
        return None
    from memsearch.paths import read_only_requested

    if writes and read_only_requested():
        return None
    from memsearch.cli.remote import find_server

    return find_server(db, server)


def _through(remote: Any, path: str, body: dict[str, Any] | bytes, query: dict[str, Any] | None = None) -> Any:
    """The server's document, or None when a discovered server does not answer (then the caller
    works in-process; an explicit --server that does not answer is an error)."""
    import logging

    from memsearch.cli.remote import ServerUnavailable

    try:
        if isinstance(body, bytes):
            return remote.call("POST", path, body, query)
        return remote.post_json(path, {name: value for name, value in body.items() if value is not None})
    except ServerUnavailable as reason:
        logging.getLogger("memsearch").debug("%s; working in-process", reason)
        return None


def _filters(
    project: str | None,
    namespace: str | None,
    tags: list[str] | None,
    since: str | None,
    until: str | None,
    kinds: list[Kind] | None,
    conversation: str | None,
    roles: list[str] | None,
    sessions: list[str] | None,
) -> dict[str, Any]:
    """The filter options as the library's scope fields (`scope_from_fields`); an empty
    --project (set in the config, say) means every project."""
    return {
        "project": project or None,
        "namespace": namespace,
        "tags": tags,
        "since": since,
        "until": until,
        "kinds": [str(kind) for kind in kinds or ()],
        "conversation": conversation,
        "roles": roles,
        "sessions": sessions,
    }


@contextmanager
def _memsearch(db: str | None, model: str | None = None) -> "Iterator[Memsearch]":
    from memsearch.api import Memsearch

    with Memsearch(db, model=model) as ms:
        yield ms


def _read_source(source: str) -> tuple[str, str]:
    """The text of FILE, or of stdin for `-`, with the name to use in messages."""
    if source == "-":
        return sys.stdin.read(), "stdin"
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except OSError as error:
        raise InvalidInputError(f"cannot read {source}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"{source} is not UTF-8 text") from None


class _ProgressBar:
    """A progress bar on stderr for the library's (done, total) callbacks, shown only for long
    jobs (200 items or more) and only on a terminal; it starts at the first report."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=messages(),
                transient=True,
                disable=total < 200,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=total)
        self.bar.update(self.task, completed=done, total=total, description=self.description)

    def __enter__(self) -> "_ProgressBar":
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.stop()


# -- commands ------------------------------------------------------------------------------


@app.command()
def add(
    text: Annotated[str, typer.Argument(help="The memory's text, or - to read it from stdin.")],
    key: Annotated[str | None, typer.Option("--key", help="A unique key to find this memory by.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="A tag (repeatable).")] = None,
    importance: Annotated[float, typer.Option("--importance", help="0 to 1.")] = 0.5,
    priority: Annotated[float, typer.Option("--priority", help="1 to 2.")] = 1.0,
    pin: Annotated[bool, typer.Option("--pin", help="Pin the memory.")] = False,
    project: Annotated[str | None, typer.Option("--project", help="The project it belongs to.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Its namespace.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="The session it came from.")] = None,
    role: Annotated[str | None, typer.Option("--role", help="Who said it (user, assistant, …).")] = None,
    at: Annotated[str | None, typer.Option("--at", help="Creation time, ISO-8601 (default: now).")] = None,
    meta: Annotated[list[str] | None, typer.Option("--meta", help="Metadata as key=value (repeatable).")] = None,
    replace: ReplaceOption = False,
    profile: ProfileOption = None,
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Add one memory and print its id (a profile with ingest dedup may find it is a near-duplicate)."""
    from memsearch.models import NewMemory
    from memsearch.timeutil import parse_time

    body = sys.stdin.read() if text == "-" else text
    metadata: dict[str, str] = {}
    for item in meta or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"--meta {item!r} is not key=value")
        metadata[name.strip()] = value
    memory = NewMemory(
        text=body,
        key=key,
        tags=tuple(tag or ()),
        importance=importance,
        priority=priority,
        pinned=pin,
        project=project,
        namespace=namespace,
        session=session,
        role=role,
        created_at=parse_time(at, what="--at") if at else None,
        metadata=metadata,
    )
    remote = _remote(db, server, model, no_server=no_server, writes=True)
    document = None
    if remote is not None:
        document = _through(remote, "/add", {**memory.to_fields(), "replace": replace, "profile": profile})
    if document is None:
        with _memsearch(db, model) as ms:
            document = ms.add(memory, replace=replace, profile=profile).to_dict()
    if not document["stored"]:
        messages().print(
            f"not stored: a near-duplicate of id {document['duplicate_of']} (cosine {document['similarity']:.3f} "
            f"≥ {document['threshold']:g}, profile {profile}); its id is printed",
            markup=False,
        )
    typer.echo(document["id"])


@app.command("import")
def import_(
    file: Annotated[str, typer.Argument(help="The file to import, or - for stdin.")],
    fmt: Annotated[
        ImportFormat,
        typer.Option(
            "--format",
            "-f",
            help="jsonl: one memory per line. chat: one turn per line (session, role or speaker, text, "
            "created_at). locomo, longmemeval: those benchmarks' JSON.",
        ),
    ] = "jsonl",
    sessions: Annotated[
        bool, typer.Option("--sessions/--no-sessions", help="Conversations: store a chunk per session too.")
    ] = True,
    facets: Annotated[
        bool, typer.Option("--facets", help="Conversations: extract facet views (personal info, preferences, events).")
    ] = False,
    conversation: Annotated[
        str | None,
        typer.Option("--conversation", help="chat: the conversation's name (default: the file's stem; stdin: stdin)."),
    ] = None,
    replace: ReplaceOption = False,
    profile: ProfileOption = None,
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Import memories or conversations: every one is stored, or none is (near-duplicates are reported).
    A JSONL file goes through a running `memsearch serve` of the same store when there is one."""
    from memsearch.api import KIND_NAMES

    content, source = _read_source(file)
    document = None
    # Text that is not valid Unicode (invalid UTF-8 on stdin) is left to the library here, which
    # names its line; the server would only see the bytes it was sent.
    from memsearch.cli.remote import import_query, is_unicode

    sendable = str(fmt) == "jsonl" and content.strip() and is_unicode(content)
    remote = _remote(db, server, model, no_server=no_server, writes=True) if sendable else None
    if remote is not None:
        options = {"format": str(fmt), "source": source, "conversation": conversation, "sessions": sessions}
        options |= {"facets": facets, "replace": replace, "profile": profile}
        document = _through(remote, "/import", content.encode("utf-8"), import_query(options))
    if document is None:
        with _memsearch(db, model) as ms, _ProgressBar("embedding") as progress:
            document = ms.import_text(
                content,
                source=source,
                fmt=str(fmt),
                sessions=sessions,
                facets=facets,
                replace=replace,
                profile=profile,
                conversation=conversation,
                progress=progress,
            ).to_dict()
    counts, duplicates = document["counts"], document["duplicates"]
    if not duplicates and not any(counts.values()):
        messages().print(f"{source} has no memories; nothing imported", markup=False)
        return
    summary = ", ".join(f"{n} {KIND_NAMES[kind][n != 1]}" for kind, n in counts.items() if n) or "0 memories"
    messages().print(f"imported {summary} from {source}", markup=False)
    for duplicate in duplicates:
        where = "line" if "line" in duplicate else "item"
        messages().print(
            f"{where} {duplicate[where]} not stored: a near-duplicate of id {duplicate['duplicate_of']} "
            f"(cosine {duplicate['similarity']:.3f})",
            markup=False,
        )


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to search for.")] = None,
    k: Annotated[
        int | None, typer.Option("-k", "--limit", help="How many results (default: the profile's).", min=1, max=1000)
    ] = None,
    mode: Annotated[
        Mode, typer.Option("--mode", "-m", help="auto picks vector or hybrid per query and says why.")
    ] = "auto",
    raw: Annotated[
        bool, typer.Option("--raw", help="Also show every candidate before filtering, with why it was dropped.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each result's leg ranks, fusion, factors and final score.")
    ] = False,
    as_of: Annotated[str | None, typer.Option("--as-of", help="The 'now' for time decay, ISO-8601.")] = None,
    tau: Annotated[float | None, typer.Option("--tau", help="Time-decay constant in days (0: no decay).")] = None,
    profile: ProfileOption = None,
    granularity: Annotated[
        Granularity,
        typer.Option(
            "--granularity", "-g", help="turn: turns and notes; session: session chunks, supported by their turns."
        ),
    ] = "turn",
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", help="Token budget for the results (about 4 characters a token).", min=1),
    ] = None,
    no_touch: Annotated[
        bool, typer.Option("--no-touch", help="Do not record this search as an access of its results.")
    ] = False,
    boost: Annotated[
        list[str] | None,
        typer.Option(
            "--boost",
            help="Multiply the scores of memories with this tag or project: tag:NAME[=FACTOR] or "
            "project:NAME[=FACTOR] (default factor 1.5; repeatable).",
        ),
    ] = None,
    rerank: Annotated[
        RerankMethod | None,
        typer.Option(
            "--rerank", help="Re-rank the top fused candidates: off, deterministic or llm (default: the profile's)."
        ),
    ] = None,
    max_ms: Annotated[
        int | None,
        typer.Option(
            "--max-ms",
            help="Latency budget: skip the LLM stages that would not fit (HyDE, then re-ranking, then expansion).",
            min=1,
        ),
    ] = None,
    queries: Annotated[
        str | None,
        typer.Option("--queries", help='A JSONL file of {"query": …} objects (or - for stdin): one result set each.'),
    ] = None,
    project: ProjectOption = None,
    namespace: NamespaceOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    kind: KindOption = None,
    conversation: ConversationOption = None,
    role: RoleOption = None,
    session: SessionOption = None,
    fmt: FormatOption = "table",
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Search memories (through a running `memsearch serve` of the same store when there is one)."""
    from memsearch.cli.render import render_search
    from memsearch.operations import MAX_QUERY_CHARS
    from memsearch.retrieval.request import request_from_fields

    if (query is None) == (queries is None):
        raise InvalidInputError("give a QUERY or --queries FILE (one of them)")
    # Every option is checked (and relative times resolved) here, whoever runs the search.
    template = request_from_fields(
        query if query is not None else "(queries)",
        k=k,
        mode=str(mode),
        granularity=str(granularity),
        max_tokens=max_tokens,
        as_of=as_of,
        touch=not no_touch,
        boost=boost,
        rerank=str(rerank) if rerank is not None else None,
        max_ms=max_ms,
        profile=profile,
        tau_days=tau,
        **_filters(project, namespace, tag, since, until, kind, conversation, role, session),
    )
    sendable = query is not None and len(query) <= MAX_QUERY_CHARS
    remote = _remote(db, server, model, no_server=no_server, writes=False) if sendable else None
    if remote is not None:
        body = {**template.to_fields(), "raw": raw, "explain": True}
        document = _through(remote, "/search", body)
        if document is not None:
            render_search([document], str(fmt), raw=raw, explain=explain, batch=False)
            return
    with _memsearch(db, model) as ms:
        if queries is not None:
            content, source = _read_source(queries)
            defaults = {name: value for name, value in vars(template).items() if name != "query"}
            requests = ms.parse_queries(content, source=source, **defaults)
        else:
            requests = [template]
        outcomes = ms.search_many(requests)
    documents = [outcome.to_dict(raw=raw) for outcome in outcomes]
    render_search(documents, str(fmt), raw=raw, explain=explain, batch=queries is not None)


@app.command()
def get(ref: RefArgument, key: KeyOption = False, fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show one memory."""
    from memsearch.cli.render import render_memories

    with _memsearch(db) as ms:
        render_memories(ms.get_many([ref], by_key=key), str(fmt), single=True)


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).", min=0)] = 20,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many first.", min=0)] = 0,
    project: ProjectOption = None,
    namespace: NamespaceOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    kind: KindOption = None,
    conversation: ConversationOption = None,
    role: RoleOption = None,
    session: SessionOption = None,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """List memories, newest first."""
    from memsearch.cli.render import render_memories
    from memsearch.retrieval.request import scope_from_fields

    scope = scope_from_fields(**_filters(project, namespace, tag, since, until, kind, conversation, role, session))
    with _memsearch(db) as ms:
        render_memories(ms.list(scope, limit=limit or None, offset=offset), str(fmt))


@app.command()
def delete(
    refs: Annotated[list[str], typer.Argument(help="Ids or keys of the memories to delete.")],
    key: KeysOption = False,
    db: DbOption = None,
) -> None:
    """Delete memories: all of them, or none if any is not found."""
    with _memsearch(db) as ms:
        ids = ms.delete([ms.resolve(ref, by_key=key) for ref in refs])
    messages().print(f"deleted {len(ids)} {'memory' if len(ids) == 1 else 'memories'}: {', '.join(map(str, ids))}")


@app.command()
def stats(fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show what the store holds."""
    from memsearch.cli.render import render_stats

    with _memsearch(db) as ms:
        stats = ms.stats()
    if not stats["exists"]:
        messages().print(f"no memsearch store at {stats['path']} yet; `memsearch add` or `memsearch import` creates it")
    render_stats(stats, str(fmt))


@app.command()
def path(db: DbOption = None) -> None:
    """Print where the store is (it need not exist yet; a URL without its password)."""
    from memsearch.paths import resolve_db_path, shown_location

    typer.echo(shown_location(resolve_db_path(db)))


@app.command()
def reindex(db: DbOption = None, model: ModelOption = None) -> None:
    """Re-embed every memory with the current model (after changing --model)."""
    with _memsearch(db, model) as ms, _ProgressBar("re-embedding") as progress:
        count = ms.reindex(progress=progress)
        model_name = ms.model_name
    messages().print(f"re-embedded {count} memories with {model_name}", markup=False)


@app.command()
def index(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Folders (or files) of notes to index; none: every folder indexed before.",
            metavar="PATH",
            show_default=False,
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            metavar="GLOB",
            help="Index only files matching this glob (gitignore syntax, repeatable). Default: markdown, .txt.",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            metavar="PATTERN",
            help="Leave out what matches this gitignore pattern (repeatable), as .gitignore files do.",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")] = False,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format.")] = "table",
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Keep folders of markdown or text notes searchable: a memory per section, re-indexed incrementally.
    The folders are remembered with their patterns; `memsearch index` alone updates them all."""
    from memsearch.cli.render import render_index

    with _memsearch(db, model) as ms, _ProgressBar("embedding") as progress:
        outcome = ms.index(
            paths or (), include=include or (), exclude=exclude or (), dry_run=dry_run, progress=progress
        )
    render_index(outcome, str(fmt))


@app.command("set")
def set_(
    ref: RefArgument,
    importance: Annotated[float | None, typer.Option("--importance", help="0 to 1.")] = None,
    priority: Annotated[float | None, typer.Option("--priority", help="1 to 2.")] = None,
    memory_score: Annotated[float | None, typer.Option("--memory-score", help="Quality score, 0 to 1.")] = None,
    derived_score: Annotated[
        bool, typer.Option("--derived-score", help="Go back to the score derived from importance and use.")
    ] = False,
    project: Annotated[str | None, typer.Option("--project", help="Move it to this project.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Move it to this namespace.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Replace its tags (repeatable).")] = None,
    key: KeyOption = False,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """Change a memory's scoring fields and show it."""
    from memsearch.cli.render import render_memories

    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("importance", importance), ("priority", priority), ("memory_score", memory_score),
            ("project", project), ("namespace", namespace), ("tags", tag),
        )
        if value is not None
    }  # fmt: skip
    if derived_score:
        if memory_score is not None:
            raise InvalidInputError("give --memory-score or --derived-score, not both")
        changes["memory_score"] = None
    if not changes:
        raise InvalidInputError("nothing to set; see `memsearch set --help`")
    with _memsearch(db) as ms:
        render_memories([ms.update(ms.resolve(ref, by_key=key), **changes)], str(fmt), single=True)


def _set_pinned(refs: list[str], by_key: bool, db: str | None, pinned: bool) -> None:
    with _memsearch(db) as ms:
        ids = ms.set_pinned([ms.resolve(ref, by_key=by_key) for ref in refs], pinned)
    messages().print(f"{'pinned' if pinned else 'unpinned'} {', '.join(map(str, ids))}", markup=False)


@app.command()
def pin(refs: RefsArgument, key: KeysOption = False, db: DbOption = None) -> None:
    """Pin memories (boosted by profiles that score pins; never hidden as superseded)."""
    _set_pinned(refs, key, db, True)


@app.command()
def unpin(refs: RefsArgument, key: KeysOption = False, db: DbOption = None) -> None:
    """Unpin memories."""
    _set_pinned(refs, key, db, False)


@app.command()
def consolidate(
    duplicate: Annotated[
        float, typer.Option("--duplicate", help="Cosine at which the older memory is superseded.")
    ] = 0.95,
    related: Annotated[float, typer.Option("--related", help="Cosine at which memories join a group.")] = 0.80,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")] = False,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """Mark older near-duplicates superseded by the newest one and group related memories."""
    from memsearch.cli.render import render_consolidation

    with _memsearch(db) as ms:
        render_consolidation(ms.consolidate(duplicate=duplicate, related=related, dry_run=dry_run), str(fmt))


profiles_app = typer.Typer(
    help="The ranking profiles: `memsearch profiles` lists them, `memsearch profiles show NAME` prints one.",
    invoke_without_command=True,
)
app.add_typer(profiles_app, name="profiles")


@profiles_app.callback()
def profiles_list(context: typer.Context, fmt: FormatOption = "table") -> None:
    """List the ranking profiles with a one-line summary."""
    if context.invoked_subcommand is not None:
        return
    from memsearch.api import Memsearch
    from memsearch.cli.render import render_profiles

    render_profiles(Memsearch.profiles(), str(fmt))


@profiles_app.command("show")
def profiles_show(
    name: Annotated[str, typer.Argument(help="The profile's name.")], fmt: FormatOption = "table"
) -> None:
    """Print a profile's resolved parameters."""
    from memsearch.api import Memsearch
    from memsearch.cli.render import render_profile

    render_profile(Memsearch.profile(name), str(fmt))


@app.command()
def timeline(
    ref: RefArgument,
    before: Annotated[int, typer.Option("--before", "-B", help="How many memories before it.", min=0)] = 5,
    after: Annotated[int, typer.Option("--after", "-A", help="How many memories after it.", min=0)] = 5,
    key: KeyOption = False,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """Show the turns around a memory in order (for a note: the memories around it in time)."""
    from memsearch.cli.render import render_timeline

    with _memsearch(db) as ms:
        render_timeline(ms.timeline(ms.resolve(ref, by_key=key), before=before, after=after), str(fmt))


@app.command()
def mcp(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on loopback instead of stdio.")] = False,
    port: Annotated[int, typer.Option("--port", help="The port for --http (0: any free).", min=0, max=65535)] = 8766,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Run an MCP server (stdio by default) with the tools mem_search, mem_add, mem_get, mem_timeline,
    mem_delete and mem_stats over one warm process."""
    from memsearch.server.mcp import run_mcp

    run_mcp(db, model, http=http, port=port)


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; off loopback a bearer token is required.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to bind (0: any free port).", min=0, max=65535)] = 8765,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="Also accept requests whose Host header names this (repeatable). "
            "Default: loopback names and the --host address only.",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="Accept requests from web pages of this origin, e.g. http://localhost:3000 (repeatable). "
            "Default: none.",
        ),
    ] = None,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Serve the HTTP JSON API over one warm process (search, add, import, get, delete, timeline).
    The token comes from $MEMSEARCH_API_KEY or api_key in config.toml; SIGTERM or Ctrl-C finishes
    in-flight requests and exits."""
    from memsearch.server.http import run_serve

    run_serve(
        db,
        model,
        host=host,
        port=port,
        allowed_hosts=allowed_host or (),
        cors_origins=cors_origin or (),
        announce=lambda line: messages().print(line, markup=False),
    )


@app.command("eval")
def eval_(
    dataset: Annotated[Path, typer.Argument(help="A LoCoMo or LongMemEval JSON file.", dir_okay=False)],
    dataset_format: Annotated[
        DatasetFormat, typer.Option("--dataset-format", "-d", help="The dataset's format: locomo or longmemeval.")
    ],
    profile: Annotated[
        list[str] | None, typer.Option("--profile", "-p", help="A profile to measure (repeatable). Default: all.")
    ] = None,
    mode: Annotated[list[Mode] | None, typer.Option("--mode", "-m", help="A mode (repeatable). Default: auto.")] = None,
    granularity: Annotated[
        list[Granularity] | None,
        typer.Option("--granularity", "-g", help="turn and/or session (repeatable). Default: both."),
    ] = None,
    # One flag, not --baseline/--no-baseline: a pair takes a help column of its own, which at 80
    # columns leaves the help text too narrow for its longer words.
    no_baseline: Annotated[bool, typer.Option("--no-baseline", help="Skip the plain BM25 baseline.")] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Only the first N conversations (or questions).", min=1)
    ] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="table, or json for machines.")] = "table",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the report to this file instead of stdout.", dir_okay=False),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw the recall@k curves and the per-category bars to this .svg or .png file "
            '(needs pip install "memsearch[plot]").',
            dir_okay=False,
        ),
    ] = None,
    model: ModelOption = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Measure on this postgresql:// store (empty; emptied after each conversation)."),
    ] = None,
) -> None:
    """Measure retrieval on a benchmark: Recall@k and NDCG@k per category, latency, side by side."""
    from memsearch.eval.report import REPORT_FORMATS, check_target, render_report, write_report
    from memsearch.eval.runner import run_eval
    from memsearch.profiles import available

    if not dataset.is_file():
        raise InvalidInputError(f"cannot read {dataset}: no such file")
    if output is not None:  # -o once meant --format: `-o json` now asks for the format by its name
        if output.name in REPORT_FORMATS:
            name = output.name
            raise InvalidInputError(f"-o/--output names the report's file; for the {name} format use -f {name}")
        check_target(output)
    if plot is not None:
        from memsearch.eval.plot import check_plot_target

        check_plot_target(plot)  # a missing matplotlib or a bad name fails now, not after the run
    names = profile or list(available())
    with _ProgressBar("eval") as bar:

        def progress(label: str, done: int, total: int) -> None:
            bar.description = f"eval {label}"
            bar(done, total)

        report = run_eval(
            dataset,
            fmt=str(dataset_format),
            profiles=names,
            modes=[str(m) for m in mode or ["auto"]],
            granularities=[str(g) for g in granularity or GRANULARITIES],
            baselines=not no_baseline,
            limit=limit,
            model=model,
            progress=progress,
            db=db,
        )
    if output is None:
        render_report(report, str(fmt))
    else:
        with output.open("w", encoding="utf-8") as file:
            write_report(report, str(fmt), file)
        messages().print(f"wrote the report to {output}", markup=False)
    if plot is not None:
        from memsearch.eval.plot import plot_report

        plot_report(report, plot)
        messages().print(f"wrote the plot to {plot}", markup=False)


@app.command()
def completions(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the shell-completion script (static: tab completion never starts Python)."""
    from memsearch.cli.shells import generate

    sys.stdout.write(generate(str(shell), app))


def main() -> None:
    """The console entry point. It ends the process without the interpreter's teardown, which
    after onnxruntime and numpy costs a tenth of a second on every call; every store was closed
    by then and the output is flushed here."""
    code: int | str | None = 0
    try:
        only_command(app, sys.argv[1:])()
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


@app.command()
def copy(
    source: Annotated[str, typer.Argument(help="The store to copy: a file or a postgresql:// URL.")],
    destination: Annotated[str, typer.Argument(help="An empty or new store: a file or a postgresql:// URL.")],
) -> None:
    """Copy every memory with its views, vectors, access counts and consolidation marks into an
    empty store (SQLite ↔ PostgreSQL), keeping ids, without re-embedding; all or nothing."""
    with _memsearch(source) as ms:
        count = ms.copy_to(destination)
    messages().print(f"copied {count} {'memory' if count == 1 else 'memories'}", markup=False)


# -- moving memories, settings and checks ---------------------------------------------------


@app.command()
def export(
    project: ProjectOption = None,
    namespace: NamespaceOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    kind: KindOption = None,
    conversation: ConversationOption = None,
    role: RoleOption = None,
    session: SessionOption = None,
    db: DbOption = None,
) -> None:
    """Print memories as JSONL that `memsearch import` stores again as they are (text, key, time,
    scoring and scope fields, tags, metadata, conversation place and views; not ids or access
    counts, which `memsearch copy` keeps), oldest first."""
    import json

    from memsearch.retrieval.request import scope_from_fields

    scope = scope_from_fields(**_filters(project, namespace, tag, since, until, kind, conversation, role, session))
    with _memsearch(db) as ms:
        for record in ms.export(scope):
            sys.stdout.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


@app.command()
def config(fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show the effective settings (profile, limit, format, project, db, api_key) and where each
    comes from: the config file, a MEMSEARCH_* variable, or the default. Flags beat both."""
    from memsearch.cli.render import render_config
    from memsearch.config import load_config
    from memsearch.paths import resolve_db_path

    render_config(load_config(), str(resolve_db_path(db)), str(fmt))


@app.command()
def doctor(fmt: FormatOption = "table", db: DbOption = None, model: ModelOption = None) -> None:
    """Check the store and the model: counts, integrity, and what would make search fail or slow.
    Exits 1 when a problem is found (warnings do not count)."""
    from memsearch.cli.render import render_doctor

    with _memsearch(db, model) as ms:
        report = ms.doctor()
    render_doctor(report, str(fmt))
    if not report.ok:
        raise typer.Exit(ExitCode.ERROR)
