"""The `memsearch` command: each command parses, makes one library call and renders.

Library modules are imported inside the commands, so `--help` and the read commands stay
fast and never import torch.
"""

from __future__ import annotations

import json
import logging
import os
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


# The CLI's words for the library's parameters and errors.
OPTION_OF_FIELD = {"max_tokens": "--max-tokens", "tau_days": "--tau", "limit": "--limit", "mode": "--mode"}
HINT_OF_ERROR = {
    "StoreNotFoundError": "add a memory first or pass --db",
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
            _fail(cli_message(error), error.exit_code)
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


class Granularity(StrEnum):
    turn = "turn"
    session = "session"


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
    str | None,  # a path or a postgresql:// URL (a Path would fold the URL's "//")
    typer.Option(
        "--db",
        help="Store file, or a postgresql://user@host/db URL. "
        "Default: $MEMSEARCH_DB, else $MEMSEARCH_HOME/memsearch.db, else the user data dir.",
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
    profile: ProfileOption = None,
    db: DbOption = None,
    model: ModelOption = None,
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
    dedup = _ingest_dedup(profile)
    with _memsearch(db, model) as ms:
        outcome = ms.add(memory, replace=replace, dedup=dedup)
    if not outcome.stored:
        messages.print(
            f"not stored: a near-duplicate of id {outcome.duplicate_of} (cosine {outcome.similarity:.3f} ≥ {dedup:g}, "
            f"profile {profile}); its id is printed",
            markup=False,
        )
    typer.echo(outcome.id)


def _ingest_dedup(profile: str | None) -> float | None:
    if profile is None:
        return None
    from memsearch.profiles import load_profile

    return load_profile(profile).ingest_dedup


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


def parse_memories(content: str, source: str) -> tuple[list[int], list[NewMemory]]:
    """The memories of a JSONL text and their line numbers; the first bad line is an error."""
    from memsearch.models import NewMemory

    numbers = []
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
        numbers.append(number)
        memories.append(memory)
    return numbers, memories


class ImportFormat(StrEnum):
    jsonl = "jsonl"
    chat = "chat"
    locomo = "locomo"
    longmemeval = "longmemeval"


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
    ] = ImportFormat.jsonl,
    sessions: Annotated[
        bool, typer.Option("--sessions/--no-sessions", help="Conversations: store a chunk per session too.")
    ] = True,
    facets: Annotated[
        bool, typer.Option("--facets", help="Conversations: extract facet views (personal info, preferences, events).")
    ] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite memories whose key exists already.")] = False,
    profile: ProfileOption = None,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Import memories or conversations: every one is stored, or none is (near-duplicates are reported)."""
    if fmt == ImportFormat.jsonl:
        content, source = _read_source(file)
        lines, memories = parse_memories(content, source)
    else:
        lines, memories, source = [], *_conversation_memories(file, fmt, sessions)
    if not memories:
        messages.print(f"{source} has no memories; nothing imported", markup=False)
        return
    dedup = _ingest_dedup(profile)
    with _memsearch(db, model) as ms, _progress("embedding", len(memories)) as bar:
        if facets:
            from memsearch.conversations import with_facets

            memories = with_facets(memories, ms.encoder())
        task = bar.add_task("embedding", total=len(memories))
        outcomes = ms.add_many(
            memories,
            replace=replace,
            dedup=dedup,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    stored = [m for m, o in zip(memories, outcomes, strict=True) if o.stored]
    names = {"note": ("memory", "memories"), "turn": ("turn", "turns"), "session": ("session", "sessions")}
    counts = {kind: sum(m.kind == kind for m in stored) for kind in names}
    summary = ", ".join(f"{n} {names[kind][n != 1]}" for kind, n in counts.items() if n)
    messages.print(f"imported {summary or '0 memories'} from {source}", markup=False)
    for line, outcome in zip(lines or range(1, len(outcomes) + 1), outcomes, strict=True):
        if not outcome.stored:
            where = f"line {line}" if lines else f"item {line}"
            messages.print(
                f"{where} not stored: a near-duplicate of id {outcome.duplicate_of} (cosine {outcome.similarity:.3f})",
                markup=False,
            )


def _conversation_memories(file: str, fmt: ImportFormat, sessions: bool) -> tuple[list[NewMemory], str]:
    """The memories of a chat JSONL, LoCoMo or LongMemEval file (stdin is read into a temporary file)."""
    import tempfile

    from memsearch.conversations import conversation_memories
    from memsearch.eval.datasets import load_chat_jsonl, load_locomo, load_longmemeval

    if file == "-":
        content, _ = _read_source(file)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
            handle.write(content)
        path, source = Path(handle.name), "stdin"
    else:
        path, source = Path(file), file
        if not path.is_file():
            raise InvalidInputError(f"cannot read {file}: no such file")
    try:
        if fmt == ImportFormat.chat:
            conversations = [load_chat_jsonl(path, conversation_id=path.stem if file != "-" else "stdin")]
        else:
            loader = load_locomo if fmt == ImportFormat.locomo else load_longmemeval
            conversations = [conversation for conversation, _ in loader(path)]
    finally:
        if file == "-":
            path.unlink(missing_ok=True)
    memories = [m for conversation in conversations for m in conversation_memories(conversation, sessions=sessions)]
    return memories, source


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to search for.")] = None,
    k: Annotated[
        int | None, typer.Option("-k", "--limit", help="How many results (default: the profile's).", min=1, max=1000)
    ] = None,
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
    profile: ProfileOption = None,
    granularity: Annotated[
        Granularity,
        typer.Option(
            "--granularity", "-g", help="turn: turns and notes; session: session chunks, supported by their turns."
        ),
    ] = Granularity.turn,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", help="Token budget for the results (about 4 characters a token).", min=1),
    ] = None,
    no_touch: Annotated[
        bool, typer.Option("--no-touch", help="Do not record this search as an access of its results.")
    ] = False,
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
    common = {
        "scope": scope,
        "as_of": moment,
        "max_tokens": max_tokens,
        "touch": not no_touch,
        "granularity": granularity.value,
    }
    requests = (
        parse_queries(queries, k=k, mode=mode.value, **common)
        if queries is not None
        else [_request(query or "", k, mode.value, **common)]
    )
    from memsearch.cli.render import render_search

    with _memsearch(db, model) as ms:
        outcomes = ms.search_many(requests, profile=profile, tau_days=tau)
    render_search(outcomes, fmt.value, raw=raw, explain=explain, batch=queries is not None)


def _request(query: str, k: int | None, mode: str, **common: Any) -> SearchRequest:
    from memsearch.retrieval.pipeline import SearchRequest

    return SearchRequest(query=query, k=k, mode=mode, **common)


def parse_queries(source: str, *, k: int | None, mode: str, **common: Any) -> list[SearchRequest]:
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
        if line_k is not None and (isinstance(line_k, bool) or not isinstance(line_k, int)):
            raise ImportLineError(name, number, f"k must be a whole number, not {line_k!r}")
        try:
            requests.append(_request(obj["query"], line_k, obj.get("mode", mode), **common))
        except InvalidInputError as error:
            raise ImportLineError(name, number, str(error)) from None
    if not requests:
        raise InvalidInputError(f"{name} has no queries")
    return requests


def _resolve_ref(ms: Memsearch, ref: str, by_key: bool) -> Any:
    return ms.get(_ref(ref, by_key))


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
            count = ms.reindex(progress=lambda done, total: bar.update(task, completed=done, total=total))
        model_name = ms.encoder().info.name
    messages.print(f"re-embedded {count} memories with {model_name}", markup=False)


@app.command("set")
def set_(
    ref: Annotated[str, typer.Argument(help="The memory's id, or its key.")],
    importance: Annotated[float | None, typer.Option("--importance", help="0 to 1.")] = None,
    priority: Annotated[float | None, typer.Option("--priority", help="1 to 2.")] = None,
    memory_score: Annotated[float | None, typer.Option("--memory-score", help="Quality score, 0 to 1.")] = None,
    derived_score: Annotated[
        bool, typer.Option("--derived-score", help="Go back to the score derived from importance and use.")
    ] = False,
    project: Annotated[str | None, typer.Option("--project", help="Move it to this project.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Move it to this namespace.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Replace its tags (repeatable).")] = None,
    key: Annotated[bool, typer.Option("--key", help="Read REF as a key even if it is a number.")] = False,
    fmt: FormatOption = Format.table,
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
        render_memories([ms.update(_ref(ref, key), **changes)], fmt.value, single=True)


def _ref(ref: str, by_key: bool) -> int | str:
    return ref if by_key or not ref.isdigit() else int(ref)


def _set_pinned(refs: list[str], by_key: bool, db: Path | None, pinned: bool) -> None:
    with _memsearch(db) as ms:
        ids = [ms.update(_ref(ref, by_key), pinned=pinned).id for ref in refs]
    messages.print(f"{'pinned' if pinned else 'unpinned'} {', '.join(map(str, ids))}", markup=False)


@app.command()
def pin(
    refs: Annotated[list[str], typer.Argument(help="Ids or keys.")],
    key: Annotated[bool, typer.Option("--key", help="Read every REF as a key.")] = False,
    db: DbOption = None,
) -> None:
    """Pin memories (boosted by profiles that score pins; never hidden as superseded)."""
    _set_pinned(refs, key, db, True)


@app.command()
def unpin(
    refs: Annotated[list[str], typer.Argument(help="Ids or keys.")],
    key: Annotated[bool, typer.Option("--key", help="Read every REF as a key.")] = False,
    db: DbOption = None,
) -> None:
    """Unpin memories."""
    _set_pinned(refs, key, db, False)


@app.command()
def consolidate(
    duplicate: Annotated[
        float, typer.Option("--duplicate", help="Cosine at which the older memory is superseded.")
    ] = 0.95,
    related: Annotated[float, typer.Option("--related", help="Cosine at which memories join a group.")] = 0.80,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")] = False,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Mark older near-duplicates superseded by the newest one and group related memories."""
    from memsearch.cli.render import render_consolidation

    with _memsearch(db) as ms:
        result = ms.consolidate(duplicate=duplicate, related=related, dry_run=dry_run)
        render_consolidation(result, ms.store().get_many(list(result.superseded)), fmt.value, dry_run=dry_run)


profiles_app = typer.Typer(
    help="The ranking profiles: `memsearch profiles` lists them, `memsearch profiles show NAME` prints one.",
    invoke_without_command=True,
)
app.add_typer(profiles_app, name="profiles")


@profiles_app.callback()
def profiles_list(context: typer.Context, fmt: FormatOption = Format.table) -> None:
    """List the ranking profiles with a one-line summary."""
    if context.invoked_subcommand is not None:
        return
    from memsearch.cli.render import render_profiles
    from memsearch.profiles import available, load_profile

    render_profiles([(load_profile(name), path) for name, path in available().items()], fmt.value)


@profiles_app.command("show")
def profiles_show(
    name: Annotated[str, typer.Argument(help="The profile's name.")], fmt: FormatOption = Format.table
) -> None:
    """Print a profile's resolved parameters."""
    from memsearch.cli.render import render_profile
    from memsearch.profiles import available, load_profile

    render_profile(load_profile(name), available()[name], fmt.value)


@app.command()
def timeline(
    ref: Annotated[str, typer.Argument(help="The memory's id, or its key.")],
    before: Annotated[int, typer.Option("--before", "-B", help="How many memories before it.", min=0)] = 5,
    after: Annotated[int, typer.Option("--after", "-A", help="How many memories after it.", min=0)] = 5,
    key: Annotated[bool, typer.Option("--key", help="Read REF as a key even if it is a number.")] = False,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Show the turns around a memory in order (for a note: the memories around it in time)."""
    from memsearch.cli.render import render_timeline

    with _memsearch(db) as ms:
        memory = ms.get(_ref(ref, key))
        render_timeline(ms.store().around(memory, before, after), memory.id, fmt.value)


class DatasetFormat(StrEnum):
    locomo = "locomo"
    longmemeval = "longmemeval"


class ReportFormat(StrEnum):
    table = "table"
    json = "json"


@app.command("eval")
def eval_(
    dataset: Annotated[Path, typer.Argument(help="A LoCoMo or LongMemEval JSON file.", dir_okay=False)],
    dataset_format: Annotated[DatasetFormat, typer.Option("--format", "-f", help="The dataset's format.")],
    profile: Annotated[
        list[str] | None, typer.Option("--profile", "-p", help="A profile to measure (repeatable). Default: all.")
    ] = None,
    mode: Annotated[list[Mode] | None, typer.Option("--mode", "-m", help="A mode (repeatable). Default: auto.")] = None,
    granularity: Annotated[
        list[Granularity] | None,
        typer.Option("--granularity", "-g", help="turn and/or session (repeatable). Default: both."),
    ] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="Also run the plain BM25 baseline.")
    ] = True,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Only the first N conversations (or questions).", min=1)
    ] = None,
    output: Annotated[
        ReportFormat, typer.Option("--output", "-o", help="table, or json for machines.")
    ] = ReportFormat.table,
    model: ModelOption = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Measure on this postgresql:// store (empty; emptied after each conversation)."),
    ] = None,
) -> None:
    """Measure retrieval on a benchmark: Recall@k and NDCG@k per category, latency, side by side."""
    from memsearch.eval.report import render_report
    from memsearch.eval.runner import run_eval
    from memsearch.profiles import available

    if not dataset.is_file():
        raise InvalidInputError(f"cannot read {dataset}: no such file")
    names = profile or list(available())
    with _progress("conversations", 2) as bar:
        task = bar.add_task("conversations", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"eval {label}")

        report = run_eval(
            dataset,
            fmt=dataset_format.value,
            profiles=names,
            modes=[m.value for m in mode or [Mode.auto]],
            granularities=[g.value for g in granularity or [Granularity.turn, Granularity.session]],
            baselines=baseline,
            limit=limit,
            encoder=_encoder_for(model),
            progress=progress,
            db=db,
        )
    render_report(report, output.value)


def _encoder_for(model: str | None) -> Any:
    from memsearch.embedding import load_encoder, resolve_model

    return load_encoder(resolve_model(model))


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
    """The console entry point. It ends the process without the interpreter's teardown, which
    after onnxruntime and numpy costs a tenth of a second on every call; every store was closed
    by then and the output is flushed here."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as stop:
        code = stop.code
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
    from memsearch.store.copy import copy_between

    count = copy_between(source, destination)
    messages.print(f"copied {count} {'memory' if count == 1 else 'memories'}", markup=False)
