"""The options several commands share, declared once, and their choices (the library's tuples
as the Enums Typer takes choices from).

No `from __future__ import annotations` here or in a command module: Typer reads each command's
signature, and these aliases must be objects there.
"""

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer

from memsearch.choices import (
    BENCHMARK_FORMATS,
    GRANULARITIES,
    IMPORT_FORMATS,
    MODES,
    OUTPUT_FORMATS,
    RERANK_METHODS,
)
from memsearch.cli.consoles import COLOR_CHOICES
from memsearch.operations import SCOPE_FIELDS, Field
from memsearch.timeutil import RELATIVE_EXAMPLES

if TYPE_CHECKING:
    from memsearch.store import Scope


def _choice(name: str, values: Sequence[str]) -> Any:
    """An option type whose values are the library's tuple (Typer takes choices from an Enum)."""
    return StrEnum(name, [(value, value) for value in values])


SHELLS = ("bash", "zsh", "fish")
PROGRESS_STYLES = ("auto", "bar", "plain", "json", "none")
if TYPE_CHECKING:  # to the type checker the options are the strings the library takes
    Mode: TypeAlias = str
    RerankMethod: TypeAlias = str
    Granularity: TypeAlias = str
    Format: TypeAlias = str
    ImportFormat: TypeAlias = str
    DatasetFormat: TypeAlias = str
    ReportFormat: TypeAlias = str
    Shell: TypeAlias = str
    Color: TypeAlias = str
    ProgressStyle: TypeAlias = str
else:
    Mode = _choice("Mode", MODES)
    RerankMethod = _choice("RerankMethod", RERANK_METHODS)
    Granularity = _choice("Granularity", GRANULARITIES)
    Format = _choice("Format", OUTPUT_FORMATS)
    ImportFormat = _choice("ImportFormat", IMPORT_FORMATS)
    DatasetFormat = _choice("DatasetFormat", BENCHMARK_FORMATS)
    ReportFormat = _choice("ReportFormat", ("table", "json"))
    Shell = _choice("Shell", SHELLS)
    Color = _choice("Color", COLOR_CHOICES)
    ProgressStyle = _choice("ProgressStyle", PROGRESS_STYLES)

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


# -- the filter options: one per scope field of the operations (memsearch.operations.SCOPE_FIELDS) --

# Their help: the operations describe JSON fields (a list of tags); here each is a repeatable option.
FILTER_HELP = {
    "project": "Only memories of this project.",
    "namespace": "Only memories of this namespace.",
    "tags": "Only memories with this tag (repeat: all of them).",
    "since": f"Only memories created at or after this time: ISO-8601, or {RELATIVE_EXAMPLES}.",
    "until": f"Only memories created at or before this time: ISO-8601, or {RELATIVE_EXAMPLES}.",
    "kinds": "Only memories of this kind (repeat: any of them).",
    "conversation": "Only memories of this conversation.",
    "roles": "Only memories of this role or speaker (repeat: any of them).",
    "sessions": "Only memories of this session (repeat: any of them).",
}
_FILTER_ALIASES = {"tags": ("-t",)}
assert set(FILTER_HELP) == {f.name for f in SCOPE_FIELDS}, "a scope field without its option's help"


@dataclass(frozen=True)
class Filters:
    """The filter options a command was given, as the library's scope fields (`scope_from_fields`)."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> "Filters":
        """From the options' values by scope field: an absent or empty option (a repeatable one
        gives []; an empty --project, set in the config say, means every project) is left out."""
        return cls({name: _plain(value) for name, value in values.items() if value not in (None, "", [], ())})

    @property
    def given(self) -> bool:
        return bool(self.fields)

    def scope(self) -> "Scope":
        """The scope they name (relative times against now)."""
        from memsearch.retrieval.request import scope_from_fields

        return scope_from_fields(**self.fields)


NO_FILTERS = Filters()


def _plain(value: Any) -> Any:
    """An option's value as the library takes it: choices (Enums) as their strings."""
    return [str(item) for item in value] if isinstance(value, list) else value


def _filter_parameter(scope_field: Field) -> inspect.Parameter:
    """The command-line option of one scope field: --tag for `tags`, a choice for `kinds`."""
    name = scope_field.query_name
    item: Any = _choice(name.title(), scope_field.choices) if scope_field.choices else str
    annotation: Any = list[item] | None if scope_field.type == "array" else str | None
    option = typer.Option(f"--{name}", *_FILTER_ALIASES.get(scope_field.name, ()), help=FILTER_HELP[scope_field.name])
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation=Annotated[annotation, option])  # fmt: skip


FILTER_PARAMETERS = tuple(_filter_parameter(f) for f in SCOPE_FIELDS)
_FIELD_OF_PARAMETER = {p.name: f.name for p, f in zip(FILTER_PARAMETERS, SCOPE_FIELDS, strict=True)}


def with_filters(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with every filter option (--project, --tag, --since, …) in the place of its
    `filters: Filters` parameter, which it is called with: the options are declared once, here,
    and Typer reads them from the signature this gives the command."""
    signature = inspect.signature(command)
    parameters = list(signature.parameters.values())
    at = [p.name for p in parameters].index("filters")

    @functools.wraps(command)
    def with_options(*args: Any, **kwargs: Any) -> None:
        given = {_FIELD_OF_PARAMETER[name]: kwargs.pop(name, None) for name in _FIELD_OF_PARAMETER}
        command(*args, filters=Filters.from_options(given), **kwargs)

    shown = signature.replace(parameters=[*parameters[:at], *FILTER_PARAMETERS, *parameters[at + 1 :]])
    with_options.__signature__ = shown  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in shown.parameters.values()}
    with_options.__annotations__["return"] = signature.return_annotation
    return with_options
