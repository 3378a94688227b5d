"""The smaller defects of issue 8 and its environment errors (item 11), each as a user meets it."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.errors import InvalidInputError
from memsearch.models import NewMemory
from memsearch.profiles import available, load_profile, profile_toml
from tests.test_cli import run

DATA = Path(__file__).parent / "data"


# -- profiles --------------------------------------------------------------------------------------


def test_a_field_of_the_wrong_type_names_the_file_and_field(isolated_home: Path) -> None:
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "ten.toml").write_text('extends = "default"\n[fusion]\nrrf_k = "ten"\n')
    with pytest.raises(InvalidInputError, match=r"ten\.toml: fusion\.rrf_k must be a number, not 'ten'"):
        load_profile("ten")
    run("add", "a note to search")
    error = run("search", "note", "-p", "ten", code=2).stderr
    assert "ten.toml: fusion.rrf_k must be a number, not 'ten'" in error and "internal error" not in error
    (folder / "k.toml").write_text('k = true\n[select]\nmmr_lambda = "high"\n')
    with pytest.raises(InvalidInputError, match="k must be a whole number, not True"):
        load_profile("k")


def test_one_broken_profile_does_not_hide_the_others(isolated_home: Path) -> None:
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "broken.toml").write_text("x = [\n")
    (folder / "typed.toml").write_text('[fusion]\nrrf_k = "ten"\n')
    listed = {line.split("\t")[0]: line.split("\t") for line in run("profiles").stdout.splitlines()[1:]}
    assert {"default", "cems", "broken", "typed"} <= set(listed)
    assert listed["broken"][1] == "broken" and "broken.toml" in listed["broken"][2]
    assert "rrf_k must be a number" in listed["typed"][2]
    rows = {row["name"]: row for row in json.loads(run("profiles", "-f", "json").stdout)}
    assert rows["default"]["error"] is None and "broken.toml" in rows["broken"]["error"]


def test_profiles_show_prints_toml_that_loads_back_to_the_same_profile(isolated_home: Path) -> None:
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    for name in available():
        shown = run("profiles", "show", name).stdout
        assert shown.startswith(f"# {name} — ")
        tomllib.loads(shown)  # valid TOML as printed, comment lines included
        (folder / f"copy_of_{name}.toml").write_text(shown, encoding="utf-8")
        assert dataclasses.replace(load_profile(f"copy_of_{name}"), name=name) == load_profile(name)


def test_profile_toml_escapes_what_toml_strings_cannot_hold(isolated_home: Path) -> None:
    odd = dataclasses.replace(load_profile("default"), summary='quote " backslash \\ del \x7f tab \t', name="odd")
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "odd.toml").write_text(profile_toml(odd), encoding="utf-8")
    assert load_profile("odd") == odd


def test_formats_of_profiles_show(isolated_home: Path) -> None:
    document = json.loads(run("profiles", "show", "memsense", "-f", "json").stdout)
    assert document["fusion"]["rrf_k"] == 15
    rows = run("profiles", "show", "memsense", "-f", "csv").stdout.splitlines()
    assert rows[0] == "name,value" and "fusion.rrf_k,15" in rows and "select.mmr_lambda,0.78" in rows
    assert json.loads(run("profiles", "show", "memsense", "-f", "jsonl").stdout)["name"] == "memsense"


# -- the library -----------------------------------------------------------------------------------


def test_a_lone_string_of_tags_is_one_tag(ms: Memsearch) -> None:
    lone_tag: Any = "ops"  # as an untyped caller (a script, decoded JSON) may pass it
    assert NewMemory("x", tags=lone_tag).tags == ("ops",)
    memory = ms.get(ms.add(NewMemory("a note", tags=lone_tag)).id)
    assert memory.tags == ("ops",)
    assert ms.update(memory.id, tags="infra").tags == ("infra",)


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.slow  # every command's help: out of the quick tier
def test_help_names_no_python_types() -> None:
    from typer.main import get_command

    from memsearch.cli.app import app

    group = get_command(app)
    commands: list[list[str]] = [[]]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        commands.append([name])
        commands += [[name, sub] for sub in getattr(command, "commands", {})]
    for command in commands:
        shown = run(*command, "--help").stdout
        assert not re.search(r"<(str|int|float|bool|list|path|class)\b|list\[|<class ", shown), (command, shown)
    search = run("search", "--help").stdout
    assert "INTEGER" in search and "TEXT" in search and "auto|vector" in search


def test_eval_takes_its_output_format_with_f_and_the_dataset_format_apart(tmp_path: Path) -> None:
    dataset = DATA / "locomo_tiny.json"
    document = json.loads(
        run("eval", str(dataset), "-d", "locomo", "-f", "json", "-p", "default", "-g", "turn", "--no-baseline").stdout
    )
    assert document["format"] == "locomo"
    assert "--dataset-format" in run("eval", str(dataset), "-f", "json", code=2).stderr
    assert "'csv'" in run("eval", str(dataset), "-d", "locomo", "-f", "csv", code=2).stderr


def test_errors_of_a_chat_from_stdin_name_stdin_only(tmp_path: Path) -> None:
    chat = (DATA / "chat_bad_line.jsonl").read_text(encoding="utf-8")
    error = run("import", "-", "-f", "chat", "--db", str(tmp_path / "m.db"), input=chat, code=1).stderr
    assert error.startswith("memsearch: stdin, line 3:") and "/tmp" not in error and len(error.splitlines()) == 1


def test_an_internal_error_hints_at_debug_only_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Memsearch) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Memsearch, "stats", broken)
    plain = run("stats", code=1).stderr
    assert plain == "memsearch: internal error: RuntimeError: a bug (rerun with --debug for the traceback)\n"
    debug = run("--debug", "stats", code=1).stderr
    assert "Traceback" in debug and debug.splitlines()[-1] == "memsearch: internal error: RuntimeError: a bug"


@pytest.mark.parametrize(
    ("db", "words"),
    [
        (".", ["is a directory, not a memsearch store file"]),
        ("/dev/null", ["/dev/null is not a regular file"]),
    ],
)
def test_a_store_path_that_is_no_file_says_what_to_give(db: str, words: list[str]) -> None:
    for command in (["list"], ["add", "x"], ["stats"]):
        error = run(*command, "--db", db, code=1).stderr
        assert len(error.splitlines()) == 1 and "internal error" not in error
        assert all(word in error for word in words) and "give the path of a store file" in error


def test_a_store_held_by_another_writer_says_to_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memsearch.store.sqlite as sqlite_store
    from memsearch.store.sqlite_driver import sqlite3

    db = tmp_path / "m.db"
    run("add", "the first note", "--db", str(db))
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 300)  # the wait a writer gives another, shortened
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        error = run("add", "a second note", "--db", str(db), code=1).stderr
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(error.splitlines()) == 1 and "internal error" not in error
    assert "is busy: another process held it" in error and "run it again" in error
    assert json.loads(run("stats", "--db", str(db), "-f", "json").stdout)["memories"] == 1


@pytest.mark.slow  # loads the model: out of the quick tier
def test_a_model_cache_that_cannot_be_written_names_the_setting(tmp_path: Path) -> None:
    from tests.reliability.helpers import run_cli  # a process of its own: this one holds a loaded model

    (tmp_path / "a-file").write_text("x")
    done = run_cli("add", "a note", "--db", str(tmp_path / "m.db"), MEMSEARCH_CACHE_DIR=str(tmp_path / "a-file"))
    error = done.stderr.decode().splitlines()[-1]
    assert done.returncode == 1 and "internal error" not in error
    assert "set MEMSEARCH_CACHE_DIR to a folder you can write to" in error
