"""Search (in this process or through a running `memsearch serve` of the same store) and the
ranking profiles (`memsearch profiles`, `memsearch profiles show NAME`)."""

from typing import Annotated

import typer

from memsearch.cli.options import (
    NO_FILTERS,
    DbOption,
    Filters,
    FormatOption,
    Granularity,
    Mode,
    ModelOption,
    NoServerOption,
    ProfileOption,
    RerankMethod,
    ServerOption,
    with_filters,
)
from memsearch.cli.running import open_memsearch, read_source, server_for, through
from memsearch.errors import InvalidInputError
from memsearch.timeutil import RELATIVE_EXAMPLES


@with_filters
def search(
    query: Annotated[str | None, typer.Argument(help="What to search for.")] = None,
    k: Annotated[
        int | None,
        typer.Option("--limit", "-k", "-n", help="How many results (default: the profile's).", min=1, max=1000),
    ] = None,
    mode: Annotated[
        Mode, typer.Option("--mode", "-m", help="auto picks vector or hybrid per query and says why.")
    ] = "auto",
    min_score: Annotated[
        float | None,
        typer.Option(
            "--min-score", help="Keep only results scoring at least this (the score column); see --raw for the rest."
        ),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Also show every candidate before filtering, with why it was dropped.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each result's leg ranks, fusion, factors and final score.")
    ] = False,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of", help=f"The 'now' for time decay and relative times: ISO-8601, or {RELATIVE_EXAMPLES} ago."
        ),
    ] = None,
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
    filters: Filters = NO_FILTERS,
    fmt: FormatOption = "table",
    db: DbOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    no_server: NoServerOption = False,
) -> None:
    """Search memories (through a running `memsearch serve` of the same store when there is one)."""
    from memsearch.cli.results import render_search
    from memsearch.retrieval.request import request_from_fields

    if (query is None) == (queries is None):
        raise InvalidInputError("give a QUERY or --queries FILE (one of them)")
    # Every option is checked (and relative times resolved) here, whoever runs the search.
    template = request_from_fields(
        query if query is not None else "(queries)",
        k=k,
        min_score=min_score,
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
        **filters.fields,
    )
    # The request refused a query over the limit: a single query may go to a server as it is.
    remote = server_for(db, server, model, no_server=no_server, writes=False) if query is not None else None
    if remote is not None:
        document = through(remote, lambda client: client.search(template, raw=raw, explain=True).to_dict())
        if document is not None:
            render_search([document], str(fmt), raw=raw, explain=explain, batch=False, per_file=per_file)
            return
    with open_memsearch(db, model) as ms:
        if queries is not None:
            content, source = read_source(queries)
            defaults = {name: value for name, value in vars(template).items() if name != "query"}
            requests = ms.parse_queries(content, source=source, **defaults)
        else:
            requests = [template]
        outcomes = ms.search_many(requests)
        documents = [outcome.to_dict(raw=raw) for outcome in outcomes]  # the dropped candidates' rows: read here
    render_search(documents, str(fmt), raw=raw, explain=explain, batch=queries is not None, per_file=per_file)


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
