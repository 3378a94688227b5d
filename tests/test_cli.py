"""The command line, driven through Typer's CliRunner against a temporary store."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.cli.app import app
from memsearch.store.ann import index_library_available

runner = CliRunner()


_STYLES = re.compile(r"\x1b\[[0-9;]*m")


def run(*args: str, input: str | None = None, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, list(args), input=input, env=env)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def terminal(columns: int = 120) -> dict[str, str]:
    """The environment of a terminal this wide (Rich's switch: the runner's stdout is no terminal)."""
    return {"TTY_COMPATIBLE": "1", "COLUMNS": str(columns), "TERM": "xterm", "NO_COLOR": "1"}


def unstyled(out: str) -> str:
    """A terminal's output without Rich's own styles (bold headers)."""
    return _STYLES.sub("", out)


@pytest.fixture
def filled() -> None:
    notes = [
        ("Fixed null-deref when JWT was malformed in the auth middleware", ["--tag", "auth", "--key", "jwt-fix"]),
        ("parseConfig crashes on an empty YAML file", ["--project", "cli", "--at", "2024-04-30"]),
        ("Alice prefers dark roast coffee", ["--tag", "people", "--meta", "source=chat", "--importance", "0.9"]),
    ]
    for text, options in notes:
        run("add", text, *options)


@pytest.mark.slow  # loads the model (the first test to embed exports it): out of the quick tier
def test_add_prints_the_new_id_and_get_shows_it() -> None:
    assert run("add", "first memory").stdout.strip() == "1"
    assert run("add", "-", input="from stdin\n").stdout.strip() == "2"
    shown = json.loads(run("get", "2", "--format", "json").stdout)
    assert shown["text"] == "from stdin\n" and shown["id"] == 2


def test_add_keeps_every_field(filled: None) -> None:
    memory = json.loads(run("get", "jwt-fix", "-f", "json").stdout)
    assert memory["tags"] == ["auth"] and memory["key"] == "jwt-fix"
    alice = json.loads(run("get", "3", "-f", "json").stdout)
    assert alice["metadata"] == {"source": "chat"} and alice["importance"] == 0.9
    parse = json.loads(run("get", "2", "-f", "json").stdout)
    assert parse["project"] == "cli" and parse["created_at"] == "2024-04-30T00:00:00.000000+00:00"


def test_search_json_contract(filled: None) -> None:
    document = json.loads(run("search", "malformed auth tokens", "--format", "json", "-k", "2").stdout)
    assert document["schema_version"] == 1
    assert document["mode"] == "auto" and document["strategy"] in ("hybrid", "vector")
    assert document["strategy_reason"]
    assert document["results"][0]["key"] == "jwt-fix"
    assert len(document["results"]) == 2
    assert "candidates" not in document
    for result in document["results"]:
        assert result["explain"]["final"] == result["score"]


def test_search_table_with_explain_and_raw(filled: None) -> None:
    out = run("search", "parseConfig", "--explain", "--raw", "-k", "1", env=terminal()).stdout
    assert "parseConfig" in out and "exact tokens" in out
    assert "lexical leg" in out and "vector leg" in out and "rrf (k=10)" in out and "× decay" in out and "final" in out
    assert "all 3 candidates before filtering" in out and "limit" in out


def test_explain_says_which_engine_answered_the_vector_legs(filled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run("search", "parseConfig", "--explain", "--mode", "hybrid", "-k", "1", env=terminal()).stdout
    assert "vector legs answered by vector: exact search, vector_context: exact search" in unstyled(out)
    if not index_library_available():
        return
    monkeypatch.setenv("MEMSEARCH_ANN_THRESHOLD", "2")  # three memories: through the index
    document = json.loads(run("search", "parseConfig", "-f", "json", "--mode", "hybrid").stdout)
    assert document["vector_search"] == {"vector": "index", "vector_context": "index"}
    plain = run("search", "parseConfig", "--explain", "--mode", "hybrid").stdout  # not a terminal: plain lines
    assert "vector legs answered by vector: the approximate index" in plain


def test_raw_json_lists_every_candidate_with_a_reason(filled: None) -> None:
    document = json.loads(run("search", "coffee", "--raw", "-f", "json", "-k", "1", "--mode", "hybrid").stdout)
    assert len(document["candidates"]) == 3
    assert [c["dropped"] for c in document["candidates"]].count(None) == 1
    assert {c["dropped"] for c in document["candidates"] if c["dropped"]} == {"limit"}


def test_as_of_sets_now_for_decay(filled: None) -> None:
    document = json.loads(run("search", "parseConfig", "-f", "json", "--as-of", "2024-05-07", "-p", "siftcoder").stdout)
    assert document["as_of"] == "2024-05-07T00:00:00.000000+00:00"
    (parse_config,) = [r for r in document["results"] if r["id"] == 2]
    decay = parse_config["explain"]["factors"][0]
    assert decay["name"] == "decay" and decay["detail"]["age_days"] == pytest.approx(7.0)
    assert decay["value"] == pytest.approx(0.36787944117144233)


def test_jsonl_and_csv_formats(filled: None) -> None:
    lines = run("search", "coffee", "-f", "jsonl").stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["query"] == "coffee"
    rows = list(csv.DictReader(io.StringIO(run("search", "coffee", "-f", "csv", "-k", "1").stdout)))
    assert rows[0]["text"] == "Alice prefers dark roast coffee" and rows[0]["rank"] == "1"
    assert float(rows[0]["score"]) > 0


def test_batch_queries_in_one_process(filled: None, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "coffee"}\n\n{"query": "parseConfig", "k": 1, "mode": "lexical"}\n')
    lines = run("search", "--queries", str(queries), "-f", "jsonl").stdout.splitlines()
    assert [json.loads(line)["query"] for line in lines] == ["coffee", "parseConfig"]
    assert json.loads(lines[1])["strategy"] == "lexical"
    from_stdin = json.loads(run("search", "--queries", "-", "-f", "json", input='{"query": "coffee"}\n').stdout)
    assert isinstance(from_stdin, list) and from_stdin[0]["results"]


def test_bad_queries_file_names_the_line(filled: None, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "ok"}\n{"query": ""}\n')
    result = run("search", "--queries", str(queries), code=1)
    assert "line 2" in result.stderr and result.stdout == ""


def test_filters(filled: None) -> None:
    document = json.loads(run("search", "crash coffee auth", "-f", "json", "--project", "cli").stdout)
    assert [r["project"] for r in document["results"]] == ["cli"]
    listed = json.loads(run("list", "-f", "json", "--tag", "people").stdout)
    assert [m["id"] for m in listed] == [3]
    newer = json.loads(run("list", "-f", "json", "--since", "2024-05-01").stdout)
    assert 2 not in [m["id"] for m in newer]


def test_list_is_newest_first_and_limited(filled: None) -> None:
    listed = json.loads(run("list", "-f", "json").stdout)
    assert [m["id"] for m in listed] == [3, 1, 2]
    assert len(json.loads(run("list", "-f", "json", "-n", "1").stdout)) == 1
    assert "parseConfig" in run("list").stdout


def test_import_is_all_or_nothing(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"text": "one", "tags": ["a"], "key": "k1", "created_at": "2024-01-01T10:00:00Z"})
        + "\n"
        + json.dumps({"text": "two", "importance": 0.2, "pinned": True, "metadata": {"n": 1}})
        + "\n"
    )
    result = run("import", str(good))
    assert "imported 2 memories" in result.stderr and result.stdout == ""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "three"}\n{"text": "four", "importance": 7}\n')
    result = run("import", str(bad), code=1)
    assert "line 2" in result.stderr and "importance" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "five"}\n{"text": \n')
    assert "line 2" in run("import", str(broken), code=1).stderr
    duplicate = tmp_path / "dup.jsonl"
    duplicate.write_text('{"text": "six", "key": "k1"}\n')
    assert "--replace" in run("import", str(duplicate), code=1).stderr
    assert [m["text"] for m in json.loads(run("list", "-f", "json").stdout)] == ["two", "one"]
    run("import", str(duplicate), "--replace")
    assert json.loads(run("get", "k1", "-f", "json").stdout)["text"] == "six"


def test_delete_by_id_and_key(filled: None) -> None:
    result = run("delete", "jwt-fix", "2")
    assert "deleted 2 memories" in result.stderr
    assert [m["id"] for m in json.loads(run("list", "-f", "json").stdout)] == [3]
    assert "no memory with id 99" in run("delete", "3", "99", code=1).stderr
    assert len(json.loads(run("list", "-f", "json").stdout)) == 1


def test_stats_and_path(filled: None, isolated_home: Path) -> None:
    assert run("path").stdout.strip() == str(isolated_home / "memsearch.db")
    stats = json.loads(run("stats", "-f", "json").stdout)
    assert stats["memories"] == 3 and stats["vectors"] == 3 and stats["embedding_dim"] == 384
    assert stats["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "memories" in run("stats").stdout


def test_db_option_and_environment_choose_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = tmp_path / "explicit.db"
    run("add", "in the explicit store", "--db", str(explicit))
    assert explicit.exists()
    monkeypatch.setenv("MEMSEARCH_DB", str(tmp_path / "env.db"))
    assert run("path").stdout.strip() == str(tmp_path / "env.db")
    assert run("path", "--db", str(explicit)).stdout.strip() == str(explicit)


def test_reindex(filled: None) -> None:
    assert "re-embedded 3 memories" in run("reindex").stderr
    assert json.loads(run("search", "coffee", "-f", "json").stdout)["results"][0]["id"] == 3


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["search", " "], 2, "query is empty"),
        (["search", "x", "--mode", "fuzzy"], 2, "--mode"),
        (["search", "x", "--as-of", "soon"], 2, "ISO-8601"),
        (["search"], 2, "QUERY or --queries"),
        (["add", "x", "--importance", "3"], 2, "importance"),
        (["add", "x", "--meta", "novalue"], 2, "key=value"),
        (["add", " "], 2, "empty"),
        (["get", "42"], 1, "no memory with id 42"),
        (["import", "/nonexistent/file.jsonl"], 2, "cannot read"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_errors_are_one_line_with_the_documented_code(filled: None, args: list[str], code: int, message: str) -> None:
    result = run(*args, code=code)
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert len(json.loads(run("list", "-f", "json").stdout)) == 3  # nothing stored was lost


def test_reads_without_a_store_say_so(tmp_path: Path) -> None:
    for command in (["list"], ["search", "x"], ["get", "1"]):
        result = run(*command, "--db", str(tmp_path / "missing.db"), code=1)
        assert "no memsearch store" in result.stderr
    assert not (tmp_path / "missing.db").exists()


def test_stats_of_a_store_not_made_yet_says_so_and_succeeds(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    result = run("stats", "--db", str(missing))
    assert f"no memsearch store at {missing} yet" in result.stderr and "memories\t0" in result.stdout
    document = json.loads(run("stats", "--db", str(missing), "-f", "json").stdout)
    assert document == {"path": str(missing), "exists": False, "memories": 0}
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_corrupt_store_is_reported_and_left_alone(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x00garbage" * 64)
    result = run("add", "x", "--db", str(corrupt), code=1)
    assert "not a usable memsearch store" in result.stderr
    assert corrupt.read_bytes() == b"\x00garbage" * 64


def test_debug_shows_the_traceback() -> None:
    result = run("--debug", "get", "1", code=1)
    assert "Traceback" in result.stderr


def test_help_and_version() -> None:
    assert "search" in run("--help").stdout
    assert run("--version").stdout.startswith("memsearch ")
    assert "Usage" in run().stdout
    for command in ("add", "import", "search", "get", "list", "delete", "stats", "path", "reindex"):
        assert run(command, "--help").stdout.strip()
