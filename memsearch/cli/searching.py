"""Search (in this process or through a running `memsearch serve` of the same store) and the
ranking profiles (`memsearch profiles`, `memsearch profiles show NAME`)."""

from typing import Annotated

import typer

from memsearch.cli.options import (
    DbOption,
    FormatOption,
    ModelOption,
    NoServerOption,
    ServerOption,
    Values,
    with_fields,
)
from memsearch.cli.running import open_memsearch, read_source, server_for, through
from memsearch.errors import InvalidInputError
from memsearch.operations import SEARCH


@with_fields(SEARCH.fields, optional=("query",))
def search(
    fields: Values,
    per_file: Annotated[
        int | None,
        typer.Option(
            "--per-file",
            metavar="N",
            help="Show note sections a row per file, its best N under it (0: a row per section). "
            "Default: 3 in a terminal, a row per section elsewhere; JSON gets `groups`.",
            min=0,
        ),
    ] = None,
    queries: Annotated[
        str | None,
        typer.Option("--queries", help='A JSONL file of {"query": …} objects (or - for stdin): one result set each.'),
    ] = None,
    fmt: FormatOption = "table",
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Search memories (through a running `memsearch serve` of the same store when there is one)."""
    from memsearch.cli.results import render_search

    query = fields.pop("query", None)
    if (query is None) == (queries is None):
        raise InvalidInputError("give a QUERY or --queries FILE (one of them)")
    # The search's request: every option checked (and relative times resolved) once, here.
    asked = SEARCH.request({**fields, "query": query if query is not None else "(queries)"})
    # The request refused a query over the limit: a single query may go to a server as it is.
    remote = server_for(db, server, model, no_server=no_server, writes=False) if query is not None else None
    if remote is not None:
        document = through(remote, lambda client: client.search(asked.request, raw=asked.raw, explain=True).to_dict())
        if document is not None:
            render_search([document], str(fmt), raw=asked.raw, explain=asked.explain, batch=False, per_file=per_file)
            return
    with open_memsearch(db, model) as ms:
        if queries is not None:
            content, source = read_source(queries)
            defaults = {name: value for name, value in vars(asked.request).items() if name != "query"}
            outcomes = ms.search_many(ms.parse_queries(content, source=source, **defaults))
        else:
            outcomes = [SEARCH.run(ms, asked)]
        documents = [outcome.to_dict(raw=asked.raw) for outcome in outcomes]  # the dropped candidates' rows: read here
    render_search(
        documents, str(fmt), raw=asked.raw, explain=asked.explain, batch=queries is not None, per_file=per_file
    )


profiles_app = typer.Typer(
    help="The ranking profiles: `memsearch profiles` lists them, `memsearch profiles show NAME` prints one.",
    invoke_without_command=True,
)


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
