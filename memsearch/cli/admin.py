"""Commands about the store as a whole: stats, path, reindex, index, consolidate, copy, config
and doctor."""

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from memsearch.cli.consoles import messages
from memsearch.cli.failures import fail
from memsearch.cli.options import (
    DbOption,
    FormatOption,
    ModelOption,
    ProgressStyle,
    ReportFormat,
)
from memsearch.cli.progress import IndexReporter, ProgressBar
from memsearch.cli.running import open_memsearch
from memsearch.errors import ExitCode, InvalidInputError

if TYPE_CHECKING:
    from memsearch.ingest.indexing import IndexOutcome


def stats(fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show what the store holds."""
    from memsearch.cli.render import render_stats

    with open_memsearch(db) as ms:
        stats = ms.stats()
    if not stats["exists"]:
        messages().print(f"no memsearch store at {stats['path']} yet; `memsearch add` or `memsearch import` creates it")
    render_stats(stats, str(fmt))


def path(db: DbOption = None) -> None:
    """Print where the store is (it need not exist yet; a URL without its password)."""
    from memsearch.paths import resolve_db_path, shown_location

    typer.echo(shown_location(resolve_db_path(db)))


def reindex(
    db: DbOption = None,
    model: ModelOption = None,
    add_model: Annotated[
        str | None,
        typer.Option(
            "--add-model",
            metavar="NAME",
            help="Keep this model's vectors too, beside the store's own: for profile legs that name it, "
            "as vector(gemma). A name or a model folder, as --model takes.",
        ),
    ] = None,
    drop_model: Annotated[
        str | None,
        typer.Option("--drop-model", metavar="NAME", help="Remove a model added with --add-model, and its vectors."),
    ] = None,
) -> None:
    """Re-embed every memory with --model (which becomes the store's model), else with the store's own;
    or embed every memory with a second model kept beside it (--add-model), or remove one (--drop-model)."""
    if sum(option is not None for option in (model, add_model, drop_model)) > 1:
        raise InvalidInputError("takes one of --model, --add-model and --drop-model")
    if drop_model is not None:
        with open_memsearch(db) as ms:
            dropped = ms.drop_model(drop_model)
        messages().print(f"dropped {dropped.name}'s vectors", markup=False)
        return
    if add_model is not None:
        with open_memsearch(db) as ms, ProgressBar("embedding") as progress:
            added = ms.add_model(add_model, progress=progress)
            count = ms.count()
        messages().print(f"embedded {count} memories with {added.name}, kept beside the store's own", markup=False)
        return
    with open_memsearch(db, model) as ms, ProgressBar("re-embedding", then="building the search index") as progress:
        count = ms.reindex(progress=progress)
        model_name = ms.model_name
    messages().print(f"re-embedded {count} memories with {model_name}", markup=False)


def index(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Folders (or files) of notes to index, whoever owns them; none: every folder indexed before, "
            "less what another user could have written.",
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
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Index, then keep the folders in step with their files until Ctrl-C (exit 0)."),
    ] = False,
    roots: Annotated[
        bool,
        typer.Option("--roots", help="List the remembered folders: their patterns, state, files and memories."),
    ] = False,
    forget: Annotated[
        list[str] | None,
        typer.Option(
            "--forget", metavar="PATH", help="Forget a remembered folder and delete its memories (repeatable)."
        ),
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Forget every remembered folder that is missing, with its memories.")
    ] = False,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format.")] = "table",
    progress: Annotated[
        ProgressStyle,
        typer.Option(
            "--progress",
            help="Progress on stderr: a bar, a plain line every few seconds, a JSON object a line, or none. "
            "auto: a bar on a terminal, else plain.",
        ),
    ] = "auto",
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Keep folders of markdown or text notes searchable: a memory per section, re-indexed incrementally.
    The folders are remembered with their patterns; `memsearch index` alone updates them all. Each
    file's sections are searchable by their words as soon as it is stored; vectors follow (Ctrl-C
    keeps what is done: the next run embeds the rest)."""
    from memsearch.cli.render import render_forgotten, render_index, render_roots

    managing = [name for name, given in (("--roots", roots), ("--forget", forget), ("--prune", prune)) if given]
    if len(managing) > 1 or (managing and (paths or include or exclude or dry_run or watch)):
        raise InvalidInputError(f"{managing[0]} takes no folder, pattern, --dry-run or --watch, and no other of them")
    if watch and dry_run:
        raise InvalidInputError("--watch writes what it finds; give --dry-run or --watch, not both")
    if roots or forget or prune:
        with open_memsearch(db) as ms:
            if roots:
                render_roots(ms.roots(), str(fmt))
            else:
                render_forgotten(ms.forget_roots(forget) if forget else ms.prune_roots(), str(fmt))
        return
    if watch:
        _watch(paths or (), include or (), exclude or (), str(fmt), db, model, str(progress))
        return
    with IndexReporter(str(progress)) as reporter:
        try:
            with open_memsearch(db, model) as ms:
                outcome = ms.index(
                    paths or (), include=include or (), exclude=exclude or (), dry_run=dry_run, on_progress=reporter
                )
        except KeyboardInterrupt:
            reporter.close()
            fail(f"interrupted: {reporter.kept()}; `memsearch index` finishes the rest", ExitCode.INTERRUPTED)
    render_index(outcome, str(fmt))


def _watch(
    paths: Sequence[str],
    include: Sequence[str],
    exclude: Sequence[str],
    fmt: str,
    db: str | None,
    model: str | None,
    progress: str,
) -> None:
    """`index --watch`: the first run's report, a line when it starts watching, then each update's
    report (a JSON line each with --format json); Ctrl-C ends it with exit 0."""
    from memsearch.cli.render import render_index, write_json

    def report(outcome: "IndexOutcome") -> None:
        if fmt == "json":
            write_json(outcome.to_dict(), compact=True)
            sys.stdout.flush()
        else:
            render_index(outcome, fmt)

    try:
        with open_memsearch(db, model) as ms, IndexReporter(progress) as reporter:
            updates = ms.watch(paths, include=include, exclude=exclude, on_progress=reporter)
            first = next(updates)
            report(first)
            watched = len(first.roots)
            messages().print(
                f"watching {watched} folder{'' if watched == 1 else 's'} for changes (Ctrl-C stops)", markup=False
            )
            for outcome in updates:
                if outcome.files or outcome.repaired:  # a change no note file saw is not worth a line
                    report(outcome)
    except KeyboardInterrupt:  # the way to stop watching: not an error
        messages().print("stopped watching", markup=False)


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

    with open_memsearch(db) as ms:
        render_consolidation(ms.consolidate(duplicate=duplicate, related=related, dry_run=dry_run), str(fmt))


def copy(
    source: Annotated[str, typer.Argument(help="The store to copy: a file or a postgresql:// URL.")],
    destination: Annotated[str, typer.Argument(help="An empty or new store: a file or a postgresql:// URL.")],
) -> None:
    """Copy every memory with its views, vectors, access counts and consolidation marks into an
    empty store (SQLite ↔ PostgreSQL), keeping ids, without re-embedding; all or nothing."""
    with open_memsearch(source) as ms, ProgressBar("building the search index") as progress:
        count = ms.copy_to(destination, progress)
    messages().print(f"copied {count} {'memory' if count == 1 else 'memories'}", markup=False)


def config(fmt: FormatOption = "table", db: DbOption = None) -> None:
    """Show the effective settings (profile, limit, format, project, db, api_key) and where each
    comes from: the config file, a MEMSEARCH_* variable, or the default. Flags beat both."""
    from memsearch.cli.render import render_config
    from memsearch.config import load_config
    from memsearch.paths import resolve_db_path

    render_config(load_config(), str(resolve_db_path(db)), str(fmt))


def doctor(fmt: FormatOption = "table", db: DbOption = None, model: ModelOption = None) -> None:
    """Check the store and the model: counts, integrity, and what would make search fail or slow.
    Exits 1 when a problem is found (warnings do not count)."""
    from memsearch.cli.render import render_doctor

    with open_memsearch(db, model) as ms:
        report = ms.doctor()
    render_doctor(report, str(fmt))
    if not report.ok:
        raise typer.Exit(ExitCode.ERROR)
