"""The config file: defaults for profile, limit, format, project and db; MEMSEARCH_* variables over
it; flags over both; `memsearch config` says where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.cli.app import app
from memsearch.config import load_config
from memsearch.errors import ConfigError

runner = CliRunner()


def run(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def notes() -> None:
    run("add", "the deploy key lives in the vault", "--project", "web")
    run("add", "the deploy script needs a key too", "--project", "cli")
    run("add", "rotate the deploy key every quarter")


def test_the_file_sets_the_defaults(isolated_home: Path, notes: None) -> None:
    write_config(isolated_home, 'format = "json"\nlimit = 1\nproject = "web"\nprofile = "cems"\n')
    document = json.loads(run("search", "deploy key").stdout)
    assert document["profile"] == "cems" and len(document["results"]) == 1
    assert [m["project"] for m in json.loads(run("list").stdout)] == ["web"]
    run("add", "a note of the web project")
    assert [m["project"] for m in json.loads(run("list", "--project", "").stdout)].count("web") == 2


def test_environment_beats_the_file_and_flags_beat_both(
    isolated_home: Path, notes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(isolated_home, 'format = "json"\nlimit = 1\n')
    monkeypatch.setenv("MEMSEARCH_LIMIT", "2")
    monkeypatch.setenv("MEMSEARCH_FORMAT", "jsonl")
    assert len(json.loads(run("search", "deploy key").stdout)["results"]) == 2
    assert len(json.loads(run("search", "deploy key", "-k", "3", "-f", "json").stdout)["results"]) == 3
    assert run("list", "-f", "table").stdout.startswith("id\tcreated\t")  # a table (plain: not a terminal)


def test_config_shows_each_value_and_where_it_came_from(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(isolated_home, '# mine\nformat = "csv"\n\napi_key = "s3cret"\nlimit = 4\n')
    monkeypatch.setenv("MEMSEARCH_LIMIT", "7")
    document = json.loads(run("config", "-f", "json").stdout)
    settings = {s["name"]: s for s in document["settings"]}
    assert document["path"] == str(path) and document["exists"] is True
    assert settings["format"] == {"name": "format", "value": "csv", "source": "file", "origin": f"{path}, line 2"}
    assert settings["limit"] == {"name": "limit", "value": 7, "source": "env", "origin": "MEMSEARCH_LIMIT"}
    assert settings["profile"] == {"name": "profile", "value": "default", "source": "default", "origin": None}
    assert settings["api_key"]["value"] == "(set)"
    assert document["store"] == str(isolated_home / "memsearch.db")
    table = run("config", "-f", "table").stdout
    assert "s3cret" not in table and "MEMSEARCH_LIMIT" in table and "line 2" in table


def test_db_in_the_file_chooses_the_store(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "elsewhere.db"
    write_config(isolated_home, f"db = {json.dumps(str(store))}\n")
    run("add", "a note")
    assert store.is_file() and run("path").stdout.strip() == str(store)
    monkeypatch.setenv("MEMSEARCH_DB", str(tmp_path / "env.db"))
    assert run("path").stdout.strip() == str(tmp_path / "env.db")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('format = "json\n', "is not valid TOML: Illegal character '\\n' (at line 1, column 15)"),
        ('format = "json"\nlimt = 3\n', "line 2: unknown key 'limt' (known: profile, limit, format"),
        ('\n\nlimit = "ten"\n', "line 3: limit must be a whole number from 1 to 1000, not 'ten'"),
        ('format = "xml"\n', "line 1: format must be one of table, json, jsonl, ndjson, csv, not 'xml'"),
        ('project = ""\n', "line 1: project must be a non-empty string"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_line(isolated_home: Path, text: str, message: str) -> None:
    path = write_config(isolated_home, text)
    for args in (["list"], ["config"], ["search", "x"]):
        result = run(*args, code=1)
        (line,) = result.stderr.strip().splitlines()
        assert result.stdout == "" and line.startswith(f"memsearch: {path}") and message in line


def test_a_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSEARCH_FORMAT", "yaml")
    with pytest.raises(ConfigError, match="MEMSEARCH_FORMAT: format must be one of"):
        load_config()
    result = run("list", code=1)
    assert "MEMSEARCH_FORMAT" in result.stderr


def test_help_and_completions_work_without_a_config_file(isolated_home: Path) -> None:
    write_config(isolated_home, "broken = [\n")
    assert run("--help").stdout
    assert run("completions", "bash").stdout
