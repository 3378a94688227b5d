"""The `memsearch` command: each command parses, makes one library call and renders.

Library modules are imported inside the commands, so `--help` and the read commands stay
fast and never import torch.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from memsearch import __version__
from memsearch.cli.render import messages
from memsearch.errors import ExitCode, ImportLineError, InvalidInputError, MemsearchError

if TYPE_CHECKING:
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store import Scope

_state = {"debug": False}


def _fail(message: str, code: int) -> None:
    messages.print(f"memsearch: {message}", markup=False, soft_wrap=True)
    sys.exit(code)


class MemsearchGroup(TyperGroup):
    """Turns every failure into one line on stderr and a documented exit code."""

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        extra["standalone_mode"] = False
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
                traceback.print_exc()
            _fail(str(error), error.exit_code)
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (`| head`); that is not an error
            sys.exit(ExitCode.OK)
        except Exception as error:  # a bug: say so in one line, the traceback on request
            if _state["debug"]:
                traceback.print_exc()
            _fail(
                f"internal error: {type(error).__name__}: {error} (rerun with --debug for the traceback)",
                ExitCode.ERROR,
            )
        sys.exit(result if isinstance(result, int) else ExitCode.OK)


app = typer.Typer(
    cls=MemsearchGroup,
    name="memsearch",
    help="Local-first memory search for AI agents and terminal users.",
    invoke_without_command=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


class Mode(StrEnum):
    auto = "auto"
    vector = "vector"
    hybrid = "hybrid"
    lexical = "lexical"


class Format(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


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


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"memsearch: {record.getMessage()}\n")


def _log_to_stderr(debug: bool) -> None:
    """Library notices (such as the one-time model export) as plain lines on stderr."""
    logger = logging.getLogger("memsearch")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    logger.setLevel(logging.DEBUG if debug else logging.INFO)


# -- options shared by several commands (declared once) ------------------------------------

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Store file. Default: $MEMSEARCH_DB, else $MEMSEARCH_HOME/memsearch.db, else the user data dir.",
        dir_okay=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A sentence-transformers model directory. Default: $MEMSEARCH_MODEL, else the bundled all-MiniLM-L6-v2.",
    ),
]
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
ProjectOption = Annotated[str | None, typer.Option("--project", help="Only memories of this project.")]
NamespaceOption = Annotated[str | None, typer.Option("--namespace", help="Only memories of this namespace.")]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", "-t", help="Only memories with this tag (repeat: all of them).")
]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="Only memories created at or after this ISO-8601 time.")
]
UntilOption = Annotated[
    str | None, typer.Option("--until", help="Only memories created at or before this ISO-8601 time.")
]


def _scope(
    project: str | None, namespace: str | None, tags: list[str] | None, since: str | None, until: str | None
) -> Scope:
    from memsearch.store import Scope
    from memsearch.timeutil import parse_time

    return Scope(
        project=project,
        namespace=namespace,
        tags=tuple(tags or ()),
        since=parse_time(since, what="--since") if since else None,
        until=parse_time(until, what="--until") if until else None,
    )


@contextmanager
def _memsearch(db: Path | None, model: str | None = None) -> Iterator[Memsearch]:
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


def _progress(description: str, total: int) -> Any:
    """A progress bar on stderr, shown only for long jobs and only on a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=messages,
        transient=True,
        disable=total < 200,
    )


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
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite the memory that has the same --key.")] = False,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Add one memory and print its id."""
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
    with _memsearch(db, model) as ms:
        typer.echo(ms.add(memory, replace=replace))


def parse_jsonl(content: str, source: str) -> list[tuple[int, Any]]:
    """The decoded objects of a JSONL text with their line numbers; blank lines are skipped."""
    rows = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise ImportLineError(source, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    return rows


def parse_memories(content: str, source: str) -> list[NewMemory]:
    from memsearch.models import NewMemory

    memories = []
    seen_keys: dict[str, int] = {}
    for number, obj in parse_jsonl(content, source):
        try:
            memory = NewMemory.from_json(obj)
        except InvalidInputError as error:
            raise ImportLineError(source, number, str(error)) from None
        if memory.key is not None:
            if memory.key in seen_keys:
                raise ImportLineError(source, number, f"key {memory.key!r} is used on line {seen_keys[memory.key]} too")
            seen_keys[memory.key] = number
        memories.append(memory)
    return memories


@app.command("import")
def import_(
    file: Annotated[str, typer.Argument(help="A JSONL file, one memory per line, or - for stdin.")],
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite memories whose key exists already.")] = False,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Import memories from JSONL: every line is stored, or none is."""
    content, source = _read_source(file)
    memories = parse_memories(content, source)
    if not memories:
        messages.print(f"{source} has no memories; nothing imported")
        return
    with _memsearch(db, model) as ms, _progress("embedding", len(memories)) as bar:
        task = bar.add_task("embedding", total=len(memories))
        ids = ms.add_many(memories, replace=replace, progress=lambda done: bar.update(task, completed=done))
    messages.print(f"imported {len(ids)} memories from {source}", markup=False)


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to search for.")] = None,
    k: Annotated[int, typer.Option("-k", "--limit", help="How many results.", min=1, max=1000)] = 10,
    mode: Annotated[
        Mode, typer.Option("--mode", "-m", help="auto picks vector or hybrid per query and says why.")
    ] = Mode.auto,
    raw: Annotated[
        bool, typer.Option("--raw", help="Also show every candidate before filtering, with why it was dropped.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each result's leg ranks, fusion, factors and final score.")
    ] = False,
    as_of: Annotated[str | None, typer.Option("--as-of", help="The 'now' for time decay, ISO-8601.")] = None,
    tau: Annotated[float | None, typer.Option("--tau", help="Time-decay constant in days (0: no decay).")] = None,
    queries: Annotated[
        str | None,
        typer.Option("--queries", help='A JSONL file of {"query": …} objects (or - for stdin): one result set each.'),
    ] = None,
    project: ProjectOption = None,
    namespace: NamespaceOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Search memories."""
    from memsearch.timeutil import parse_time

    if (query is None) == (queries is None):
        raise InvalidInputError("give a QUERY or --queries FILE (one of them)")
    scope = _scope(project, namespace, tag, since, until)
    moment = parse_time(as_of, what="--as-of") if as_of else None
    requests = (
        parse_queries(queries, k=k, mode=mode.value, scope=scope, as_of=moment)
        if queries is not None
        else [_request(query or "", k, mode.value, scope, moment)]
    )
    from memsearch.cli.render import render_search

    with _memsearch(db, model) as ms:
        outcomes = ms.search_many(requests, tau_days=tau)
    render_search(outcomes, fmt.value, raw=raw, explain=explain, batch=queries is not None)


def _request(query: str, k: int, mode: str, scope: Scope, as_of: Any) -> SearchRequest:
    from memsearch.retrieval.pipeline import SearchRequest

    return SearchRequest(query=query, k=k, mode=mode, scope=scope, as_of=as_of)


def parse_queries(source: str, *, k: int, mode: str, scope: Scope, as_of: Any) -> list[SearchRequest]:
    """Requests from a JSONL of {"query", optional "k" and "mode"}; all lines are checked first."""
    content, name = _read_source(source)
    requests = []
    for number, obj in parse_jsonl(content, name):
        if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
            raise ImportLineError(name, number, 'expected an object with a "query" string')
        unknown = sorted(set(obj) - {"query", "k", "mode"})
        if unknown:
            raise ImportLineError(name, number, f"unknown field {unknown[0]!r} (known: query, k, mode)")
        line_k = obj.get("k", k)
        if isinstance(line_k, bool) or not isinstance(line_k, int):
            raise ImportLineError(name, number, f"k must be a whole number, not {line_k!r}")
        try:
            requests.append(_request(obj["query"], line_k, obj.get("mode", mode), scope, as_of))
        except InvalidInputError as error:
            raise ImportLineError(name, number, str(error)) from None
    if not requests:
        raise InvalidInputError(f"{name} has no queries")
    return requests


def _resolve_ref(ms: Memsearch, ref: str, by_key: bool) -> Any:
    return ms.get(ref if by_key or not ref.isdigit() else int(ref))


@app.command()
def get(
    ref: Annotated[str, typer.Argument(help="The memory's id, or its key.")],
    key: Annotated[bool, typer.Option("--key", help="Read REF as a key even if it is a number.")] = False,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Show one memory."""
    from memsearch.cli.render import render_memories

    with _memsearch(db) as ms:
        render_memories([_resolve_ref(ms, ref, key)], fmt.value, single=True)


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).", min=0)] = 20,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many first.", min=0)] = 0,
    project: ProjectOption = None,
    namespace: NamespaceOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """List memories, newest first."""
    from memsearch.cli.render import render_memories

    scope = _scope(project, namespace, tag, since, until)
    with _memsearch(db) as ms:
        render_memories(ms.list(scope, limit=limit or None, offset=offset), fmt.value)


@app.command()
def delete(
    refs: Annotated[list[str], typer.Argument(help="Ids or keys of the memories to delete.")],
    key: Annotated[bool, typer.Option("--key", help="Read every REF as a key.")] = False,
    db: DbOption = None,
) -> None:
    """Delete memories: all of them, or none if any is not found."""
    with _memsearch(db) as ms:
        ids = list(dict.fromkeys(_resolve_ref(ms, ref, key).id for ref in refs))
        ms.delete(ids)
    messages.print(f"deleted {len(ids)} {'memory' if len(ids) == 1 else 'memories'}: {', '.join(map(str, ids))}")


@app.command()
def stats(fmt: FormatOption = Format.table, db: DbOption = None) -> None:
    """Show what the store holds."""
    from memsearch.cli.render import render_stats

    with _memsearch(db) as ms:
        render_stats(ms.stats(), fmt.value)


@app.command()
def path(db: DbOption = None) -> None:
    """Print where the store is (it need not exist yet)."""
    from memsearch.paths import resolve_db_path

    typer.echo(resolve_db_path(db))


@app.command()
def reindex(db: DbOption = None, model: ModelOption = None) -> None:
    """Re-embed every memory with the current model (after changing --model)."""
    with _memsearch(db, model) as ms:
        total = ms.stats()["memories"]
        with _progress("re-embedding", total) as bar:
            task = bar.add_task("re-embedding", total=total)
            count = ms.reindex(progress=lambda done: bar.update(task, completed=done))
        model_name = ms.encoder().info.name
    messages.print(f"re-embedded {count} memories with {model_name}", markup=False)


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completions(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the shell-completion script (static: tab completion never starts Python)."""
    from memsearch.cli.completions import generate

    sys.stdout.write(generate(shell.value))


def main() -> None:
    app()
