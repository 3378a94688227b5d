"""Curation on the command line (issue 22): `delete` by every filter `list` takes, with
`--dry-run` and `--all`; `tags` with counts; `set --text`; `edit` through a real editor process;
and the filter options declared once for every command that takes them (issue 21)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from memsearch.cli.app import app
from memsearch.operations import SCOPE_FIELDS

runner = CliRunner()


def run(*args: str, code: int = 0, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    result = runner.invoke(app, list(args), env=env, input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def listed(*args: str) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = json.loads(run("list", "--all", "-f", "json", *args).stdout)
    return documents


@pytest.fixture
def filled() -> None:
    for text, options in (
        ("the deploy key lives in the vault", ["-t", "ops", "-t", "secret", "--key", "vault"]),
        ("rotate the deploy key every quarter", ["-t", "ops", "--project", "work"]),
        ("lunch with Ana on friday", ["-t", "food", "-t", "people"]),
        ("Ana likes oat milk", ["-t", "people", "--project", "work"]),
        ("an untagged thought", []),
    ):
        run("add", text, *options)


# -- delete by filter -----------------------------------------------------------------------------


def test_delete_dry_run_shows_what_list_shows_and_deletes_nothing(filled: None) -> None:
    dry = run("delete", "--tag", "ops", "--dry-run", "-f", "json")
    assert json.loads(dry.stdout) == listed("--tag", "ops")
    assert "would delete 2 memories" in dry.stderr and "nothing was deleted" in dry.stderr
    table = run("delete", "--project", "work", "--tag", "people", "--dry-run").stdout.splitlines()
    assert table[0].split("\t")[0] == "id" and [line.split("\t")[-1] for line in table[1:]] == ["Ana likes oat milk"]
    assert len(listed()) == 5


def test_delete_by_filter(filled: None) -> None:
    deleted = run("delete", "--tag", "ops")
    assert deleted.stderr.startswith("deleted 2 memories: ")
    assert [m["text"] for m in listed()] == ["an untagged thought", "Ana likes oat milk", "lunch with Ana on friday"]
    assert "no memory matches" in run("delete", "--tag", "ops").stderr
    run("delete", "--since", "1d", "--kind", "note", "--project", "work")
    assert [m["text"] for m in listed()] == ["an untagged thought", "lunch with Ana on friday"]


def test_delete_refuses_to_delete_everything_unless_asked(filled: None) -> None:
    refused = run("delete", code=2)
    assert "nothing to delete" in refused.stderr and "--all" in refused.stderr
    assert "not both" in run("delete", "vault", "--tag", "ops", code=2).stderr
    assert "not both" in run("delete", "vault", "--all", code=2).stderr
    assert len(listed()) == 5
    assert "would delete 5 memories" in run("delete", "--all", "--dry-run").stderr
    assert run("delete", "--all").stderr.startswith("deleted 5 memories")
    assert listed() == []


def test_delete_by_id_and_key_still_works_and_dry_runs(filled: None) -> None:
    assert [m["key"] for m in json.loads(run("delete", "vault", "--dry-run", "-f", "json").stdout)] == ["vault"]
    assert run("delete", "vault", "5").stderr.strip() == "deleted 2 memories: 1, 5"
    assert len(listed()) == 3


# -- tags -----------------------------------------------------------------------------------------


def test_tags_with_counts(filled: None) -> None:
    assert run("tags").stdout.splitlines() == ["tag\tmemories", "ops\t2", "people\t2", "food\t1", "secret\t1"]
    assert json.loads(run("tags", "--project", "work", "-f", "json").stdout) == [
        {"tag": "ops", "memories": 1},
        {"tag": "people", "memories": 1},
    ]
    lines = run("tags", "--tag", "people", "-f", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [{"tag": "people", "memories": 2}, {"tag": "food", "memories": 1}]
    assert run("tags", "--namespace", "nowhere").stdout.splitlines() == ["tag\tmemories"]


def test_tags_take_the_configured_project_like_list(filled: None) -> None:
    env = {"MEMSEARCH_PROJECT": "work"}
    assert json.loads(run("tags", "-f", "json", env=env).stdout) == [
        {"tag": "ops", "memories": 1},
        {"tag": "people", "memories": 1},
    ]


# -- set --text and edit --------------------------------------------------------------------------


def top_texts(query: str, mode: str) -> list[str]:
    document = json.loads(run("search", query, "--mode", mode, "-k", "1", "--no-touch", "-f", "json").stdout)
    return [result["text"] for result in document["results"]]


def test_set_text_is_searched_by_its_new_words(filled: None) -> None:
    shown = json.loads(run("set", "vault", "--text", "the deploy key moved to the keyring", "-f", "json").stdout)
    assert shown["text"] == "the deploy key moved to the keyring" and shown["tags"] == ["ops", "secret"]
    for mode in ("vector", "lexical"):
        assert top_texts("keyring", mode) == ["the deploy key moved to the keyring"]
    assert top_texts("vault", "lexical") == []
    run("set", "3", "--text", "-", input="dinner with Ana\n")
    assert [m["text"] for m in listed() if m["id"] == 3] == ["dinner with Ana\n"]
    assert "empty" in run("set", "3", "--text", " ", code=2).stderr


def _editor(tmp_path: Path, body: str) -> str:
    """A real editor command: a Python script run on the file, as $EDITOR would be."""
    script = tmp_path / "editor.py"
    script.write_text("import os, sys\npath = sys.argv[1]\n" + body, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def test_edit_replaces_the_text_through_the_editor(filled: None, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    editor = _editor(
        tmp_path,
        "import json, stat\n"
        "modes = [stat.S_IMODE(os.stat(p).st_mode) for p in (path, os.path.dirname(path))]\n"
        f"json.dump({{'text': open(path).read(), 'modes': modes, 'path': path}}, open({str(seen)!r}, 'w'))\n"
        "open(path, 'w').write('the deploy key moved to the keyring\\n')\n",
    )
    shown = run("edit", "vault", "-f", "json", env={"VISUAL": "", "EDITOR": editor})
    assert json.loads(shown.stdout)["text"] == "the deploy key moved to the keyring"  # the editor's final newline goes
    before = json.loads(seen.read_text())
    assert before["text"] == "the deploy key lives in the vault"
    assert before["modes"] == [0o600, 0o700]  # only the user can read the text, in a folder of its own
    assert not Path(before["path"]).exists() and not Path(before["path"]).parent.exists()
    for mode in ("vector", "lexical"):
        assert top_texts("keyring", mode) == ["the deploy key moved to the keyring"]
    # VISUAL comes before EDITOR
    visual = _editor(tmp_path, "open(path, 'w').write('from visual')\n")
    run("edit", "vault", env={"VISUAL": visual, "EDITOR": "false"})
    assert [m["text"] for m in listed() if m["key"] == "vault"] == ["from visual"]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ("pass\n", 0, "the text is unchanged; nothing changed"),
        ("open(path, 'w').write('the deploy key lives in the vault\\n')\n", 0, "the text is unchanged"),
        ("open(path, 'w').write('  \\n')\n", 0, "the text is empty; nothing changed"),
        ("open(path, 'w').write('half-written')\nsys.exit(3)\n", 1, "exited with status 3; nothing changed"),
        ("open(path, 'wb').write('caf\\xe9'.encode('latin-1'))\n", 1, "cannot read the edited text"),
        ("os.remove(path)\n", 1, "cannot read the edited text"),
    ],
)
def test_edit_changes_nothing_unless_the_editor_saves_a_new_text(
    filled: None, tmp_path: Path, body: str, code: int, message: str
) -> None:
    before = listed()
    result = run("edit", "vault", env={"VISUAL": "", "EDITOR": _editor(tmp_path, body)}, code=code)
    assert message in result.stderr and result.stdout == ""
    assert listed() == before


def test_edit_with_an_editor_that_cannot_run(filled: None) -> None:
    result = run("edit", "vault", env={"VISUAL": "", "EDITOR": "no-such-editor-here --wait"}, code=1)
    assert result.stderr.strip() == (
        "memsearch: cannot run the editor 'no-such-editor-here --wait': No such file or directory; nothing changed"
    )


# -- the filter options, declared once ------------------------------------------------------------


@pytest.mark.parametrize("name", ["list", "search", "export", "delete", "tags"])
def test_every_filtering_command_has_every_filter_option_alike(name: str) -> None:
    import typer.main

    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    options = {param.name: param for param in command.params}
    reference = {param.name: param for param in typer.main.get_command(app).commands["list"].params}  # type: ignore[attr-defined]
    for scope_field in SCOPE_FIELDS:
        option = options[scope_field.query_name]
        assert option.opts[0] == f"--{scope_field.query_name}"
        assert option.multiple == (scope_field.type == "array")
        same = reference[scope_field.query_name]
        assert (option.opts, option.help, option.multiple) == (same.opts, same.help, same.multiple)
