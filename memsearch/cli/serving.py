"""The long-running servers over one warm process: `memsearch mcp` (MCP, stdio or HTTP) and
`memsearch serve` (the HTTP JSON API)."""

from typing import Annotated

import typer

from memsearch.cli.consoles import messages
from memsearch.cli.options import (
    DbOption,
    ModelOption,
)


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
