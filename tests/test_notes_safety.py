"""`memsearch index` read as an attacker would have it: files swapped between the walk and the read
(for a symlink, a FIFO, another file, a device), names that are not UTF-8, a .gitignore made to
backtrack, roots and folders other users own or may write, escape sequences in file names, and
every argument of `Memsearch.index`. The swaps are made deterministically between the two phases:
after the real walk returns and before the plan reads (a hook on `indexing.walk`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError, MemsearchError
from memsearch.ingest import indexing, note_files
from memsearch.ingest.note_files import FileStatus, _matcher, _pattern, _spec, plan, walk, walked_reader
from memsearch.ingest.safe_files import _private_group
from tests.test_api_contract import TEXT, VALUES

SECRET = "root:$6$SECRET-HASH:19000:0:99999:7:::"
NOTE = "# Plan\n\nShip the release on Friday after the review.\n"
OTHER_UID = 65534  # nobody
OTHER_GID = 65534  # nogroup: the primary group of several users, no one's own
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file only its owner may read, outside the notes (/etc/shadow's like)."""
    path = write(tmp_path / "private" / "shadow.md", SECRET + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root / "plan.md", NOTE)
    write(root / "sub" / "deep.md", "# Deep\n\nA note one folder down.\n")
    return root.resolve()


def walk_then(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """`index` walks as it does, then `swap` runs, then it plans and reads."""
    real = note_files.walk

    def walk_and_swap(*args: Any, **kwargs: Any) -> list[note_files.FileState]:
        found = real(*args, **kwargs)
        swap()
        return found

    monkeypatch.setattr(indexing, "walk", walk_and_swap)


def texts(ms: Memsearch) -> str:
    return "\n".join(memory.text for memory in ms.list())


def reasons(skipped: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> dict[str, str]:
    return {Path(path).name: reason for path, reason in skipped}


# -- open what was walked -------------------------------------------------------------------------


def replace_with_symlink(path: Path, target: Path) -> Callable[[], None]:
    def swap() -> None:
        path.unlink()
        path.symlink_to(target)

    return swap


def test_a_file_swapped_for_a_symlink_after_the_walk_is_not_followed(
    notes: Path, secret: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    walk_then(monkeypatch, replace_with_symlink(notes / "plan.md", secret))
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
        assert "SECRET" not in texts(ms)
    assert reasons(outcome.skipped)["plan.md"] == "became a symlink after the walk; not followed"
    assert outcome.counts["new"] == 1 and outcome.counts["skipped"] == 1


def test_a_file_swapped_for_another_file_is_not_read(
    notes: Path, secret: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:  # a hard link to the secret, renamed over the note: a regular file, not a link
        os.link(secret, notes / "swap.tmp")
        os.replace(notes / "swap.tmp", notes / "plan.md")

    walk_then(monkeypatch, swap)
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
        assert "SECRET" not in texts(ms)
    assert reasons(outcome.skipped)["plan.md"] == "was replaced by another file after the walk; not read"


def test_a_folder_on_the_way_swapped_for_a_symlink_is_not_followed(
    notes: Path, tmp_path: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = write(tmp_path / "elsewhere" / "deep.md", SECRET).parent

    def swap() -> None:
        (notes / "sub").rename(notes / "sub-was")
        (notes / "sub").symlink_to(elsewhere)

    walk_then(monkeypatch, swap)
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
        assert "SECRET" not in texts(ms)
    assert reasons(outcome.skipped)["deep.md"] == "a folder on its path became a symlink or a file; not followed"


@pytest.mark.timeout(60)
def test_a_file_swapped_for_a_fifo_does_not_hang_the_run(
    notes: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (notes / "plan.md").unlink()
        os.mkfifo(notes / "plan.md")

    walk_then(monkeypatch, swap)
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
    assert reasons(outcome.skipped)["plan.md"] == "is a FIFO, not a regular file; not read"


@pytest.mark.timeout(60)
def test_a_link_to_dev_zero_or_a_device_is_never_read(
    notes: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[bool] = []

    def swap() -> None:
        replace_with_symlink(notes / "plan.md", Path("/dev/zero"))()
        (notes / "sub" / "deep.md").unlink()
        try:  # a device node in the folder itself (/dev/zero's; root may make one where the container allows)
            os.mknod(notes / "sub" / "deep.md", stat.S_IFCHR | 0o600, os.makedev(1, 5))
            made.append(True)
        except OSError:
            (notes / "sub" / "deep.md").symlink_to("/dev/zero")

    walk_then(monkeypatch, swap)
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
    found = reasons(outcome.skipped)
    assert found["plan.md"] == "became a symlink after the walk; not followed"
    assert found["deep.md"] == ("is a character device, not a regular file; not read" if made else found["plan.md"])


def test_a_file_that_grew_past_the_limit_after_the_walk_is_not_read(
    notes: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(note_files, "MAX_NOTE_BYTES", 4096)

    def grow() -> None:
        with (notes / "plan.md").open("a", encoding="utf-8") as file:
            file.write("More words for the plan.\n" * 1000)

    walk_then(monkeypatch, grow)
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index([notes])
    assert reasons(outcome.skipped)["plan.md"] == "is over the 4,096 bytes it may have; not read"


def test_the_walk_passes_over_fifos_and_a_gitignore_that_is_a_symlink(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "root"
    write(root / "a.md", "a")
    write(root / "b.md", "b")
    os.mkfifo(root / "pipe.md")
    (root / ".gitignore").symlink_to(secret)  # git reads no .gitignore through a link either
    skipped: list[tuple[str, str]] = []
    states = walk([root], on_skip=lambda path, reason: skipped.append((path, reason)))
    assert [Path(state.path).name for state in states] == ["a.md", "b.md"]
    assert reasons(skipped) == {
        "pipe.md": "is a FIFO, not a regular file",
        ".gitignore": "is a symlink, not followed; its patterns do not apply",
    }


def test_the_plan_reads_only_what_the_walk_saw(tmp_path: Path) -> None:
    """The reader of a plan opens each path only as the file the walk found there."""
    write(tmp_path / "a.md", "# A\n\nalpha\n")
    states = walk([tmp_path])
    write(tmp_path / "a.new", "# A\n\nalpha, written again and renamed over it: another inode\n")
    (tmp_path / "a.new").replace(tmp_path / "a.md")
    [file] = plan({}, states, walked_reader(states)).files
    assert (file.status, file.reason) == (FileStatus.SKIPPED, "was replaced by another file after the walk; not read")


# -- names that are not UTF-8 ---------------------------------------------------------------------

LATIN1_NAME = os.fsdecode(b"caf\xe9.md")


def test_a_name_that_is_not_utf8_is_skipped_with_its_bytes_shown_on_each_store(
    tmp_path: Path, store_location: Path | str, encoder: Encoder
) -> None:
    root = tmp_path / "n"
    write(root / "ok.md", NOTE)
    write(root / LATIN1_NAME, "# Café\n\nCoffee notes.\n")
    write(root / os.fsdecode(b"d\xefr") / "inside.md", "in a folder whose name is not UTF-8")
    with Memsearch(store_location, encoder=encoder) as ms:
        first = ms.index([root])
        again = ms.index()  # the remembered root keeps working
        assert [memory.metadata["path"] for memory in ms.list()] == [str((root / "ok.md").resolve())]
    assert first.counts["new"] == 1 and again.counts["unchanged"] == 1
    skipped = dict(first.skipped)
    reason = "has a name that is not valid UTF-8, which no store can hold; rename it to index it"
    assert skipped[f"{root.resolve()}/caf\\xe9.md"] == reason
    assert skipped[f"{root.resolve()}/d\\xefr"] == reason
    json.dumps(first.to_dict(), ensure_ascii=False).encode("utf-8")  # JSON output can hold every path


def test_a_root_given_or_reached_through_a_link_that_is_not_utf8_is_refused(tmp_path: Path, ms: Memsearch) -> None:
    folder = tmp_path / os.fsdecode(b"r\xe9sum\xe9")
    write(folder / "a.md", NOTE)
    with pytest.raises(InvalidInputError) as given:
        ms.index([str(folder)])
    assert given.value.field == "paths" and "not valid Unicode" in str(given.value)
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(InvalidInputError, match=r"r\\xe9sum\\xe9.*not valid UTF-8"):
        ms.index([tmp_path / "link"])
    assert ms.stats()["exists"] is False  # nothing stored, not even the store


# -- ignore patterns in linear time ---------------------------------------------------------------

BACKTRACKING = "*a*a*a*a*a*a*a*a*b"


@pytest.mark.timeout(60)
def test_a_gitignore_made_to_backtrack_does_not_hang_the_walk(tmp_path: Path) -> None:
    names = ["a" * 200 + ".md", "a" * 200 + ".txt"]  # no match: Python's re would try every split of the a's
    for name in names:
        write(tmp_path / name, "a")
    write(tmp_path / "aaaaaaaab" / "c.md", "in an ignored folder")
    write(tmp_path / ".gitignore", BACKTRACKING + "\n")
    assert [Path(state.path).name for state in walk([tmp_path])] == names
    assert [Path(state.path).name for state in walk([tmp_path], [], [BACKTRACKING[:-1] + "d"])] == names[1:]


@pytest.mark.timeout(60)
def test_cli_dry_run_with_a_backtracking_gitignore_finishes(tmp_path: Path) -> None:
    write(tmp_path / "n" / ("a" * 120 + ".md"), "a")
    write(tmp_path / "n" / ".gitignore", BACKTRACKING + "\n")
    result = CliRunner().invoke(app, ["index", str(tmp_path / "n"), "--dry-run"])
    assert result.exit_code == 0 and result.stderr.startswith("would index 1 file")


@pytest.mark.timeout(120)
def test_long_patterns_and_long_paths_stay_within_re2s_limits() -> None:
    """A pattern of thousands of stars, or hundreds of `?`, against a path of thousands of
    characters: compiled and answered (RE2 works within a memory budget)."""
    spec = _spec(["*a" * 2000 + "*b", "?" * 300 + "*"], "exclude")
    assert spec.check_file("a" * 4000).include is True  # the second pattern: 300 characters or more
    assert spec.check_file("a" * 299).include is None


PATTERN_TEXT = st.text(st.sampled_from("ab*?/![]-\\ .#"), max_size=10)
PATH_TEXT = st.lists(st.text(st.sampled_from("ab.-* "), min_size=1, max_size=4), min_size=1, max_size=4).map("/".join)


@pytest.mark.slow  # many generated pattern sets: out of the quick tier
@settings(max_examples=1500, deadline=None, database=None)
@given(st.lists(PATTERN_TEXT, max_size=6), st.lists(PATH_TEXT, min_size=1, max_size=6), st.booleans())
def test_linear_matching_agrees_with_pathspec(patterns: list[str], paths: list[str], folder: bool) -> None:
    """The RE2 matchers (one set, or each pattern in turn) say what pathspec's own matcher says."""
    try:
        reference = GitIgnoreSpec.from_lines(patterns, backend="simple")
    except (ValueError, re.error):
        with pytest.raises(InvalidInputError):
            _spec(patterns, "exclude")
        return
    parsed = [_pattern(pattern) for pattern in patterns]
    one_set, each = _matcher(parsed), GitIgnoreSpec(parsed, backend="simple")
    for path in paths:
        path += "/" if folder else ""
        expected = reference.check_file(path).include
        assert one_set.check_file(path).include == expected, (patterns, path)
        assert each.check_file(path).include == expected, (patterns, path)


@pytest.mark.slow  # thousands of patterns: out of the quick tier
def test_patterns_too_many_for_one_re2_set_are_matched_one_by_one() -> None:
    import random

    chooser = random.Random(7)
    patterns = ["".join(chooser.choice("ab*?/") for _ in range(12)) for _ in range(3000)]
    reference = GitIgnoreSpec.from_lines(patterns, backend="simple")
    spec = _spec(patterns, "exclude")  # RE2 cannot compile them as one set
    for _ in range(200):
        path = "".join(chooser.choice("ab/") for _ in range(30)).strip("/")
        assert spec.check_file(path).include == reference.check_file(path).include


# -- roots and folders another user could write ---------------------------------------------------


def give_away(path: Path, uid: int = OTHER_UID, gid: int = OTHER_GID) -> None:
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.chown(item, uid, gid, follow_symlinks=False)


@as_root
def test_a_remembered_root_recreated_by_another_user_is_refused_and_the_notes_kept(
    notes: Path, db_path: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        before = sorted(memory.text for memory in ms.list())
        shutil.rmtree(notes)  # the victim's folder goes; another user makes one at the same path
        write(notes / "plan.md", "# Plan\n\nWire the money to the attacker's account.\n")
        give_away(notes)
        outcome = ms.index()
        assert sorted(memory.text for memory in ms.list()) == before  # nothing replaced, nothing lost
        assert dict(outcome.skipped)[str(notes)] == (
            "belongs to another user (uid 65534): read only when named as a root; what was indexed from it is kept"
        )
        named = ms.index([notes])  # named explicitly: the user says it is theirs to index
        assert (named.counts["changed"], named.counts["removed"]) == (1, 1) and "attacker" in texts(ms)


@as_root
@pytest.mark.parametrize(("mode", "shown"), [(0o777, "777"), (0o1777, "1777")])
def test_a_folder_others_may_write_is_refused_unless_named(
    notes: Path, db_path: Path, encoder: Encoder, mode: int, shown: str
) -> None:
    shared = notes / "shared"
    write(shared / "team.md", "# Team\n\nThe standup moves to ten.\n")
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])  # named: taken as it is
        shared.chmod(mode)
        write(shared / "planted.md", "# Planted\n\nA note another user slipped in.\n")
        outcome = ms.index()
        assert "standup" in texts(ms) and "Planted" not in texts(ms)  # kept as it was, nothing new read
        assert dict(outcome.skipped)[str(shared)].startswith(f"other users may write it (mode {shown}): ")
        ms.index([notes])
        assert "Planted" in texts(ms)


@as_root
def test_group_write_is_refused_unless_the_group_is_the_owners_own(tmp_path: Path) -> None:
    assert _private_group(0, 0) and not _private_group(OTHER_GID, OTHER_UID)
    root = tmp_path / "root"
    write(root / "mine" / "a.md", "a")
    write(root / "team" / "b.md", "b")
    (root / "mine").chmod(0o775)  # group root: root's own group, no other member
    (root / "team").chmod(0o775)
    os.chown(root / "team", 0, OTHER_GID)
    skipped: list[tuple[str, str]] = []
    held: list[str] = []
    states = walk([root], on_skip=lambda path, reason: skipped.append((path, reason)), on_held=held.append)
    assert [Path(state.path).name for state in states] == ["a.md"]
    assert reasons(skipped)["team"].startswith(f"its group (gid {OTHER_GID}) may write it (mode 775)")
    assert held == [str((root / "team").resolve())]
    assert len(walk([root], named=[str(root.resolve())])) == 2


@as_root
def test_a_file_of_another_user_is_refused_and_kept_as_stored(notes: Path, db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        give_away(notes / "plan.md")
        write(notes / "plan.md", "# Plan\n\nChanged by its new owner.\n")
        outcome = ms.index()
        assert "Ship the release" in texts(ms) and "new owner" not in texts(ms)
        assert reasons(outcome.skipped)["plan.md"].startswith("belongs to another user (uid 65534)")


def test_a_remembered_root_replaced_by_a_symlink_is_refused_and_the_notes_kept(
    notes: Path, tmp_path: Path, db_path: Path, encoder: Encoder
) -> None:
    elsewhere = write(tmp_path / "elsewhere" / "plan.md", "# Plan\n\nSomeone else's plan.\n").parent.resolve()
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        before = sorted(memory.text for memory in ms.list())
        notes.rename(tmp_path / "moved")
        notes.symlink_to(elsewhere)
        outcome = ms.index()
        assert sorted(memory.text for memory in ms.list()) == before
        assert dict(outcome.skipped)[str(notes)] == (
            f"leads to {elsewhere} now, through a symlink: read only when named as a root; "
            "what was indexed from it is kept"
        )


def test_a_world_writable_root_is_refused_when_remembered(notes: Path, db_path: Path, encoder: Encoder) -> None:
    """Needs no root: any user may make their own folder writable by all."""
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        notes.chmod(0o777)
        write(notes / "planted.md", "# Planted\n\nfrom someone else\n")
        outcome = ms.index()
        assert dict(outcome.skipped)[str(notes)].startswith("other users may write it (mode 777)")
        assert "Planted" not in texts(ms) and "Ship the release" in texts(ms)


# -- what reaches the terminal --------------------------------------------------------------------


def test_skipped_names_reach_the_terminal_escaped(tmp_path: Path) -> None:
    root = tmp_path / "n"
    write(root / "ok.md", NOTE)
    (root / "bad\x1b]0;pwned\x07\x1b[2J\n.md").symlink_to(root / "missing.md")  # skipped: a broken symlink
    write(root / LATIN1_NAME, "latin-1 name")
    result = CliRunner().invoke(app, ["index", str(root), "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "bad\\x1b]0;pwned\\x07\\x1b[2J\\x0a.md: is a broken symlink\n" in result.stderr
    assert "caf\\xe9.md: has a name that is not valid UTF-8" in result.stderr
    document = json.loads(CliRunner().invoke(app, ["index", str(root), "--dry-run", "-f", "json"]).stdout)
    paths = {Path(item["path"]).name for item in document["skipped"]}
    assert paths == {"bad\x1b]0;pwned\x07\x1b[2J\n.md", "caf\\xe9.md"}  # JSON keeps the real text


# -- Memsearch.index's arguments ------------------------------------------------------------------


@pytest.fixture(scope="module")
def indexer(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[tuple[Memsearch, Path]]:
    folder = tmp_path_factory.mktemp("index-args")
    write(folder / "notes" / "a.md", NOTE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSEARCH_HOME", str(folder / "home"))
        patch.chdir(folder)  # a relative path lands here
        with Memsearch(folder / "store" / "memsearch.db", encoder=encoder) as ms:
            yield ms, folder


PATHS = (
    VALUES
    | st.lists(VALUES | st.sampled_from(["notes", "notes/a.md", "missing", "", " ", "a\nb", "\x00", "."]), max_size=3)
    | st.sampled_from(["notes", Path("notes"), ("notes",), b"notes", [b"notes"], "notes\x00", "\ud800"])
)
PATTERNS = VALUES | st.lists(TEXT | st.sampled_from(["*.md", "!", "[z-a]", "a\nb", "\\", "**/x/"]), max_size=3)


def confined(value: Any, folder: Path) -> Any:
    """The value with every path that leads to something outside the test's folder (`/`, `..`, `~`)
    made a missing one: the fuzz walks nothing but its own notes."""
    if isinstance(value, list | tuple):
        return type(value)(confined(item, folder) for item in value)
    if isinstance(value, str | os.PathLike) and isinstance(os.fspath(value), str):
        try:
            resolved = Path(value).expanduser().resolve()
        except (OSError, RuntimeError, ValueError):
            return value
        if resolved.exists() and not resolved.is_relative_to(folder):
            return "missing"
    return value


@settings(
    max_examples=int(os.environ.get("MEMSEARCH_FUZZ_EXAMPLES", "1500")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(paths=PATHS, include=PATTERNS, exclude=PATTERNS, dry_run=VALUES | st.just(True), progress=VALUES)
def test_every_bad_index_argument_is_a_typed_one_line_refusal(
    indexer: tuple[Memsearch, Path], paths: Any, include: Any, exclude: Any, dry_run: Any, progress: Any
) -> None:
    ms, folder = indexer
    paths = confined(paths, folder)
    try:
        ms.index(paths, include=include, exclude=exclude, dry_run=dry_run, progress=progress)
    except MemsearchError as error:
        assert str(error).strip() and "\n" not in str(error), repr(str(error))
    except Exception as error:
        raise AssertionError(f"index({paths!r}, {include!r}, {exclude!r}): {type(error).__name__}: {error}") from error


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((1,), {}, "paths"),
        (([1],), {}, "paths"),
        ((b"notes",), {}, "paths"),
        ((["notes\x00"],), {}, "paths"),
        ((["\ud800"],), {}, "paths"),
        (([""],), {}, "paths"),
        ((["notes"],), {"include": [1]}, "include"),
        ((["notes"],), {"exclude": "\udcff"}, "exclude"),
        ((["notes"],), {"exclude": ["[z-a]"]}, "exclude"),
        ((["notes"],), {"dry_run": "yes"}, "dry_run"),
        ((["notes"],), {"progress": 3}, "progress"),
    ],
)
def test_bad_index_arguments_name_the_argument(
    indexer: tuple[Memsearch, Path], args: tuple[Any, ...], kwargs: dict[str, Any], field: str
) -> None:
    ms, _ = indexer
    with pytest.raises(InvalidInputError) as refused:
        ms.index(*args, **kwargs)
    assert refused.value.field == field, str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_missing_path_with_a_line_break_is_one_line(indexer: tuple[Memsearch, Path]) -> None:
    ms, _ = indexer
    with pytest.raises(InvalidInputError) as refused:
        ms.index(["no\nsuch"])
    assert str(refused.value) == "'no\\nsuch': no such file or folder"
