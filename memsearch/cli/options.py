"""The options several commands share, declared once, and their choices (the library's tuples
as the Enums Typer takes choices from).

No `from __future__ import annotations` here or in a command module: Typer reads each command's
signature, and these aliases must be objects there.
"""

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer

from memsearch.choices import (
    BENCHMARK_FORMATS,
    GRANULARITIES,
    IMPORT_FORMATS,
    KINDS,
    MODES,
    OUTPUT_FORMATS,
    RERANK_METHODS,
)
from memsearch.cli.consoles import COLOR_CHOICES
from memsearch.timeutil import RELATIVE_EXAMPLES


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
    Color: TypeAlias = str
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
    Color = _choice("Color", COLOR_CHOICES)

DB_HELP = (
    "Store file, or a postgresql://user@host/db URL. "
    "Default: $MEMSEARCH_DB, else db in config.toml, else $MEMSEARCH_HOME/memsearch.db, else the user data dir."
)
DbOption = Annotated[
    str | None,  # a path or a postgresql:// URL (a Path would fold the URL's "//")
    typer.Option("--db", help=DB_HELP),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help=(
            "A model by name (minilm, e5-small, mpnet, gemma) or a sentence-transformers model directory. "
            "Default: $MEMSEARCH_MODEL, else the store's own model, else the bundled all-MiniLM-L6-v2 (minilm)."
        ),
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
    typer.Option("--since", help=f"Only memories created at or after this time: ISO-8601, or {RELATIVE_EXAMPLES}."),
]
UntilOption = Annotated[
    str | None,
    typer.Option("--until", help=f"Only memories created at or before this time: ISO-8601, or {RELATIVE_EXAMPLES}."),
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


def filters(
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
