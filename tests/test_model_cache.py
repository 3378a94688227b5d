"""One model cache per user, not per MEMSEARCH_HOME (issue 22): a new home uses the export the
user has already (an export is 174 MB and needs torch); a cache another user could have written
is not used; an export an older memsearch kept in a home is moved into the cache.

The user's export is the session's, hard-linked into a temporary user cache dir (XDG_CACHE_HOME),
so no test here exports the model again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder, ModelSpec, resolve_model
from memsearch.embedding.onnx import adopted_home_export, ensure_export, export_dir, model_fingerprint
from memsearch.errors import EmbeddingError
from memsearch.paths import make_private_dirs

# A CLI command in a child process, then whether it imported torch (an export needs it).
_RUN = """
import json, sys
from memsearch.cli.app import app
sys.argv = ["memsearch", *sys.argv[1:]]
try:
    app()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


# Most tests here export the model in one or two child processes, from scratch (torch), each
# allowed 300 s.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: Encoder) -> tuple[Path, Path]:
    """The user cache dir's model folder (no MEMSEARCH_CACHE_DIR), and the session's export."""
    session_export = export_dir(resolve_model())  # encoder: the session's export exists
    monkeypatch.delenv("MEMSEARCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "memsearch" / "onnx", session_export


def _link_export(made: Path, target: Path) -> None:
    make_private_dirs(target.parent)
    shutil.copytree(made, target, copy_function=os.link, ignore=shutil.ignore_patterns(".*"))


def _own_copy(path: Path) -> None:
    """`path` as a file of its own, not a link to the session's export (to change its mode or owner)."""
    shutil.copyfile(path, path.with_name(".copy"))
    path.with_name(".copy").replace(path)


def _run(home: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "MEMSEARCH_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return {**report, "stderr": done.stderr}


def test_two_homes_share_the_users_export(tmp_path: Path, user_cache: tuple[Path, Path]) -> None:
    onnx, made = user_cache
    spec = resolve_model()
    _link_export(made, onnx / model_fingerprint(spec))
    manifest = onnx / model_fingerprint(spec) / "manifest.json"
    before = (sorted(os.listdir(onnx)), manifest.stat().st_mtime_ns, manifest.stat().st_ino)
    for home in (tmp_path / "home-a", tmp_path / "home-b"):
        added = _run(home, "add", "the deploy key lives in the vault")
        searched = _run(home, "search", "deploy key", "--mode", "hybrid")
        for report in (added, searched):
            assert report["code"] == 0 and report["torch"] is False, report  # no export made
        assert not (home / "cache" / "onnx").exists()
    assert (sorted(os.listdir(onnx)), manifest.stat().st_mtime_ns, manifest.stat().st_ino) == before
    assert export_dir(spec).parent == onnx


def test_memsearch_cache_dir_still_moves_the_model_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model()
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert export_dir(spec) == tmp_path / "elsewhere" / "onnx" / model_fingerprint(spec)


@pytest.mark.parametrize("loose", ["root", "export", "file"])
def test_a_cache_other_users_may_write_is_not_used(tmp_path: Path, user_cache: tuple[Path, Path], loose: str) -> None:
    onnx, made = user_cache
    spec = resolve_model()
    target = onnx / model_fingerprint(spec)
    _link_export(made, target)
    path = {"root": onnx, "export": target, "file": target / "tokenizer.json"}[loose]
    if loose == "file":
        _own_copy(path)
    mode = path.stat().st_mode
    path.chmod(0o777 if path.is_dir() else 0o666)
    with pytest.raises(EmbeddingError, match=f"not safe to use: other users may write {'folder ' * path.is_dir()}"):
        ensure_export(spec)
    with Memsearch(tmp_path / "store.db") as ms:  # doctor says so, and why
        found = [f for f in ms.doctor().findings if f.name == "model cache"]
        assert [f.level for f in found] == ["problem"] and str(path) in found[0].detail
    path.chmod(mode)
    assert ensure_export(spec) == target


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_cache_file_of_another_user_is_not_used(user_cache: tuple[Path, Path]) -> None:
    onnx, made = user_cache
    spec = resolve_model()
    target = onnx / model_fingerprint(spec)
    _link_export(made, target)
    _own_copy(target / "tokenizer.json")  # the session's stays the test user's
    os.chown(target / "tokenizer.json", 65534, 65534)
    with pytest.raises(EmbeddingError, match="belongs to another user"):
        ensure_export(spec)


def test_an_export_a_home_kept_is_moved_into_the_users_cache(
    tmp_path: Path, user_cache: tuple[Path, Path], isolated_home: Path
) -> None:
    onnx, made = user_cache
    spec = resolve_model()
    old = isolated_home / "cache" / "onnx" / model_fingerprint(spec)
    _link_export(made, old)
    inode = (old / "model.onnx").stat().st_ino
    assert ensure_export(spec) == onnx / model_fingerprint(spec)
    assert (onnx / model_fingerprint(spec) / "model.onnx").stat().st_ino == inode  # moved, not made again
    assert not old.exists()


def test_an_untrusted_export_a_home_kept_is_ignored(user_cache: tuple[Path, Path], isolated_home: Path) -> None:
    onnx, made = user_cache
    spec = resolve_model()
    old = isolated_home / "cache" / "onnx" / model_fingerprint(spec)
    _link_export(made, old)
    old.chmod(0o777)
    target = onnx / model_fingerprint(spec)
    assert adopted_home_export(target) == target and old.is_dir() and not target.exists()


def test_another_model_has_an_export_of_its_own(tmp_path: Path) -> None:
    copy = tmp_path / "my-model"
    shutil.copytree(resolve_model().path, copy)
    other = ModelSpec(str(copy), copy)
    assert export_dir(other) != export_dir(resolve_model())
    assert export_dir(other).parent == export_dir(resolve_model()).parent


@pytest.mark.soak
@pytest.mark.timeout(3600)  # minutes of load by design
def test_two_homes_exporting_at_once_leave_one_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two first runs in two new homes at the same moment, from scratch (torch, about a minute):
    both succeed, and the user's cache holds one complete export and no staging folder."""
    monkeypatch.delenv("MEMSEARCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code = "from memsearch.embedding import load_encoder, resolve_model; load_encoder(resolve_model(), 'onnx')"
    children = [
        subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "MEMSEARCH_HOME": str(tmp_path / name)})
        for name in ("home-a", "home-b")
    ]
    assert [child.wait(timeout=900) for child in children] == [0, 0]
    onnx = tmp_path / "xdg" / "memsearch" / "onnx"
    assert os.listdir(onnx) == [model_fingerprint(resolve_model())]
    assert (onnx / model_fingerprint(resolve_model()) / "manifest.json").is_file()
