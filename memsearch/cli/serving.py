"""The long-running servers over one warm process: `memsearch mcp` (MCP, stdio or HTTP) and
`memsearch serve` (the HTTP JSON API), and `memsearch token`, which gives their bearer token."""

from typing import Annotated

import typer

from memsearch.cli.consoles import messages
from memsearch.cli.options import (
    DbOption,
    ModelOption,
)

NoTokenOption = Annotated[
    bool,
    typer.Option(
        "--no-token",
        help="Require no bearer token: every user of this machine can then read and change the store "
        "(loopback only). Default: the token you set ($MEMSEARCH_API_KEY, api_key), else one made at start.",
    ),
]


def mcp(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on loopback instead of stdio.")] = False,
    port: Annotated[int, typer.Option("--port", help="The port for --http (0: any free).", min=0, max=65535)] = 8766,
    no_token: NoTokenOption = False,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Run an MCP server (stdio by default) with the tools mem_search, mem_add, mem_get, mem_timeline,
    mem_delete and mem_stats over one warm process. Over --http a bearer token is required
    (`memsearch token --mcp` prints it)."""
    from memsearch.server.mcp import run_mcp

    run_mcp(db, model, http=http, port=port, no_token=no_token)


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
    no_token: NoTokenOption = False,
    idle_exit: Annotated[
        int | None,
        typer.Option(
            "--idle-exit",
            metavar="SECONDS",
            help="Exit (as on SIGTERM) once no request has come for this long. Default: run until stopped.",
            min=1,
        ),
    ] = None,
    db: DbOption = None,
    model: ModelOption = None,
) -> None:
    """Serve the HTTP JSON API over one warm process (search, add, import, get, delete, timeline).
    Every request needs the bearer token: $MEMSEARCH_API_KEY or api_key in config.toml, else one
    made at start (`memsearch token` prints it). SIGTERM or Ctrl-C finishes in-flight requests and exits."""
    from memsearch.server.http import run_serve

    run_serve(
        db,
        model,
        host=host,
        port=port,
        allowed_hosts=allowed_host or (),
        cors_origins=cors_origin or (),
        no_token=no_token,
        announce=lambda line: messages().print(line, markup=False),
        idle_exit=idle_exit,
    )


def token(
    mcp: Annotated[bool, typer.Option("--mcp", help="The token of `memsearch mcp --http` instead.")] = False,
    db: DbOption = None,
) -> None:
    """Print the bearer token of the running `memsearch serve` of the store (for curl or an agent:
    `-H "Authorization: Bearer $(memsearch token)"`), from its discovery file, which only you can read."""
    from memsearch.config import configured_token
    from memsearch.discovery import running_token
    from memsearch.errors import MemsearchError
    from memsearch.paths import resolve_db_path

    advertised, made = running_token(resolve_db_path(db), "mcp" if mcp else "serve")
    value = made or (configured_token() if advertised.authenticated else None)
    if value is None:
        raise MemsearchError(
            f"the server at {advertised.url} takes no token (started with --no-token)"
            if not advertised.authenticated
            else f"the server at {advertised.url} was given its token; this process has none (MEMSEARCH_API_KEY)"
        )
    typer.echo(value)
