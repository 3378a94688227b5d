"""Notes true to their files on the command line and over HTTP (issue 29, part 2): roots listed,
forgotten and pruned; set, edit and delete on a section (and an HTTP delete's 409); results a row
per file; `index --watch` with a real watcher on a folder, in a process of its own, stopped by
Ctrl-C."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from tests.serving import start_server
from tests.test_cli import unstyled
from tests.test_index import DEPLOY, GARDEN, write

runner = CliRunner()
TERMINAL = {"TTY_COMPATIBLE": "1", "COLUMNS": "160", "TERM": "xterm", "NO_COLOR": "1"}


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "notes"
    write(folder / "deploy.md", "---\ntitle: Deploy guide\n---\n" + DEPLOY.split("---\n", 2)[2])
    write(folder / "garden.md", GARDEN)
    monkeypatch.chdir(tmp_path)
    return folder


def section_ids(path: str) -> list[int]:
    memories = json.loads(run("list", "-f", "json").stdout)
    mine = [m for m in memories if m["metadata"].get("path", "").endswith(path)]
    return [m["id"] for m in sorted(mine, key=lambda m: m["metadata"]["start_line"])]


def test_roots_are_listed_forgotten_and_pruned(notes: Path, tmp_path: Path) -> None:
    run("index", "notes")
    write(tmp_path / "more" / "recipes.md", "# Risotto\nStir.\n")
    run("index", "more")
    listed = run("index", "--roots").stdout.splitlines()
    assert listed[0].split("\t") == ["path", "state", "files", "memories", "include", "exclude"]
    assert listed[1:] == ["more\tok\t1\t1\t\t", "notes\tok\t2\t4\t\t"]
    shutil.move(tmp_path / "more", tmp_path / "elsewhere")
    update = run("index")
    assert "skipped more: is a remembered root that no longer exists" in update.stderr
    assert [root["state"] for root in json.loads(run("index", "--roots", "-f", "json").stdout)] == ["missing", "ok"]
    assert len(json.loads(run("list", "-f", "json").stdout)) == 5  # its memories are kept until the user says
    pruned = run("index", "--prune")
    assert pruned.stderr.splitlines() == ["forgot more (missing)", "removed 1 memory of 1 file"]
    forgotten = json.loads(run("index", "--forget", "notes", "-f", "json").stdout)
    assert (forgotten["memories_removed"], forgotten["files_removed"]) == (4, 2)
    assert run("list", "-f", "json").stdout.strip() == "[]"
    missing = run("index", "--forget", "notes", code=2)
    assert missing.stderr.strip().endswith("notes is not a remembered folder of notes")
    assert run("index", "--roots", "notes", code=2).stderr.count("\n") == 1


def test_set_and_delete_refuse_a_section_naming_its_line_and_edit_opens_the_file(
    notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("index", "notes")
    heading, rollback = section_ids("deploy.md")
    refused = run("set", str(rollback), "--text", "something else", code=1)
    assert refused.stderr.count("\n") == 1 and "is the section of notes/deploy.md:8" in refused.stderr
    assert f"`memsearch edit {rollback}` opens it there" in refused.stderr
    deleted = run("delete", str(rollback), code=1)
    assert deleted.stderr.count("\n") == 1 and "notes/deploy.md:8; delete it from the file" in deleted.stderr
    assert json.loads(run("set", str(rollback), "--importance", "0.9", "-f", "json").stdout)["importance"] == 0.9
    # an editor that records how it was called and adds a line under the section's heading
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "line, path = int(sys.argv[1][1:]), pathlib.Path(sys.argv[2])\n"
        "lines = path.read_text().split('\\n')\n"
        "lines.insert(line, 'Ask Ana before a rollback.')\n"
        "path.write_text('\\n'.join(lines))\n"
        "pathlib.Path(sys.argv[0]).with_suffix('.log').write_text(' '.join(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("VISUAL", f"{sys.executable} {editor}")
    edited = run("edit", str(rollback))
    assert editor.with_suffix(".log").read_text() == f"+8 {(notes / 'deploy.md').resolve()}"
    assert "1 changed" in edited.stderr
    shown = json.loads(run("search", "ask ana", "--mode", "lexical", "-f", "json", "-k", "1").stdout)["results"][0]
    assert shown["text"].startswith("## Rollback\nAsk Ana before a rollback.") and shown["id"] != rollback
    assert section_ids("deploy.md")[0] == heading  # the section above kept its memory


def test_results_show_a_row_per_file_on_a_terminal_and_path_line_in_every_preview(notes: Path) -> None:
    write(notes / "long.md", "# Long\n\n" + "filler words here. " * 60 + "the needle is here.\n")
    run("index", "notes")
    query = ("search", "rollback release deploy", "--mode", "lexical", "--no-touch")
    grouped = unstyled(run(*query, env=TERMINAL).stdout)
    assert "notes/deploy.md — Deploy guide" in grouped and "│   :4  # Deploy" in grouped
    assert "│   :8  ## Rollback" in grouped
    flat = unstyled(run(*query, "--per-file", "0", env=TERMINAL).stdout)
    assert "notes/deploy.md:4  # Deploy" in flat and "— Deploy guide" not in flat
    piped = run(*query).stdout  # a pipe: a row per section, as before
    assert sorted(line.split("\t")[5].split(" ")[0] for line in piped.splitlines()[1:]) == [
        "notes/deploy.md:4", "notes/deploy.md:8"
    ]  # fmt: skip
    document = json.loads(run(*query, "--per-file", "1", "-f", "json").stdout)
    assert [(Path(g["path"]).name, g["title"], len(g["ids"]), g["more"]) for g in document["groups"]] == [
        ("deploy.md", "Deploy guide", 1, 1)
    ]
    # a long section previewed from its first match still says where it is
    needle = unstyled(
        run("search", "needle", "--mode", "lexical", "--per-file", "0", "--no-touch", env=TERMINAL).stdout
    )
    assert "notes/long.md:1  …" in needle


def test_index_watch_keeps_the_store_in_step_until_ctrl_c(tmp_path: Path, encoder: Encoder) -> None:
    notes = tmp_path / "notes"
    write(notes / "garden.md", GARDEN)
    db = tmp_path / "store" / "memsearch.db"
    command = [sys.executable, "-m", "memsearch", "index", "--watch", str(notes), "--db", str(db)]
    watcher = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read_lines() -> None:
        for line in watcher.stderr or ():
            lines.put(line)

    threading.Thread(target=read_lines, daemon=True).start()

    def wait_for(text: str, seconds: float = 120) -> str:
        deadline = time.monotonic() + seconds
        seen = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} in {seen}")

    try:
        assert "1 new" in wait_for("indexed 1 file")
        wait_for("watching 1 folder for changes")
        write(notes / "deploy.md", DEPLOY)
        assert "1 new" in wait_for("indexed")
        write(notes / "garden.md", GARDEN.replace("soapy water", "neem oil"))
        assert "1 changed" in wait_for("indexed")
        (notes / "deploy.md").unlink()
        assert "1 removed" in wait_for("indexed")
        watcher.send_signal(signal.SIGINT)
        wait_for("stopped watching", 30)
        assert watcher.wait(timeout=30) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(timeout=30)
    listed = subprocess.run(
        [sys.executable, "-m", "memsearch", "list", "-f", "json", "--db", str(db)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    texts = [memory["text"] for memory in json.loads(listed.stdout)]
    assert len(texts) == 2 and any("neem oil" in text for text in texts)


@pytest.fixture(autouse=True)
def _no_editor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test names the editor it runs, if any."""
    for name in ("VISUAL", "EDITOR"):
        monkeypatch.delenv(name, raising=False)


def test_the_http_api_refuses_to_delete_a_section_with_a_409_naming_it(
    notes: Path, db_path: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        rollback = next(m for m in ms.list() if m.metadata.get("start_line") == 8)
    server = start_server(db_path)
    try:
        refused = server.request("DELETE", f"/memories/{rollback.id}")
        assert refused.status == 409 and refused.json()["type"] == "NoteSectionError"
        assert "deploy.md:8" in refused.json()["error"]
        assert server.request("GET", f"/memories/{rollback.id}").status == 200
    finally:
        server.stop()
