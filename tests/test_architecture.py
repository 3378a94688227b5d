"""The package's layout: no import cycles, `eval` only where asked for, front ends through the service."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.cli_probe import modules_imported_by

PACKAGE = Path(__file__).parents[1] / "memsearch"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the memsearch modules it imports anywhere in its text (inside functions and
    TYPE_CHECKING blocks too: a cycle through a lazy import is still a cycle in the design)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base]).strip(".")
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for successor in sorted(graph[node]):
            if state.get(successor) == 1:
                return [*path[path.index(successor) :], successor]
            if successor not in state and (cycle := visit(successor)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_cycles() -> None:
    graph = import_graph()
    # A package's __init__ that re-exports its submodules is not part of a cycle by itself.
    assert "memsearch.api" in graph and "memsearch.ingest.records" in graph["memsearch.api"]
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph) or [])


def test_ingest_and_retrieval_do_not_import_each_other_or_the_service() -> None:
    """What goes into a store and how it is searched are siblings under the service (memsearch.api):
    neither imports the other, and neither reaches back up to the service that calls them."""
    graph = import_graph()
    for package, other in (("memsearch.ingest", "memsearch.retrieval"), ("memsearch.retrieval", "memsearch.ingest")):
        for name in (name for name in graph if name == package or name.startswith(package + ".")):
            reached = {target for target in graph[name] if target == other or target.startswith(other + ".")}
            assert not reached, f"{name} imports {sorted(reached)}"
            assert "memsearch.api" not in graph[name], f"{name} imports memsearch.api"


def test_the_product_never_imports_eval() -> None:
    graph = import_graph()
    product = {name for name in graph if not name.startswith("memsearch.eval")} - {"memsearch.cli.evaluation"}
    offenders = {name: graph[name] & {n for n in graph if n.startswith("memsearch.eval")} for name in product}
    assert not {name: found for name, found in offenders.items() if found}


def test_the_library_never_imports_a_front_end() -> None:
    """The front ends (cli, server) sit on the library; no other package imports them (only
    `python -m memsearch`, __main__, starts the CLI)."""
    graph = import_graph()

    def front_end(name: str) -> bool:  # memsearch.client is no part of memsearch.cli
        return any(
            name == package or name.startswith(package + ".") for package in ("memsearch.cli", "memsearch.server")
        )

    library = {name for name in graph if not front_end(name)} - {"memsearch.__main__"}
    reached = {
        name: sorted(filter(front_end, graph[name])) for name in sorted(library) if any(map(front_end, graph[name]))
    }
    assert not reached, f"library modules import a front end: {reached}"


def test_the_choices_are_the_ones_the_library_checks() -> None:
    from memsearch import choices
    from memsearch.api import IMPORT_FORMATS
    from memsearch.eval.runner import FORMATS
    from memsearch.retrieval.pipeline import GRANULARITIES, MODES

    assert (choices.MODES, choices.GRANULARITIES) == (MODES, GRANULARITIES)
    assert (choices.IMPORT_FORMATS, choices.BENCHMARK_FORMATS) == (IMPORT_FORMATS, FORMATS)


def test_front_ends_never_reach_the_store_or_the_encoder() -> None:
    """The CLI and the servers call the facade's use cases (a server's warm-up too: Memsearch.warm)."""
    for path in [*(PACKAGE / "cli").glob("*.py"), *(PACKAGE / "server").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                where = f"{path.name}:{node.lineno}"
                assert node.func.attr not in ("store", "encoder"), f"{where} calls .{node.func.attr}()"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("memsearch.store.", "memsearch.embedding")), (path.name, node.module)


@pytest.mark.parametrize(
    "args",
    [
        ["add", "a note about the deploy key"],
        ["import", "{input}"],
        ["search", "deploy key", "--mode", "lexical"],
        ["search", "deploy key"],
    ],
)
def test_the_products_commands_do_not_import_eval(tmp_path: Path, args: list[str]) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"text": "the deploy key is in the vault"}\n', encoding="utf-8")
    db = tmp_path / "m.db"
    modules_imported_by("add", "seed", "--db", str(db), check=True)
    argv = [arg.replace("{input}", str(notes)) for arg in args]
    modules = modules_imported_by(*argv, "--db", str(db))
    assert sorted(name for name in modules if name.startswith("memsearch.eval")) == []


def test_front_ends_build_searches_through_the_one_library_constructor() -> None:
    """CLI, HTTP and MCP turn fields into a search with `request_from_fields` / `scope_from_fields`,
    never with Scope(...) or SearchRequest(...) of their own."""
    for path in [*(PACKAGE / "cli").glob("*.py"), *(PACKAGE / "server").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("Scope", "SearchRequest"), (
                    f"{path.name}:{node.lineno} builds {node.func.id}"
                )


def _architecture_map() -> str:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def map_sections(text: str) -> dict[str, str]:
    """The map's text by package: "" for the top level, "store/" for what a line `  store/ …`
    starts and the lines under it say, up to the next package's line."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        head = line[2:].split(" ", 1)[0] if line.startswith("  ") and not line.startswith("   ") else ""
        if head.endswith("/"):
            current = head
            sections[current] = []
        sections[current].append(line)
    return {package: "\n".join(lines) for package, lines in sections.items()}


def unmapped(modules: list[str], text: str) -> list[str]:
    """The module paths (relative to memsearch/, such as store/postgres/schema.py) that the map does
    not name in their package's section: a package's own module by its name (`sql.py`), a
    subpackage's by its path from the package (`postgres/schema.py`), each a whole word, so a
    module is never found by its namesake in another package."""
    sections = map_sections(text)
    missing = []
    for module in modules:
        package, _, rest = module.partition("/") if "/" in module else ("", "", module)
        section = sections.get(f"{package}/" if package else "", "")
        if not re.search(rf"(?<![\w/.]){re.escape(rest)}\b", section):
            missing.append(module)
    return missing


def test_the_map_check_finds_a_module_by_its_package_not_its_namesake() -> None:
    text = "memsearch/\n  text.py   words\n  store/    sql.py, postgres/text.py\n  embedding/ onnx.py\n"
    assert unmapped(["text.py", "store/sql.py", "store/postgres/text.py", "embedding/onnx.py"], text) == []
    assert unmapped(["store/text.py", "embedding/text.py", "store/postgres/sql.py", "sql.py"], text) == [
        "store/text.py",
        "embedding/text.py",
        "store/postgres/sql.py",
        "sql.py",
    ]


def test_the_readme_architecture_map_names_every_package_and_module() -> None:
    """A newcomer reads the map first: a module missing from it is a module nobody finds. Five
    basenames stand in two packages each (base.py, schema.py, …): the map names each module in its
    own package's section, by its path from there."""
    package = Path(__file__).resolve().parents[1] / "memsearch"
    text = _architecture_map()
    modules = [
        path.relative_to(package).as_posix()
        for path in sorted(package.rglob("*.py"))
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    ]
    missing = unmapped(modules, text)
    missing += [
        f"{folder.name}/"
        for folder in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file())
        if f"{folder.name}/" not in map_sections(text)
    ]
    assert not missing, f"the README's architecture map does not name: {', '.join(missing)}"


# What reads a query's text for a search: each is called once a query, by retrieval/query.py's
# parse_query; every stage reads the ParsedQuery (and the stores its LexicalQuery) instead.
QUERY_SCANNERS = {
    "route_features", "detect_intents", "exact_tokens", "asks_when", "asks_name", "named_dates", "as_when",
}  # fmt: skip


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name):
                names.add(function.id)
            elif isinstance(function, ast.Attribute):
                base = function.value.id if isinstance(function.value, ast.Name) else ""
                names.add(f"{base}.{function.attr}" if base == "LexicalQuery" else function.attr)
    return names


def test_a_query_is_read_once_by_the_parse() -> None:
    readers = {}
    for path in PACKAGE.rglob("*.py"):
        found = _calls(ast.parse(path.read_text())) & (QUERY_SCANNERS | {"LexicalQuery.of"})
        if found:
            readers[str(path.relative_to(PACKAGE))] = found
    assert readers.pop("retrieval/query.py") == {
        "route_features",
        "as_when",
        "asks_when",
        "asks_name",
        "named_dates",
        "LexicalQuery.of",
    }
    # A scanner's own module may compose it (routing's features, dates' ranges of a memory's text).
    assert readers == {
        "retrieval/routing.py": {"detect_intents", "exact_tokens"},
        "retrieval/dates.py": {"named_dates"},
    }
