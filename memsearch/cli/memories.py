"""Commands on memories: add, import, get, list, tags, delete, set, edit, pin, unpin, timeline, export.

Each parses, makes one library call (in this process, or for add and import through a running
server of the same store) and renders; library modules are imported inside the commands, so
`--help` and the read commands stay fast.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsearch.cli.consoles import messages
from memsearch.cli.options import (
    NO_FILTERS,
    DbOption,
    Filters,
    FormatOption,
    KeyOption,
    KeysOption,
    ModelOption,
    NoServerOption,
    RefArgument,
    RefsArgument,
    ServerOption,
    Values,
    with_fields,
    with_filters,
)
from memsearch.cli.progress import ProgressBar
from memsearch.cli.running import open_memsearch, read_source, server_for, through
from memsearch.errors import InvalidInputError
from memsearch.fields import IMPORTANCE, PRIORITY
from memsearch.operations import ADD, IMPORT, TIMELINE

if TYPE_CHECKING:
    from memsearch.api import Memsearch


@with_fields(tuple(f for f in ADD.fields if f.name != "metadata"))
def add(
    fields: Values,
    meta: Annotated[list[str] | None, typer.Option("--meta", help="Metadata as key=value (repeatable).")] = None,
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Add one memory and print its id (a profile with ingest dedup may find it is a near-duplicate);
    a TEXT of - is read from stdin."""
    if fields["text"] == "-":
        fields["text"] = sys.stdin.read()
    metadata: dict[str, str] = {}
    for item in meta or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"--meta {item!r} is not key=value")
        metadata[name.strip()] = value
    request = ADD.request({**fields, "metadata": metadata or None})
    remote = server_for(db, server, model, no_server=no_server, writes=True)
    document = None
    if remote is not None:
        document = through(
            remote,
            lambda client: client.add(request.memory, replace=request.replace, profile=request.profile).to_dict(),
        )
    if document is None:
        with open_memsearch(db, model) as ms:
            document = ADD.document(request, ADD.run(ms, request))
    if not document["stored"]:
        messages().print(
            f"not stored: a near-duplicate of id {document['duplicate_of']} (cosine {document['similarity']:.3f} "
            f"≥ {document['threshold']:g}, profile {request.profile}); its id is printed",
            markup=False,
        )
    typer.echo(document["id"])


@with_fields(tuple(f for f in IMPORT.fields if f.name != "source"))
def import_(
    file: Annotated[str, typer.Argument(help="The file to import, or - for stdin.")],
    fields: Values,
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Import memories or conversations: every one is stored, or none is (near-duplicates are reported).
    A JSONL file goes through a running `memsearch serve` of the same store when there is one."""
    from memsearch.api import KIND_NAMES

    content, source = read_source(file)
    request = IMPORT.request({**fields, "source": source}, content=content)
    document = None
    # Text that is not valid Unicode (invalid UTF-8 on stdin) is left to the library here, which
    # names its line; the server would only see the bytes it was sent.
    from memsearch.cli.running import is_unicode

    sendable = request["format"] == "jsonl" and content.strip() and is_unicode(content)
    remote = server_for(db, server, model, no_server=no_server, writes=True) if sendable else None
    if remote is not None:
        document = through(
            remote,
            lambda client: client.import_text(
                content, source=source, fmt=request["format"], sessions=request["sessions"],
                facets=request["facets"], replace=request["replace"], profile=request["profile"],
                conversation=request["conversation"],
            ).to_dict(),
        )  # fmt: skip
    if document is None:
        with open_memsearch(db, model) as ms, ProgressBar("embedding") as progress:
            document = IMPORT.document(request, IMPORT.run(ms, {**request, "progress": progress}))
    counts, duplicates = document["counts"], document["duplicates"]
    if ignored := document.get("ignored_fields"):
        messages().print(
            f"ignored {', '.join(ignored)}: fields of a read command that import does not store", markup=False
        )
    if repeats := document.get("repeats"):
        messages().print(f"{repeats} repeated record(s) of a memory (same id and fields) stored once", markup=False)
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


def get(ref: RefArgument, key: KeyOption = False, fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show one memory."""
    from memsearch.cli.render import render_memories

    with open_memsearch(db) as ms:
        render_memories(ms.get_many([ref], by_key=key), str(fmt), single=True)


@with_filters
def list_(
    limit: Annotated[int, typer.Option("--limit", "-n", "-k", help="At most this many (0: all).", min=0)] = 20,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many first.", min=0)] = 0,
    every: Annotated[bool, typer.Option("--all", help="Every memory in scope (as --limit 0).")] = False,
    filters: Filters = NO_FILTERS,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """List memories, newest first; says on stderr when the limit left some out."""
    from memsearch.cli.render import render_memories

    scope = filters.scope()
    limit = 0 if every else limit
    with open_memsearch(db) as ms:
        memories = ms.list(scope, limit=limit or None, offset=offset)
        total = ms.count(scope) if limit and len(memories) == limit else None
        render_memories(memories, str(fmt))
    if total is not None and total > offset + len(memories):
        shown = f"{offset + 1}–{offset + len(memories)}" if offset else str(len(memories))
        messages().print(f"{shown} of {total} memories (--limit N or --all for more)", markup=False)


@with_filters
def delete(
    refs: Annotated[
        list[str] | None,
        typer.Argument(help="Ids or keys of the memories to delete; none: every memory the filters match."),
    ] = None,
    key: KeysOption = False,
    filters: Filters = NO_FILTERS,
    every: Annotated[
        bool, typer.Option("--all", help="Delete every memory: needed when no id, key or filter is given.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be deleted (as list would), delete nothing.")
    ] = False,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """Delete memories by id or key, or every one the filters match: all of them, or none if any
    is not found. A turn's session is rebuilt without it."""
    from memsearch.cli.render import render_memories

    with open_memsearch(db) as ms:
        memories = ms.delete_matching(
            refs or None, filters.scope() if filters.given else None, by_key=key, everything=every, dry_run=dry_run
        )
    ids = [memory.id for memory in memories]
    count = f"{len(ids):,} {'memory' if len(ids) == 1 else 'memories'}"
    if dry_run:
        render_memories(memories, str(fmt))
        messages().print(f"would delete {count} (--dry-run: nothing was deleted)", markup=False)
    elif not ids:
        messages().print("no memory matches; nothing was deleted", markup=False)
    else:  # the ids, unless there are too many to read
        shown = f": {', '.join(map(str, ids))}" if len(ids) <= SHOWN_IDS else ""
        messages().print(f"deleted {count}{shown}", markup=False)


SHOWN_IDS = 50  # a delete names at most this many ids


@with_fields((IMPORTANCE, PRIORITY), into="scores", defaults={"importance": None, "priority": None})
def set_(
    ref: RefArgument,
    scores: Values,
    memory_score: Annotated[float | None, typer.Option("--memory-score", help="Quality score, 0 to 1.")] = None,
    derived_score: Annotated[
        bool, typer.Option("--derived-score", help="Go back to the score derived from importance and use.")
    ] = False,
    project: Annotated[
        str | None, typer.Option("--project", help="Move it to this project ('': to no project).")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Move it to this namespace ('': to none).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Replace its tags (repeatable).")] = None,
    text: Annotated[
        str | None,
        typer.Option("--text", help="Replace its text (- reads it from stdin); embedded and indexed anew."),
    ] = None,
    key: KeyOption = False,
    fmt: FormatOption = "table",
    db: DbOption = None,
) -> None:
    """Change a memory's text, scoring or scope fields and show it (see also `memsearch edit`)."""
    from memsearch.cli.render import render_memories

    changes: dict[str, Any] = {
        name: value
        for name, value in (
            *scores.items(), ("memory_score", memory_score),
            ("project", project), ("namespace", namespace), ("tags", tag),
            ("text", sys.stdin.read() if text == "-" else text),
        )
        if value is not None
    }  # fmt: skip
    for name in ("project", "namespace"):  # '' takes it out of its project or namespace
        if changes.get(name) == "":
            changes[name] = None
    if derived_score:
        if memory_score is not None:
            raise InvalidInputError("give --memory-score or --derived-score, not both")
        changes["memory_score"] = None
    if not changes:
        raise InvalidInputError("nothing to set; see `memsearch set --help`")
    with open_memsearch(db) as ms:
        render_memories([ms.update(ms.resolve(ref, by_key=key), **changes)], str(fmt), single=True)


def edit(ref: RefArgument, key: KeyOption = False, fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Edit a memory's text in $VISUAL, else $EDITOR, else vi (in a terminal), and show it; saved
    unchanged or empty, nothing changes. If the memory changed meanwhile, nothing is written and
    the edit is kept in a file. A section of an indexed note is edited in its file, opened at its
    line, which is then indexed again (the file is the truth: no store text to conflict with)."""
    from memsearch.cli.render import render_memories
    from memsearch.errors import EditConflictError
    from memsearch.sections import section_of

    with open_memsearch(db) as ms:
        memory = ms.get(ms.resolve(ref, by_key=key))
        if (section := section_of(memory)) is not None:
            _edit_section(ms, *section, fmt=str(fmt))
            return
        name = f"memsearch-{memory.id}.txt"
        text = _edited(memory.text, name)
        if not text.strip():
            messages().print("the text is empty; nothing changed", markup=False)
        elif text == memory.text:
            messages().print("the text is unchanged; nothing changed", markup=False)
        else:
            try:
                updated = ms.update(memory.id, text=text, expected_text=memory.text)
            except EditConflictError:
                raise EditConflictError(memory.id, kept_in=str(_kept(text, name))) from None
            render_memories([updated], str(fmt), single=True)


def _edited(text: str, name: str) -> str:
    """`text` as the user's editor leaves it, edited in a file only they can read, in a folder
    of its own (removed after); a final line break the editor added is taken off again."""
    import tempfile

    from memsearch.errors import MemsearchError

    with tempfile.TemporaryDirectory(prefix="memsearch-edit-") as folder:  # made 0700
        path = Path(folder) / name
        _write_private(path, text)
        _run_editor([str(path)], "nothing changed")
        try:
            edited = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:  # the editor removed it, or saved another encoding
            raise MemsearchError(f"cannot read the edited text: {error}; nothing changed") from None
    for ending in ("\r\n", "\n"):
        if edited.endswith(ending) and not text.endswith(ending):
            return edited.removesuffix(ending)
    return edited


def _run_editor(arguments: list[str], unchanged: str) -> None:
    """Run $VISUAL, else $EDITOR, else vi (only in a terminal: no editor and no terminal is a
    MemsearchError before anything is opened) on the arguments and wait for it; an editor that
    cannot run or fails is a MemsearchError ending with `unchanged` (what that left as it was)."""
    import os
    import shlex
    import subprocess

    from memsearch.errors import MemsearchError

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor and os.name == "nt":
        editor = "notepad"
    elif not editor:
        if not (_is_terminal(sys.stdin) and _is_terminal(sys.stdout)):  # vi would wait for one forever
            raise MemsearchError("no editor: set $VISUAL or $EDITOR (vi needs a terminal, and there is none)")
        editor = "vi"
    try:
        finished = subprocess.run([*shlex.split(editor, posix=os.name != "nt"), *arguments], check=False)
    except (OSError, ValueError) as error:  # not found, not executable, or unbalanced quotes
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise MemsearchError(f"cannot run the editor {editor!r}: {reason}; {unchanged}") from None
    if finished.returncode != 0:
        raise MemsearchError(f"the editor {editor!r} exited with status {finished.returncode}; {unchanged}")


def _edit_section(ms: "Memsearch", path: str, line: int, *, fmt: str) -> None:
    """A note's section is its file's: the editor opens the file at the section's line (`+LINE`,
    as vi, nano and emacs take it), then the file's folder is indexed again, as `index` does."""
    from memsearch.cli.render import render_index, shown_path
    from memsearch.errors import MemsearchError

    if not Path(path).is_file():
        raise MemsearchError(f"{shown_path(path)} is gone; `memsearch index` removes its sections")
    _run_editor([f"+{line}", path], "the file was not indexed again")
    render_index(ms.index_changed([path]), "json" if fmt == "json" else "table")


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def _write_private(path: Path, text: str) -> None:
    """A new file only its owner can read (whatever the umask), holding `text`."""
    import os

    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as file:
        file.write(text)


def _kept(text: str, name: str) -> Path:
    """An edit that could not be written, kept in a new folder only the user can read; its path."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="memsearch-edit-")) / name  # made 0700, and left for the user
    _write_private(path, text)
    return path


def _set_pinned(refs: list[str], by_key: bool, db: str | None, pinned: bool) -> None:
    with open_memsearch(db) as ms:
        ids = ms.set_pinned([ms.resolve(ref, by_key=by_key) for ref in refs], pinned)
    messages().print(f"{'pinned' if pinned else 'unpinned'} {', '.join(map(str, ids))}", markup=False)


@with_filters
def tags(filters: Filters = NO_FILTERS, fmt: FormatOption = "table", db: DbOption = None) -> None:
    """List the tags of the memories (in scope) with how many have each, most used first."""
    from memsearch.cli.render import render_tags

    with open_memsearch(db) as ms:
        render_tags(ms.tags(filters.scope()), str(fmt))


def pin(refs: RefsArgument, key: KeysOption = False, db: DbOption = None) -> None:
    """Pin memories (boosted by profiles that score pins; never hidden as superseded)."""
    _set_pinned(refs, key, db, True)


def unpin(refs: RefsArgument, key: KeysOption = False, db: DbOption = None) -> None:
    """Unpin memories."""
    _set_pinned(refs, key, db, False)


@with_fields(TIMELINE.fields)
def timeline(fields: Values, key: KeyOption = False, fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show the turns around a memory in order (for a note: the memories around it in time)."""
    from memsearch.cli.render import render_timeline

    with open_memsearch(db) as ms:
        # REF as typed: digits are an id, unless --key
        request = {**TIMELINE.request(fields), "ref": ms.resolve(fields["ref"], by_key=key)}
        render_timeline(TIMELINE.run(ms, request), str(fmt))


@with_filters
def export(
    filters: Filters = NO_FILTERS,
    db: DbOption = None,
) -> None:
    """Print memories as JSONL that `memsearch import` stores again as they are (text, key, time,
    scoring and scope fields, tags, metadata, conversation place and views; not ids or access
    counts, which `memsearch copy` keeps), oldest first."""
    import json

    scope = filters.scope()
    with open_memsearch(db) as ms:
        for record in ms.export(scope):
            sys.stdout.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
