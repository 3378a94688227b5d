"""Options where users put them: --db before the command, -n / -k for a limit, relative times
(1y, 3mo) wherever a time is taken, --color, clearing a project with --project ''; and --explain
rendering a document whose profile this machine does not have."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.cli.results import render_search
from memsearch.cli.startup import only_command
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.retrieval.request import request_from_fields
from tests.serving import server_env, start_server

runner = CliRunner()
_COLOURS = re.compile(r"\x1b\[[0-9;]*3[0-7]m")  # a foreground colour (bold and the like are styles)
_ESCAPES = re.compile(r"\x1b\[")


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture
def three(tmp_path: Path) -> Path:
    db = tmp_path / "three.db"
    for text in ("the deploy key is in the vault", "deploy windows are on weekdays", "Alice likes coffee"):
        run("add", text, "--db", str(db))
    return db


# -- --db before the command -----------------------------------------------------------------


def test_db_before_the_command_is_the_commands_db(tmp_path: Path) -> None:
    db = tmp_path / "before.db"
    assert run("--db", str(db), "add", "a memory in the named store").stdout.strip() == "1"
    listed = json.loads(run("--db", str(db), "list", "-f", "json").stdout)
    assert [m["text"] for m in listed] == ["a memory in the named store"]
    assert json.loads(run("--db", str(db), "search", "memory", "-f", "json").stdout)["results"]
    assert run("--db", str(db), "path").stdout.strip() == str(db)
    assert run("--db=" + str(db), "path").stdout.strip() == str(db)
    # A --db after the command wins over the one before it.
    assert run("--db", str(db), "path", "--db", str(tmp_path / "after.db")).stdout.strip() == str(tmp_path / "after.db")
    assert not (tmp_path / "after.db").exists()


def test_the_entry_point_builds_only_the_command_after_root_options() -> None:
    lean = only_command(app, ["--db", "x.db", "search", "q"])
    assert [getattr(info.callback, "__name__", None) for info in lean.registered_commands] == ["search"]
    assert len(only_command(app, ["--color", "never", "--debug", "--db=x.db", "list"]).registered_commands) == 1
    assert only_command(app, ["--db", "x.db"]) is app


def test_db_before_the_command_through_the_console_entry_point(tmp_path: Path) -> None:
    db = tmp_path / "entry.db"
    done = subprocess.run(
        [sys.executable, "-m", "memsearch", "--db", str(db), "path"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == str(db), done.stderr


# -- limits ----------------------------------------------------------------------------------


def test_n_and_k_both_limit_search_and_list(three: Path) -> None:
    for option in ("-n", "-k", "--limit"):
        document = json.loads(run("search", "deploy", option, "1", "-f", "json", "--db", str(three)).stdout)
        assert len(document["results"]) == 1, option
        assert len(json.loads(run("list", option, "2", "-f", "json", "--db", str(three)).stdout)) == 2, option


# -- relative times ----------------------------------------------------------------------------


def test_add_at_takes_a_relative_time(tmp_path: Path) -> None:
    db = tmp_path / "at.db"
    run("add", "two days ago", "--at", "2d", "--db", str(db))
    run("add", "a year ago", "--at", "1y", "--db", str(db))
    listed = json.loads(run("list", "-f", "json", "--db", str(db)).stdout)
    created = {m["text"]: datetime.fromisoformat(m["created_at"]) for m in listed}
    now = datetime.now(UTC)
    assert abs(now - timedelta(days=2) - created["two days ago"]) < timedelta(minutes=5)
    assert 364 <= (now - created["a year ago"]).days <= 366
    bad = run("add", "x", "--at", "soon", "--db", str(db), code=2)
    assert bad.stderr.startswith("memsearch: --at 'soon' is neither an ISO-8601") and "3mo, 1y" in bad.stderr


def test_since_and_as_of_take_years_and_months(tmp_path: Path) -> None:
    db = tmp_path / "since.db"
    run("add", "old news", "--at", "2y", "--db", str(db))
    run("add", "recent news", "--at", "2mo", "--db", str(db))
    listed = json.loads(run("list", "--since", "1y", "-f", "json", "--db", str(db)).stdout)
    assert [m["text"] for m in listed] == ["recent news"]
    found = json.loads(run("search", "news", "--since", "3mo", "-f", "json", "--db", str(db)).stdout)
    assert [r["text"] for r in found["results"]] == ["recent news"]
    # Relative times resolve against --as-of: `today` a year ago, when only the old news existed.
    pinned = ("--as-of", "1y", "--until", "today")
    before = json.loads(run("search", "news", *pinned, "-f", "json", "--db", str(db)).stdout)
    assert [r["text"] for r in before["results"]] == ["old news"] and before["as_of"] < listed[0]["created_at"]


# -- --color -----------------------------------------------------------------------------------


def test_color_always_draws_coloured_tables_in_a_pipe_and_never_leaves_colour_out(three: Path) -> None:
    search = ("search", "deploy", "--raw", "--db", str(three))
    assert not _ESCAPES.search(run(*search).stdout)  # a pipe: plain lines
    assert _COLOURS.search(run("--color", "always", *search).stdout)  # `kept` in green, in a pipe
    forced = {"FORCE_COLOR": "1"}
    assert _COLOURS.search(run(*search, env=forced).stdout)  # Rich's own switch, as before
    never = run("--color", "never", *search, env=forced).stdout
    assert "kept" in never and not _COLOURS.search(never)
    assert run("--color", "sometimes", "list", code=2).stderr.startswith("memsearch: Invalid value for '--color'")


# -- set --project '' ------------------------------------------------------------------------------


def test_set_with_an_empty_project_or_namespace_clears_it(tmp_path: Path) -> None:
    db = str(tmp_path / "set.db")
    run("add", "scoped", "--project", "web", "--namespace", "ops", "--db", db)
    cleared = json.loads(run("set", "1", "--project", "", "-f", "json", "--db", db).stdout)
    assert cleared["project"] is None and cleared["namespace"] == "ops"
    cleared = json.loads(run("set", "1", "--namespace", "", "-f", "json", "--db", db).stdout)
    assert cleared["namespace"] is None
    assert json.loads(run("list", "--project", "web", "-f", "json", "--db", db).stdout) == []
    moved = json.loads(run("set", "1", "--project", "cli", "-f", "json", "--db", db).stdout)
    assert moved["project"] == "cli"


def test_the_library_clears_a_project_given_none(ms: Memsearch) -> None:
    memory_id = ms.add(NewMemory("scoped", project="web", namespace="ops")).id
    assert (ms.update(memory_id, project=None).project, ms.get(memory_id).namespace) == (None, "ops")
    assert ms.update(memory_id, namespace=None).namespace is None


# -- --explain without the profile --------------------------------------------------------------------


def test_explain_renders_a_document_whose_profile_is_not_here(
    ms: Memsearch, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ms.add(NewMemory("the deploy key is in the vault"))
    document = ms.search(request_from_fields("deploy key", mode="hybrid")).to_dict(raw=True)
    assert document["legs"] and all(isinstance(spec, str) for spec in document["legs"].values())
    document["profile"] = "made-on-another-machine"
    render_search([document], "table", raw=True, explain=True, batch=False)  # plain lines
    plain = capsys.readouterr().out
    assert "vector leg" in plain and "cosine" in plain and "final" in plain
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    render_search([document], "table", raw=True, explain=True, batch=False)  # tables
    assert "cosine" in capsys.readouterr().out


def test_explain_through_a_server_with_a_profile_this_machine_lacks(tmp_path: Path, encoder: Encoder) -> None:
    server_home = tmp_path / "server-home"
    (server_home / "profiles").mkdir(parents=True)
    profile = 'summary = "only here"\n[legs]\nfar_words = "lexical"\nfar_meaning = "vector@context"\n'
    profile += '[fusion]\nmethod = "rrf"\nweights = { far_words = 1.0 }\n'
    (server_home / "profiles" / "faraway.toml").write_text(profile, encoding="utf-8")
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    server = start_server(db, env=server_env(MEMSEARCH_HOME=str(server_home)))
    try:
        result = run("--debug", "search", "deploy key", "--profile", "faraway", "--explain", "--server", server.url,
                     "--db", str(db), env={"TTY_COMPATIBLE": "1", "COLUMNS": "160", "NO_COLOR": "1"})  # fmt: skip
    finally:
        assert server.stop() == 0
    assert "through the server" in result.stderr
    assert "far_meaning leg" in result.stdout and "cosine (vector@context)" in result.stdout


def test_list_says_when_its_limit_left_memories_out_and_all_lists_them(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    for text in ("one", "two", "three"):
        assert runner.invoke(app, ["add", text, "--db", db, "--tag", "t"]).exit_code == 0
    short = runner.invoke(app, ["list", "-n", "2", "--db", db, "-f", "jsonl"])
    assert short.exit_code == 0 and len(short.stdout.splitlines()) == 2
    assert "2 of 3 memories (--limit N or --all for more)" in short.stderr
    paged = runner.invoke(app, ["list", "-n", "1", "--offset", "1", "--db", db, "-f", "jsonl"])
    assert "2–2 of 3 memories" in paged.stderr
    every = runner.invoke(app, ["list", "--all", "-n", "2", "--db", db, "-f", "jsonl"])
    assert len(every.stdout.splitlines()) == 3 and every.stderr == ""
    enough = runner.invoke(app, ["list", "-n", "3", "--tag", "t", "--db", db, "-f", "jsonl"])
    assert len(enough.stdout.splitlines()) == 3 and enough.stderr == ""
