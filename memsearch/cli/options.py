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
    MODES,
    OUTPUT_FORMATS,
)
from memsearch.cli.consoles import COLOR_CHOICES
from memsearch.fields import SCOPE_FIELDS, Field

if TYPE_CHECKING:
    from memsearch.store import Scope


def _choice(name: str, values: Sequence[str]) -> Any:
    """An option type whose values are the library's tuple (Typer takes choices from an Enum)."""
    return StrEnum(name, [(value, value) for value in values])


SHELLS = ("bash", "zsh", "fish")
PROGRESS_STYLES = ("auto", "bar", "plain", "json", "none")
if TYPE_CHECKING:  # to the type checker the options are the strings the library takes
    Mode: TypeAlias = str
    Granularity: TypeAlias = str
    Format: TypeAlias = str
    DatasetFormat: TypeAlias = str
    ReportFormat: TypeAlias = str
    Shell: TypeAlias = str
    Color: TypeAlias = str
    ProgressStyle: TypeAlias = str
else:
    Mode = _choice("Mode", MODES)
    Granularity = _choice("Granularity", GRANULARITIES)
    Format = _choice("Format", OUTPUT_FORMATS)
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
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
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


# -- options made from the operations' fields (memsearch.fields) ------------------------------

# The CLI's option for each field an error may name (memsearch.cli.failures words errors with it):
# every option made from a field is added as it is made; these are the options of no field.
OPTION_OF_FIELD: dict[str, str] = {
    "limit": "--limit", "fmt": "--format", "include": "--include", "exclude": "--exclude"
}  # fmt: skip
Values = dict[str, Any]  # a command's values by field name, as `Operation.request` takes them
_CHOICES: dict[tuple[str, tuple[str, ...]], Any] = {}
_UNSET: Any = object()


def _choice_of(field_: Field) -> Any:
    """The Enum of a field's choices, made once per field name and choices."""
    name = field_.query_name.title().replace("_", "")
    return _CHOICES.setdefault((name, field_.choices), _choice(name, field_.choices))


def field_parameter(field_: Field, *, optional: bool = False, default: Any = _UNSET) -> inspect.Parameter:
    """The command-line option of one field (an argument, if the field is required): its name,
    short flags, type, bounds' check (the field's own, when the request is built), default and
    help are the field's. `optional`: a required field the command may go without; `default`:
    instead of the field's (None: absent means unchanged, as for `set`)."""
    value = field_.default if default is _UNSET else default
    item: Any = _choice_of(field_) if field_.choices else str
    annotation: Any
    help_text = field_.description + (" Repeatable." if field_.type == "array" else "") + _bounds(field_)
    declarations = [field_.option_name, *field_.flags]
    if field_.type == "array":
        annotation, value = list[item] | None, None
    elif field_.type == "boolean":
        annotation = bool
        if value:  # on unless turned off: --touch/--no-touch
            declarations[0] = f"{field_.option_name}/--no-{field_.option_name.removeprefix('--')}"
        value = bool(value)
    elif field_.type == "integer":
        annotation = int | None
    elif field_.type == "number":
        annotation = float | None
    elif field_.type in ("string", "ref"):
        annotation = item | None if value is None else item
    else:
        raise AssertionError(f"{field_.name}: a {field_.type} field has no option; give it by hand")
    if field_.type != "boolean":  # a flag's error cannot come from the command line
        OPTION_OF_FIELD.setdefault(field_.name, field_.option_name)
    name = parameter_name(field_)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    if field_.required:
        info: Any = typer.Argument(help=help_text, show_default=False)
        if optional:
            return inspect.Parameter(name, kind, default=None, annotation=Annotated[annotation | None, info])
        return inspect.Parameter(name, kind, annotation=Annotated[annotation, info])
    option = typer.Option(*declarations, help=help_text)
    return inspect.Parameter(name, kind, default=value, annotation=Annotated[annotation, option])


def _bounds(field_: Field) -> str:
    """A number's bounds as Typer shows an option's range: ` [1<=x<=1000]`, ` [x>=0]`."""
    low, high = field_.minimum, field_.maximum
    if low is not None and high is not None:
        return f" [{low:g}<=x<={high:g}]"
    if low is not None:
        return f" [x>={low:g}]"
    return f" [x<={high:g}]" if high is not None else ""


def parameter_name(field_: Field) -> str:
    """The command function's parameter of a field: an argument's field name (QUERY, TEXT, REF),
    an option's query name (the config's defaults name them: `k`, `project`)."""
    return field_.name if field_.required else field_.query_name


def _plain(value: Any) -> Any:
    """An option's value as the library takes it: choices (Enums) as their strings."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return str(value) if isinstance(value, StrEnum) else value


def with_fields(
    fields: Sequence[Field],
    *,
    into: str = "fields",
    optional: Sequence[str] = (),
    defaults: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The command with an option for every field in the place of its parameter `into`, which it
    is called with: the fields' values given (absent options and empty lists left out), by field
    name. Typer reads the options from the signature this gives the command. `optional`: required
    fields the command may go without; `defaults`: the commands' own defaults (else the field's)."""
    parameters_of = {parameter_name(f): f for f in fields}
    made = [
        field_parameter(f, optional=f.name in optional, default=(defaults or {}).get(f.name, _UNSET)) for f in fields
    ]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command)
        parameters = list(signature.parameters.values())
        at = [p.name for p in parameters].index(into)

        @functools.wraps(command)
        def with_options(*args: Any, **kwargs: Any) -> None:
            given = {parameters_of[name].name: _plain(kwargs.pop(name, None)) for name in parameters_of}
            values = {name: value for name, value in given.items() if value not in (None, [], ())}
            command(*args, **{into: values}, **kwargs)

        shown = signature.replace(parameters=[*parameters[:at], *made, *parameters[at + 1 :]])
        with_options.__signature__ = shown  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in shown.parameters.values()}
        with_options.__annotations__["return"] = signature.return_annotation
        return with_options

    return decorate


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Filters:
    """The filter options a command was given, as the library's scope fields (`scope_from_fields`)."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def given(self) -> bool:
        return bool(self.fields)

    def scope(self) -> "Scope":
        """The scope they name (relative times against now)."""
        from memsearch.retrieval.request import scope_from_fields

        return scope_from_fields(**self.fields)


NO_FILTERS = Filters()


def with_filters(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with every filter option (--project, --tag, --since, …: the fields of a scope) in
    the place of its `filters: Filters` parameter, which it is called with. An empty option (an
    empty --project, set in the config say, means every project) is left out."""

    def called(*args: Any, filters: Mapping[str, Any], **kwargs: Any) -> None:
        command(*args, filters=Filters({name: value for name, value in filters.items() if value != ""}), **kwargs)

    called.__signature__ = inspect.signature(command)  # type: ignore[attr-defined]
    functools.update_wrapper(called, command, updated=())
    return with_fields(SCOPE_FIELDS, into="filters")(called)
