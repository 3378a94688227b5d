"""The command of an operation that has no command written for it (memsearch.operations.OPERATIONS):
its options made from the operation's fields, its answer printed as the JSON document the HTTP API
and the MCP tool give. A command written by hand (memories, searching, admin) renders its own."""

import json
from typing import Any

import typer

from memsearch.cli.options import DbOption, Values, with_fields
from memsearch.cli.running import open_memsearch
from memsearch.operations import OPERATIONS, Operation

# The operations whose command is written by hand, in another module of the CLI.
WRITTEN = ("search", "add", "import", "get", "delete", "timeline", "stats")
GENERATED = tuple(operation.name for operation in OPERATIONS if operation.name not in WRITTEN)


def command_of(operation: Operation) -> Any:
    @with_fields(operation.fields)
    def command(fields: Values, db: DbOption = None) -> None:
        with open_memsearch(db) as ms:
            document = operation.answer(ms, fields)
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))

    command.__name__ = command.__qualname__ = operation.name.replace("-", "_")
    command.__doc__ = f"{operation.summary} (its JSON document)."
    return command


def __getattr__(name: str) -> Any:
    for operation in OPERATIONS:
        if operation.name == name and name in GENERATED:
            return command_of(operation)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
