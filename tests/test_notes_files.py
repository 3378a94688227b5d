"""Indexing a folder of notes, the pure core: the walk, the chunks of a note and the incremental plan
(memsearch.ingest.notes, memsearch.ingest.note_files). Real files in tmp_path; the plan's `read` is
counted to show what a re-index reads."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsearch.errors import InvalidInputError
from memsearch.ingest.note_files import (
    MAX_NOTE_BYTES,
    FileState,
    FileStatus,
    IndexedFile,
    IndexPlan,
    counts_line,
    plan,
    under_roots,
    walk,
)
from memsearch.ingest.notes import (
    CHUNK_CHARS,
    NOTE_READERS,
    Note,
    UnreadableNoteError,
    chunk_note,
    read_markdown,
    read_note,
    read_plain,
    text_fingerprint,
)
from memsearch.operations import MAX_TEXT_CHARS

# -- chunks ---------------------------------------------------------------------------------------

NOTE = """\
Intro line before any heading.

# Project
The project's summary.

## Deploy
Run `make deploy`.

```sh
# a comment, not a heading
make deploy
```

## Empty
### Sub
Text under sub. #tag is no heading
####### seven hashes are no heading
    # indented four spaces: code, no heading
## Notes ##
Closing hashes are not part of the title.
"""


def spans(note: Note) -> list[tuple[tuple[str, ...], int, int]]:
    return [(chunk.trail, chunk.start_line, chunk.end_line) for chunk in note.chunks]


def test_a_note_is_cut_at_headings_with_trails_and_line_ranges() -> None:
    note = chunk_note(NOTE, "/notes/project.md")
    assert spans(note) == [
        ((), 1, 1),
        (("Project",), 3, 4),
        (("Project", "Deploy"), 6, 12),  # the fenced "# a comment" stays inside
        (("Project", "Empty", "Sub"), 14, 18),  # the bare "## Empty" joins the chunk after it
        (("Project", "Notes"), 19, 20),
    ]
    lines = NOTE.split("\n")
    for chunk in note.chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    assert note.chunks[1].text == "# Project\nThe project's summary."
    keys = [chunk.key for chunk in note.chunks]
    assert all(re.fullmatch(r"note:/notes/project\.md#[0-9a-f]{16}", key) for key in keys) and len(set(keys)) == 5
    assert note.tags == () and not note.lossy


def test_a_chunk_keeps_its_key_when_the_section_above_changes() -> None:
    before = chunk_note("# A\nalpha\n\n# B\nbeta\n\n# C\ngamma\n", "n.md").chunks
    after = chunk_note("# A\nalpha, longer now\nand more\n\n# New\nnew\n\n# B\nbeta\n\n# C\ngamma\n", "n.md").chunks
    assert (before[1].key, before[2].key) == (after[2].key, after[3].key)  # B and C: same trail, same text
    assert before[0].key != after[0].key  # A's text changed
    assert before[1].start_line != after[2].start_line and before[1].digest != after[2].digest
    assert text_fingerprint(before[1].digest) == text_fingerprint(after[2].digest)  # same text, moved lines
    # the heading trail is part of what a chunk is: the same text under another heading is another chunk
    nested = chunk_note("# A\na\n## Setup\nrun it\n\n# B\nb\n## Setup\nrun it\n", "n.md").chunks
    assert nested[1].text == nested[3].text and nested[1].key != nested[3].key


def test_duplicate_sections_are_told_apart_by_their_order() -> None:
    text = "# Log\n\nTODO\n\n# Log\n\nTODO\n\n# Log\n\nTODO\n"
    keys = [chunk.key for chunk in chunk_note(text, "n.md").chunks]
    assert keys[1:] == [keys[0] + "-2", keys[0] + "-3"]
    assert [chunk.key for chunk in chunk_note("# Other\nx\n\n" + text, "n.md").chunks][1:] == keys


def test_front_matter_gives_the_title_and_the_date_and_a_bad_date_is_left_out_with_the_reason() -> None:
    note = chunk_note("---\ntitle: 'Deploy guide'\ndate: 2023-03-04\ntags: [ops]\n---\n# Deploy\nkeys\n", "d.md")
    assert (note.title, note.date, note.tags, note.problems) == (
        "Deploy guide", datetime(2023, 3, 4, tzinfo=UTC), ("ops",), ()
    )  # fmt: skip
    assert chunk_note("---\ndate: 2023-03-04T10:30:00+02:00\n---\nx", "e.md").date == datetime(
        2023, 3, 4, 8, 30, tzinfo=UTC
    )
    bad = chunk_note("---\ntitle: Notes\ndate: last tuesday\n---\n# A\nalpha\n", "f.md")
    assert bad.date is None and bad.title == "Notes" and [line for line, _ in bad.problems] == [3]
    assert "date 'last tuesday' is not an ISO-8601 date" in bad.problems[0][1]
    assert "modification time is used" in bad.problems[0][1]
    # what the front matter says is part of every chunk's digest, not of its key
    plain = chunk_note("# A\nalpha\n", "g.md").chunks[0]
    titled = chunk_note("---\ntitle: T\n---\n# A\nalpha\n", "g.md").chunks[0]
    assert plain.key == titled.key and plain.digest != titled.digest


def test_fences_of_tildes_longer_fences_and_an_unclosed_fence_hide_headings() -> None:
    text = (
        "# A\n~~~\n# no\n```\n# still no\n~~~\n# B\nb\n"
        "````md\n# no\n```\n# no, the fence needs four\n````\n# C\n```\n# never closed"
    )
    note = chunk_note(text, "n.md")
    assert [chunk.trail for chunk in note.chunks] == [("A",), ("B",), ("C",)]
    assert [chunk.start_line for chunk in note.chunks] == [1, 7, 14]


def test_front_matter_is_in_no_chunk_and_gives_the_tags() -> None:
    inline = "---\ntitle: Plan\ntags: [work, \"deploy\", '#ops']\n---\n# Plan\nShip it.\n"
    note = chunk_note(inline, "plan.md")
    assert note.tags == ("work", "deploy", "ops")
    assert spans(note) == [(("Plan",), 5, 6)]
    block = "---\ntags:\n  - work\n  - '#home'\nother: x\n...\nbody\n"
    assert chunk_note(block, "b.md").tags == ("work", "home")
    assert chunk_note("---\ntag: a, b\n---\nx", "c.md").tags == ("a", "b")
    assert chunk_note("---\ntitle: no tags\n---\nx", "d.md").tags == ()
    # an unclosed --- is a thematic break: text, not front matter
    unclosed = chunk_note("---\ntags: [a]\nbody", "e.md")
    assert unclosed.tags == () and spans(unclosed) == [((), 1, 3)]
    # a plain text file has no front matter
    assert chunk_note("---\ntags: [a]\n---\nbody", "f.txt").tags == ()


def test_a_long_section_is_cut_at_blank_lines_without_losing_a_line() -> None:
    paragraphs = [f"Paragraph {i}: " + "the deploy runbook says many things. " * 8 for i in range(12)]
    text = "# Runbook\n\n" + "\n\n".join(paragraphs) + "\n"
    note = chunk_note(text, "runbook.md")
    assert len(note.chunks) > 1
    assert all(len(chunk.text) <= CHUNK_CHARS for chunk in note.chunks)
    assert all(chunk.trail == ("Runbook",) for chunk in note.chunks)
    assert note.chunks[0].text.startswith("# Runbook\n\nParagraph 0:")
    # every paragraph is whole in exactly one chunk
    for paragraph in paragraphs:
        assert sum(paragraph in chunk.text for chunk in note.chunks) == 1
    # a later piece reads on its own with its trail; the first already begins with its heading
    assert note.chunks[1].titled_text == "Runbook\n" + note.chunks[1].text
    assert note.chunks[0].titled_text == note.chunks[0].text


def test_a_long_paragraph_is_cut_at_line_ends_and_a_heading_stays_with_its_text() -> None:
    long_line = "x" * (CHUNK_CHARS - 10)
    text = f"# Heading\n{long_line}\n{long_line}\n\n## Sub\n{'y' * (CHUNK_CHARS * 2)}\n"
    note = chunk_note(text, "n.md")
    assert spans(note) == [(("Heading",), 1, 2), (("Heading",), 3, 3), (("Heading", "Sub"), 5, 6)]
    assert note.chunks[2].text.startswith("## Sub\nyyy")  # one line over the budget is never cut


def test_crlf_line_ends_give_the_same_chunks_and_line_numbers() -> None:
    lf = chunk_note(NOTE, "n.md")
    crlf = chunk_note(NOTE.replace("\n", "\r\n"), "n.md")
    assert crlf == lf
    assert chunk_note("\ufeff# Title\r\nbody", "n.md").chunks[0].text == "# Title\nbody"


def test_invalid_utf8_is_read_with_replacement_and_the_note_says_so() -> None:
    note = read_note(b"# Caf\xe9\nna\xefve text\n", "cafe.md")
    assert note.lossy
    assert note.chunks[0].trail == ("Caf\ufffd",)
    assert "na\ufffdve" in note.chunks[0].text
    assert not read_note("# Café\n".encode(), "cafe.md").lossy
    data = b"caf\xe9 au lait\n"
    [file] = plan({}, [FileState("/n/latin1.txt", len(data), 1)], lambda path: data).files
    assert file.status is FileStatus.NEW and file.lossy and file.add_chunks[0].text == "caf\ufffd au lait"


def test_a_line_too_long_for_one_memory_is_a_clear_error() -> None:
    with pytest.raises(UnreadableNoteError, match="line 2 is 100,001 characters; its chunk is over one memory's limit"):
        read_note(b"# x\n" + b"a" * (MAX_TEXT_CHARS + 1), "dump.md")


def test_plain_text_is_packed_by_paragraph() -> None:
    text = "\n\n".join(f"paragraph {i} " + "words " * 60 for i in range(10)) + "\n# not a heading in a .txt"
    note = chunk_note(text, "journal.txt")
    assert len(note.chunks) > 1 and all(len(chunk.text) <= CHUNK_CHARS for chunk in note.chunks)
    assert all(chunk.trail == () for chunk in note.chunks)
    assert note.chunks[-1].text.endswith("# not a heading in a .txt")


def test_bare_headings_join_the_next_chunk_or_the_one_before_at_the_end() -> None:
    assert spans(chunk_note("# A\n## B\ntext\n## C\n### D\n", "n.md")) == [(("A", "B"), 1, 5)]
    assert spans(chunk_note("# Only a title\n\n", "n.md")) == [(("Only a title",), 1, 1)]
    assert chunk_note("", "n.md").chunks == () and chunk_note("\n  \n", "n.txt").chunks == ()


def test_a_chunks_digest_changes_only_with_what_is_stored_of_it() -> None:
    before = chunk_note("# A\nalpha\n\n# B\nbeta\n", "n.md").chunks
    same = chunk_note("# A\nalpha\n\n# B\nbeta\n", "n.md").chunks
    edited = chunk_note("# A\nALPHA\n\n# B\nbeta\n", "n.md").chunks
    moved = chunk_note("# A\nalpha\nmore\n\n# B\nbeta\n", "n.md").chunks
    assert [c.digest for c in before] == [c.digest for c in same]
    assert (edited[0].digest != before[0].digest, edited[1].digest == before[1].digest) == (True, True)
    assert moved[1].text == before[1].text and moved[1].digest != before[1].digest  # its lines moved
    retagged = chunk_note("---\ntags: [x]\n---\n# A\nalpha\n\n# B\nbeta\n", "n.md").chunks
    assert retagged[0].text == before[0].text and retagged[0].digest != before[0].digest


MARKDOWN_LINES = st.sampled_from(
    [
        "",
        "   ",
        "# Title",
        "## Section",
        "### Deep ###",
        "#tag",
        "```",
        "~~~",
        "````python",
        "---",
        "tags: [a, b]",
        "- item",
        "Some words in a line.",
        "x" * 500,
        "y" * 1500,
        "\ttabbed",
    ]
)


@given(st.lists(MARKDOWN_LINES | st.text(max_size=80).filter(lambda s: "\n" not in s and "\r" not in s), max_size=60))
@settings(max_examples=400, deadline=None)
def test_chunks_cover_every_non_blank_body_line_once_in_order(lines: list[str]) -> None:
    from memsearch.ingest.notes import front_matter

    text = "\n".join(lines)
    for path in ("n.md", "n.txt"):
        note = chunk_note(text, path)
        body_start = front_matter(lines).body_start if path.endswith(".md") else 0
        covered = [n for chunk in note.chunks for n in range(chunk.start_line, chunk.end_line + 1)]
        assert covered == sorted(set(covered))  # in order, none twice
        content = [n for n in range(body_start + 1, len(lines) + 1) if lines[n - 1].strip()]
        assert [n for n in covered if lines[n - 1].strip()] == content
        for chunk in note.chunks:
            assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
            assert lines[chunk.start_line - 1].strip() and lines[chunk.end_line - 1].strip()
        assert len({chunk.key for chunk in note.chunks}) == len(note.chunks)


# -- the walk -------------------------------------------------------------------------------------


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def names(states: list[FileState], root: Path) -> list[str]:
    return [Path(state.path).relative_to(root.resolve()).as_posix() for state in states]


def test_the_walk_finds_notes_and_skips_hidden_and_ignored_ones(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "b.md": "b",
            "a.txt": "a",
            "c.markdown": "c",
            "image.png": "not text",
            "sub/d.md": "d",
            "sub/build/e.md": "ignored by sub/.gitignore",
            "sub/.gitignore": "build/\n*.tmp.md\n",
            "sub/f.tmp.md": "ignored",
            ".gitignore": "drafts/\nsecret.md\n",
            "drafts/g.md": "ignored by the root .gitignore",
            "deep/secret.md": "ignored at any depth",
            "deep/.gitignore": "!secret.md\n",  # a deeper .gitignore wins: brought back
            "deep/.hidden.md": "hidden file",
            ".obsidian/workspace.md": "hidden folder",
            ".git/HEAD.md": "hidden folder",
        },
    )
    states = walk([tmp_path])
    assert names(states, tmp_path) == ["a.txt", "b.md", "c.markdown", "deep/secret.md", "sub/d.md"]
    state = states[1]
    stat = (tmp_path / "b.md").stat()
    assert (state.size, state.mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert Path(state.path).is_absolute()


def test_user_globs_and_exclude_patterns(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "", "b.rst": "", "journal/2024.md": "", "journal/keep.md": "", "x/journal/y.md": ""})
    (tmp_path / ".gitignore").write_text("b.rst\n", encoding="utf-8")
    assert names(walk([tmp_path], ["*.rst"]), tmp_path) == []  # the .gitignore still applies
    assert names(walk([tmp_path], ["*.rst"], ["!b.rst"]), tmp_path) == ["b.rst"]  # the user's patterns win
    assert names(walk([tmp_path], [], ["/journal/*", "!keep.md"]), tmp_path) == [
        "a.md",
        "journal/keep.md",
        "x/journal/y.md",
    ]
    assert names(walk([tmp_path], ["journal/*.md"]), tmp_path) == ["journal/2024.md", "journal/keep.md"]


def test_a_bad_pattern_is_a_clear_error_and_a_bad_gitignore_line_is_passed_over(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "", "b.md": "", ".gitignore": "\\\nb.md\n"})
    with pytest.raises(InvalidInputError, match="not valid gitignore syntax") as error:
        walk([tmp_path], [], ["!"])
    assert error.value.field == "exclude"
    skipped: list[tuple[str, str]] = []
    assert names(walk([tmp_path], on_skip=lambda *args: skipped.append(args)), tmp_path) == ["a.md"]
    assert skipped == [
        (f"{tmp_path.resolve()}/.gitignore:1", "is not a valid gitignore pattern; the file's other lines apply")
    ]


def test_a_root_may_be_a_file_named_whatever_its_suffix(tmp_path: Path) -> None:
    write(tmp_path, {"TODO": "todo", "notes/a.md": "a"})
    states = walk([tmp_path / "TODO", tmp_path / "notes", tmp_path / "notes/a.md"], [], ["TODO", "*.md"])
    assert names(states, tmp_path) == ["TODO", "notes/a.md"]  # named files are taken as given, once
    with pytest.raises(InvalidInputError, match="no such file or folder"):
        walk([tmp_path / "missing"])


def test_symlinks_out_of_the_root_and_loops_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    write(outside, {"o.md": "out"})
    write(root, {"a.md": "a", "sub/b.md": "b"})
    (root / "out.md").symlink_to(outside / "o.md")
    (root / "out_dir").symlink_to(outside)
    (root / "sub/loop").symlink_to(root)
    (root / "alias.md").symlink_to(root / "a.md")
    (root / "broken.md").symlink_to(root / "nothing.md")
    skipped: list[tuple[str, str]] = []
    states = walk([root], on_skip=lambda path, reason: skipped.append((Path(path).name, reason)))
    assert names(states, root) == ["a.md", "sub/b.md"]
    reasons = dict(skipped)
    assert set(reasons) == {"out.md", "out_dir", "loop", "broken.md"}
    assert "out of" in reasons["out.md"] and "already walked" in reasons["loop"] and "broken" in reasons["broken.md"]


def test_under_roots_keeps_the_records_of_the_folders_indexed(tmp_path: Path) -> None:
    record = IndexedFile(1, 1, "h")
    previous = {str(tmp_path / "a/x.md"): record, str(tmp_path / "b/y.md"): record, str(tmp_path / "ab.md"): record}
    assert list(under_roots(previous, [tmp_path / "a"])) == [str(tmp_path / "a/x.md")]


# -- the plan -------------------------------------------------------------------------------------


class Store:
    """What a store would hold: chunk key → (digest, text), and a record per file."""

    def __init__(self) -> None:
        self.chunks: dict[str, tuple[str, str]] = {}
        self.files: dict[str, IndexedFile] = {}

    def apply(self, index_plan: IndexPlan) -> None:
        for file in index_plan.files:
            for key in file.delete_keys:
                del self.chunks[key]
            for chunk in file.amend_chunks:  # kept with its text: only where it is moved
                assert self.chunks[chunk.key][1] == chunk.text
                self.chunks[chunk.key] = (chunk.digest, chunk.text)
            for chunk in file.add_chunks:
                assert chunk.key not in self.chunks
                self.chunks[chunk.key] = (chunk.digest, chunk.text)
            if file.status is FileStatus.REMOVED:
                del self.files[file.path]
            elif file.record is not None:
                self.files[file.path] = file.record


class CountingReader:
    def __init__(self, read: Callable[[str], bytes] = lambda path: Path(path).read_bytes()) -> None:
        self.paths: list[str] = []
        self._read = read

    def __call__(self, path: str) -> bytes:
        self.paths.append(path)
        return self._read(path)


def test_re_planning_after_editing_one_of_many_files_reads_that_file_only(tmp_path: Path) -> None:
    write(tmp_path, {f"n{i:02}.md": f"# Note {i}\nbody {i}\n" for i in range(40)})
    store = Store()
    first = CountingReader()
    store.apply(plan(store.files, walk([tmp_path]), first))
    assert len(first.paths) == 40 and len(store.chunks) == 40

    again = CountingReader()
    unchanged = plan(store.files, walk([tmp_path]), again)
    assert again.paths == [] and unchanged.is_empty
    assert counts_line(unchanged.counts) == "0 new, 0 changed, 0 removed, 40 unchanged"

    edited = tmp_path / "n07.md"
    edited.write_text("# Note 7\nbody 7, edited\n", encoding="utf-8")
    os.utime(edited, ns=(edited.stat().st_atime_ns, edited.stat().st_mtime_ns + 1_000_000))
    reader = CountingReader()
    change = plan(store.files, walk([tmp_path]), reader)
    assert reader.paths == [str(edited.resolve())]
    assert counts_line(change.counts) == "0 new, 1 changed, 0 removed, 39 unchanged"
    [old_key] = change.delete_keys
    assert old_key.startswith(f"note:{edited.resolve()}#") and len(change.add_chunks) == 1


def test_a_touched_file_is_read_once_and_only_its_mtime_is_updated(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A\nalpha\n"})
    store = Store()
    store.apply(plan(store.files, walk([tmp_path]), CountingReader()))
    path = tmp_path / "a.md"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000))
    reader = CountingReader()
    touched = plan(store.files, walk([tmp_path]), reader)
    assert len(reader.paths) == 1 and [file.status for file in touched.files] == [FileStatus.TOUCHED]
    assert touched.delete_keys == () and touched.add_chunks == () and not touched.is_empty
    store.apply(touched)
    reader = CountingReader()
    assert plan(store.files, walk([tmp_path]), reader).is_empty and reader.paths == []


def test_an_edit_keeps_the_chunks_stored_exactly_as_they_would_be(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A\nalpha\n\n# B\nbeta\n\n# C\ngamma\n"})
    store = Store()
    store.apply(plan(store.files, walk([tmp_path]), CountingReader()))
    (tmp_path / "a.md").write_text("# A\nalpha\n\n# B\nBETA\n\n# C\ngamma\n# D\ndelta\n", encoding="utf-8")
    change = plan(store.files, walk([tmp_path]), CountingReader())
    (file,) = change.files
    a, b, c = store.files[str((tmp_path / "a.md").resolve())].chunks
    assert file.status is FileStatus.CHANGED
    assert file.kept_keys == (a, c)  # A and C: same text on the same lines
    assert file.delete_keys == (b,)
    assert [chunk.text for chunk in file.add_chunks] == ["# B\nBETA", "# D\ndelta"]
    store.apply(change)
    assert store.chunks[file.add_chunks[0].key][1] == "# B\nBETA"


def test_a_section_that_only_moved_is_amended_not_added_again(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A\nalpha\n\n# B\nbeta\n"})
    store = Store()
    store.apply(plan(store.files, walk([tmp_path]), CountingReader()))
    path = tmp_path / "a.md"
    path.write_text("# A\nalpha\nand a new line\n\n# B\nbeta\n", encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    (file,) = plan(store.files, walk([tmp_path]), CountingReader()).files
    a, b = store.files[str(path.resolve())].chunks
    assert file.delete_keys == (a,) and [chunk.key for chunk in file.amend_chunks] == [b]
    assert file.amend_chunks[0].start_line == 5 and len(file.add_chunks) == 1


def test_deleted_and_excluded_files_lose_all_their_chunks(tmp_path: Path) -> None:
    write(tmp_path, {"keep.md": "k", "gone.md": "# G\ng\n\n# H\nh", "drafts/d.md": "d"})
    store = Store()
    store.apply(plan(store.files, walk([tmp_path]), CountingReader()))
    assert len(store.chunks) == 4
    (tmp_path / "gone.md").unlink()
    reader = CountingReader()
    change = plan(store.files, walk([tmp_path], [], ["drafts/"]), reader)
    assert reader.paths == []
    assert counts_line(change.counts) == "0 new, 0 changed, 2 removed, 1 unchanged"
    assert len(change.delete_keys) == 3 and change.add_chunks == ()
    store.apply(change)
    assert [key.rsplit("/", 1)[1].partition("#")[0] for key in store.chunks] == ["keep.md"]


def test_an_unreadable_or_oversized_file_is_skipped_and_keeps_what_was_stored(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "# A\nalpha\n"})
    store = Store()
    store.apply(plan(store.files, walk([tmp_path]), CountingReader()))
    [state] = walk([tmp_path])
    moved = FileState(state.path, state.size, state.mtime_ns + 1)

    def refuse(path: str) -> bytes:
        raise PermissionError(13, "Permission denied", path)

    skipped = plan(store.files, [moved], CountingReader(refuse))
    assert [(file.status, file.reason) for file in skipped.files] == [
        (FileStatus.SKIPPED, "cannot be read (Permission denied)")
    ]
    assert skipped.is_empty and counts_line(skipped.counts).endswith(", 1 skipped")

    huge = FileState(str(tmp_path / "huge.txt"), MAX_NOTE_BYTES + 1, 1)
    reader = CountingReader()
    too_big = plan({}, [huge], reader)
    assert reader.paths == [] and too_big.files[0].status is FileStatus.SKIPPED
    assert "over the 8,388,608" in too_big.files[0].reason


def test_the_summary_counts_files() -> None:
    files = {f"/n/{i}.md": f"# {i}\ntext {i}".encode() for i in range(6)}
    reader = CountingReader(files.__getitem__)
    states = [FileState(path, len(data), 1) for path, data in files.items()]
    first = plan({}, states, reader)
    assert counts_line(first.counts) == "6 new, 0 changed, 0 removed, 0 unchanged"
    assert first.reads == 6
    assert counts_line(plan({}, states[:1], reader).counts) == "1 new, 0 changed, 0 removed, 0 unchanged"


# A tree in memory for the properties: path → bytes, and the mtime each state reports.
TREES = st.dictionaries(
    st.sampled_from([f"/notes/{name}" for name in ("a.md", "b.md", "c.txt", "d.markdown", "e.md")]),
    st.lists(MARKDOWN_LINES, max_size=12).map(lambda lines: "\n".join(lines).encode()),
    max_size=5,
)


def states_of(tree: Mapping[str, bytes], mtimes: Mapping[str, int]) -> list[FileState]:
    return [FileState(path, len(data), mtimes.get(path, 1)) for path, data in sorted(tree.items())]


def full_index(tree: Mapping[str, bytes]) -> dict[str, tuple[str, str]]:
    return {
        chunk.key: (chunk.digest, chunk.text) for path, data in tree.items() for chunk in read_note(data, path).chunks
    }


@pytest.mark.slow  # indexes folders twice with the model: out of the quick tier
@given(TREES, TREES, st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_re_index_holds_exactly_what_a_fresh_index_would_and_then_reads_nothing(
    before: dict[str, bytes], after: dict[str, bytes], touch_all: bool
) -> None:
    store = Store()
    store.apply(plan({}, states_of(before, {}), CountingReader(before.__getitem__)))
    assert store.chunks == full_index(before)

    # every file whose bytes changed has a new mtime; touch_all moves the others' too
    mtimes = {path: 2 if touch_all or before.get(path) != data else 1 for path, data in after.items()}
    reader = CountingReader(after.__getitem__)
    store.apply(plan(store.files, states_of(after, mtimes), reader))
    assert store.chunks == full_index(after)
    assert set(store.files) == set(after)
    assert set(reader.paths) == {path for path in after if mtimes[path] == 2 or path not in before}

    quiet = CountingReader(after.__getitem__)
    assert plan(store.files, states_of(after, mtimes), quiet).is_empty
    assert quiet.paths == []


def test_a_new_file_type_is_one_row_of_the_readers_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`index` reads a file by its suffix's reader (`NOTE_READERS`), any other suffix as plain text,
    and a folder's walk takes the suffixes that have a reader: one row adds a file type."""
    assert {".md": read_markdown, ".markdown": read_markdown, ".txt": read_plain} == NOTE_READERS
    org = "# One\nfirst\n\n# Two\nsecond\n"
    write(tmp_path, {"a.md": "a", "b.org": org})
    assert names(walk([tmp_path]), tmp_path) == ["a.md"]
    assert [chunk.trail for chunk in chunk_note(org, "b.org").chunks] == [()]
    monkeypatch.setitem(NOTE_READERS, ".org", read_markdown)
    assert names(walk([tmp_path]), tmp_path) == ["a.md", "b.org"]
    assert [chunk.trail for chunk in chunk_note(org, "b.org").chunks] == [("One",), ("Two",)]
    assert [chunk.trail for chunk in chunk_note(org, "B.ORG").chunks] == [("One",), ("Two",)]
