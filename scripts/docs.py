"""The README's reference tables, generated from the code so they cannot drift from it: the
commands and every command's options (the Typer app), the MCP tools (memsearch.server.mcp.TOOLS)
and the HTTP endpoints (memsearch.server.http.ENDPOINTS), their arguments the operations' fields
(memsearch.operations).

Each table sits in README.md between two marker comments and is rewritten there:

    <!-- generated: NAME (python scripts/docs.py) -->
    ...
    <!-- end generated: NAME -->

    python scripts/docs.py           # rewrite the generated regions of README.md
    python scripts/docs.py --check   # exit 1, naming the regions, if README.md differs

A developer tool, outside the package: it imports the CLI and both servers, which nothing the
library imports may do. tests/test_docs.py runs the check in CI.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND = "python scripts/docs.py"
BEGIN = "<!-- generated: {name} ({command}) -->"
END = "<!-- end generated: {name} -->"
REGION = re.compile(
    r"(?P<begin><!-- generated: (?P<name>[\w-]+) \([^)]*\) -->\n)(?P<body>.*?)"
    r"(?P<end><!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


def cell(text: str) -> str:
    """`text` as one Markdown table cell: on one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return f"{value:,g}" if value < 1e6 else f"{value:,.0f}"


# -- the CLI --------------------------------------------------------------------------------


def _cli() -> tuple[Any, Any]:
    """The `memsearch` click group (every command) and its root context."""
    import typer.main

    from memsearch.cli.app import app

    group = typer.main.get_command(app)
    return group, typer.Context(group, info_name="memsearch", **group.context_settings)


def _commands() -> list[tuple[str, Any, Any]]:
    """(name as typed, command, its context) for every visible command, a group's subcommands after it."""
    import typer

    group, root = _cli()
    found = []

    def walk(command: Any, context: Any, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            if sub.hidden:
                continue
            sub_context = typer.Context(sub, parent=context, info_name=name)
            found.append((f"{path} {name}".strip(), sub, sub_context))
            walk(sub, sub_context, f"{path} {name}")

    walk(group, root, "")
    return found


def _usage(name: str, command: Any, context: Any) -> str:
    from typer.core import TyperArgument

    words = [f"memsearch {name}"]
    for param in command.get_params(context):
        if isinstance(param, TyperArgument):
            word = (param.metavar or param.name or "").upper() + ("…" if param.nargs == -1 else "")
            words.append(word if param.required else f"[{word}]")
    return " ".join(words)


def _summary(help_text: str | None) -> str:
    """A command's help, its first paragraph."""
    return (help_text or "").strip().split("\n\n")[0]


def commands_table() -> str:
    rows = [(f"`{_usage(name, command, context)}`", _summary(command.help)) for name, command, context in _commands()]
    return table(["command", "what it does"], rows)


def _options(command: Any, context: Any) -> list[tuple[str, str]]:
    from typer.core import TyperOption

    rows = []
    for param in command.get_params(context):
        if not isinstance(param, TyperOption) or param.hidden or "--help" in param.opts:
            continue
        record = param.get_help_record(context)
        if record is not None:
            names, help_text = record
            rows.append((f"`{names.replace(chr(10), '')}`", help_text))
    return rows


def options_table(command_name: str) -> str:
    for name, command, context in _commands():
        if name == command_name:
            return table(["option", "meaning"], _options(command, context))
    raise KeyError(command_name)


def every_option() -> str:
    parts = []
    for name, command, context in _commands():
        rows = _options(command, context)
        if not rows:
            continue
        parts.append(f"<details><summary><code>memsearch {name}</code></summary>\n\n")
        parts.append(table(["option", "meaning"], rows))
        parts.append("\n</details>\n")
    return "".join(parts)


# -- the operations' fields -----------------------------------------------------------------


def _shown_field(field: Any, name: str | None = None) -> str:
    """`name` with its bounds, choices and default, as an argument list shows them."""
    notes = []
    low, high = getattr(field, "minimum", None), getattr(field, "maximum", None)
    if low is not None and high is not None:
        notes.append(f"{_number(low)}–{_number(high)}")
    elif low is not None:
        notes.append(f"≥ {_number(low)}")
    elif high is not None:
        notes.append(f"≤ {_number(high)}")
    if getattr(field, "choices", ()):
        notes.append("/".join(field.choices))
    if field.default is True:
        notes.append("default true")
    elif field.default is not None and not isinstance(field.default, bool):
        notes.append(f"default {field.default}")
    shown = f"`{name or field.name}`"
    return f"{shown} ({'; '.join(notes)})" if notes else shown


def _arguments(fields: Iterable[Any], name: Callable[[Any], str] = lambda field: field.name) -> str:
    fields = list(fields)
    required = ", ".join(_shown_field(f, name(f)) for f in fields if f.required)
    optional = ", ".join(_shown_field(f, name(f)) for f in fields if not f.required)
    return "; ".join(part for part in (required, optional) if part) or "—"


def mcp_table() -> str:
    from memsearch.server.mcp import TOOLS

    rows = [(f"`{tool.name}`", _arguments(tool.operation.fields), tool.description) for tool in TOOLS]
    return table(["tool", "arguments", "what it does and returns"], rows)


def _operation_of(endpoint: Any) -> Any:
    """The fields a route documents: its JSON body's (CEMS's names on its route), else its query's."""
    return getattr(endpoint, "body", None) or getattr(endpoint, "query", None)


def http_table() -> str:
    from memsearch.server.http import ENDPOINTS

    rows = []
    for endpoint in ENDPOINTS:
        operation: Any = _operation_of(endpoint)
        in_path = set(re.findall(r"\{(\w+)\}", endpoint.path))
        if operation is None:
            sent = "—"
        elif getattr(endpoint, "body", None) is not None:
            sent = "JSON body: " + _arguments(operation.fields)
        else:
            fields = [f for f in operation.fields if f.name not in in_path]
            sent = "URL parameters: " + _arguments(fields, lambda f: getattr(f, "parameter", None) or f.name)
            sent = sent if fields else "—"
            if endpoint.method == "POST":
                sent = "the file as the body; " + sent
        returns = getattr(endpoint, "returns", "")
        what = endpoint.summary + (f"; returns {returns}" if returns else "")
        rows.append((f"`{endpoint.method} {endpoint.path}`", sent, what))
    return table(["endpoint", "body / parameters", "what it does"], rows)


# -- the README -----------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[], str]] = {
    "commands": commands_table,
    "options": every_option,
    "search-options": lambda: options_table("search"),
    "mcp-tools": mcp_table,
    "http-endpoints": http_table,
}


def generated(text: str) -> str:
    """`text` (the README) with every generated region rewritten; a region it lacks is an error."""
    seen: set[str] = set()

    def rewrite(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise ValueError(f"README.md has a generated region {name!r} that {COMMAND} does not know")
        seen.add(name)
        begin = BEGIN.format(name=name, command=COMMAND)
        return f"{begin}\n{GENERATORS[name]()}{END.format(name=name)}"

    result = REGION.sub(rewrite, text)
    missing = sorted(set(GENERATORS) - seen)
    if missing:
        raise ValueError(f"README.md lacks the generated regions {', '.join(missing)} (see {COMMAND})")
    return result


def stale_regions(current: str, fresh: str) -> list[str]:
    def bodies(text: str) -> dict[str, str]:
        return {match["name"]: match["body"] for match in REGION.finditer(text)}

    old, new = bodies(current), bodies(fresh)
    return sorted(name for name in new if old.get(name) != new[name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs; write nothing")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    try:
        fresh = generated(current)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    if fresh == current:
        return 0
    if args.check:
        stale = ", ".join(stale_regions(current, fresh))
        print(f"README.md's generated tables are stale ({stale}): run `{COMMAND}`", file=sys.stderr)
        return 1
    README.write_text(fresh, encoding="utf-8", newline="\n")
    print(f"rewrote {', '.join(stale_regions(current, fresh))} in {README}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
