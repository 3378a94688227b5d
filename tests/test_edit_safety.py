"""`memsearch edit` loses nothing (issue 30): a change made while the editor is open is not
overwritten (the edit is kept in a file and the command says where), and with no editor set and
no terminal it says what to set instead of waiting on vi. The library's check holds in the
write's own transaction, on both stores."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.curation import edit_text
from memsearch.embedding import Encoder
from memsearch.errors import EditConflictError
from memsearch.models import NewMemory
from tests.reliability.helpers import child_env

runner = CliRunner()


def _editor(tmp_path: Path, body: str) -> str:
    """An $EDITOR: a Python script run on the file."""
    script = tmp_path / "editor.py"
    script.write_text("import os, subprocess, sys\npath = sys.argv[1]\n" + body, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


@pytest.mark.timeout(600)  # the editor runs memsearch set in a child allowed 300 s
def test_a_change_made_while_the_editor_is_open_is_not_overwritten(db_path: Path, encoder: Encoder) -> None:
    """The editor itself runs `memsearch set --text` (another process) before it saves: no sleep,
    the change is made while the file is open, as a user's second terminal would."""
    with Memsearch(db_path, encoder=encoder) as ms:
        memory_id = ms.add(NewMemory("the deploy key lives in the vault")).id
    setter = [sys.executable, "-m", "memsearch", "set", str(memory_id), "--text", "the key moved to the HSM"]
    editor = _editor(
        db_path.parent,
        f"done = subprocess.run({[*setter, '--db', str(db_path)]!r}, capture_output=True, timeout=300)\n"
        "assert done.returncode == 0, done.stderr\n"
        "open(path, 'w').write('the deploy key lives in the team vault\\n')\n",
    )
    result = runner.invoke(app, ["edit", str(memory_id), "--db", str(db_path)], env={"VISUAL": "", "EDITOR": editor})
    assert result.exit_code == 1, (result.stdout, result.stderr)
    message = result.stderr.strip()
    assert message.startswith(f"memsearch: memory {memory_id} changed while it was being edited; nothing was written")
    kept = Path(message.rpartition("your edit is kept in ")[2])
    assert kept.read_text(encoding="utf-8") == "the deploy key lives in the team vault"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    with Memsearch(db_path, encoder=encoder) as ms:
        assert ms.get(memory_id).text == "the key moved to the HSM"  # the other change stands


def test_an_edit_saved_as_the_other_change_left_it_changes_nothing(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        memory_id = ms.add(NewMemory("the deploy key lives in the vault")).id
        ms.update(memory_id, text="the key moved to the HSM")
        # the edit started from the old text, and saved what the other change wrote: nothing is lost
        same = ms.update(memory_id, text="the key moved to the HSM", expected_text="the deploy key lives in the vault")
        assert same.text == "the key moved to the HSM"
        with pytest.raises(EditConflictError, match="changed while it was being edited; nothing was written"):
            ms.update(memory_id, text="a third text", expected_text="the deploy key lives in the vault")
        assert ms.get(memory_id).text == "the key moved to the HSM"
        assert (
            ms.update(memory_id, text="a third text", expected_text="the key moved to the HSM").text == "a third text"
        )


@pytest.mark.parametrize("kind", ["note", "turn"])
def test_the_store_refuses_an_edit_of_a_text_that_changed_within_its_transaction(
    store_location: Path | str, encoder: Encoder, kind: str
) -> None:
    """The check is made where the write holds the row: an edit made from a text that is no longer
    stored (changed after the library read it) writes nothing, its session views included."""
    with Memsearch(store_location, encoder=encoder) as ms:
        if kind == "note":
            memory = ms.get(ms.add(NewMemory("the deploy key lives in the vault")).id)
        else:
            chat = "\n".join(
                f'{{"session": "s1", "role": "{role}", "text": "{text}", "created_at": "2024-05-0{n}T10:00:00Z"}}'
                for n, (role, text) in enumerate([("ana", "where is the deploy key"), ("ben", "in the vault")], 1)
            )
            ms.import_text(chat, source="chat", fmt="chat", conversation="c")
            memory = next(m for m in ms.list() if m.kind == "turn" and m.text.endswith("in the vault"))
        ms.update(memory.id, text="moved to the HSM")
        before = {m.id: m.text for m in ms.list()}
        with pytest.raises(EditConflictError):
            edit_text(ms, memory, "a stale edit")  # `memory` holds the text as it was read, before the change
        assert {m.id: m.text for m in ms.list()} == before


@pytest.mark.parametrize("kind", ["memory", "section"])
def test_edit_without_an_editor_or_a_terminal_says_what_to_set(
    tmp_path: Path, db_path: Path, encoder: Encoder, kind: str
) -> None:
    """No $VISUAL, no $EDITOR, stdin and stdout not a terminal: vi would wait forever for one.
    A `vi` on PATH records that it ran (and exits at once, so the old behaviour fails, not hangs).
    A note's section, edited in its file at its line, follows the same rule."""
    with Memsearch(db_path, encoder=encoder) as ms:
        if kind == "memory":
            memory_id = ms.add(NewMemory("the deploy key lives in the vault")).id
        else:
            note = tmp_path / "notes" / "deploy.md"
            note.parent.mkdir()
            note.write_text("# Deploy\n\nThe deploy key lives in the vault.\n", encoding="utf-8")
            ms.index([note.parent])
            (memory_id,) = [memory.id for memory in ms.list()]
    bin_dir, ran = tmp_path / "bin", tmp_path / "vi-ran"
    bin_dir.mkdir()
    (bin_dir / "vi").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(ran))}\n", encoding="utf-8")
    (bin_dir / "vi").chmod(0o755)
    env = {name: value for name, value in child_env().items() if name not in ("VISUAL", "EDITOR")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-m", "memsearch", "edit", str(memory_id), "--db", str(db_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.decode().strip() == (
        "memsearch: no editor: set $VISUAL or $EDITOR (vi needs a terminal, and there is none)"
    )
    assert not ran.exists() and done.stdout == b""
