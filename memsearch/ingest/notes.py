"""A note file's text as chunks to store: split at markdown headings, and by length inside a long
section; each chunk knows its heading trail, its line range and a digest of everything stored.

Rules (`chunk_note`):
- Lines are split on "\\n" only (a trailing "\\r" and a leading byte-order mark are dropped), so
  line numbers are the ones an editor shows; U+2028 and friends stay inside their line.
- Markdown (`.md`, `.markdown`): a chunk starts at each ATX heading (`#` to `######` after at most
  three spaces, then a space or the line's end; `#tag` is no heading), never inside a fenced code
  block (``` or ~~~, closed by a fence of the same character at least as long; an unclosed fence runs
  to the end). Setext headings (a line underlined with === or ---) are not split at.
- A `---` block at the very top, closed by `---` or `...`, is front matter: it is in no chunk, and
  its `tags:` (an inline `[a, b]` list, `a, b`, or a `- a` block list) are the note's tags.
- Every other file is plain text: blank-line paragraphs packed into chunks under the budget.
- A chunk's text is exactly its lines, `start_line` to `end_line` (1-based), and starts and ends on
  a non-blank line: every non-blank line after the front matter is in exactly one chunk, in order.
  A heading is the first line of its chunk, so the chunk reads on its own.
- A section longer than `CHUNK_CHARS` is cut at blank lines outside code fences (whole paragraphs
  packed greedily), a paragraph longer than that at line ends; a single line is never cut.
- A heading with nothing under it but other headings is merged into the next chunk (into the one
  before when it is the last), so no chunk is a bare heading unless the note has nothing else.
- Identity: the n-th chunk (1-based) of a file is keyed `note:{path}#{n}`, and its digest hashes
  everything the store keeps of it (trail, lines, tags, text): an equal key and digest means the
  stored memory is already exactly right, line numbers included.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from memsearch.errors import MemsearchError
from memsearch.jsonl import split_lines
from memsearch.operations import MAX_TEXT_CHARS

# MiniLM reads about 256 word pieces; 1,200 characters of English prose is about 250 to 300 of them
# (memsearch.text embeds any longer memory in overlapping windows, so an over-long chunk is still found).
CHUNK_CHARS = 1_200
MARKDOWN_SUFFIXES = (".md", ".markdown")

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FRONT_MATTER_CLOSE = ("---", "...")
_TAGS_KEY = re.compile(r"tags?[ \t]*:(.*)", re.IGNORECASE)
_LIST_ITEM = re.compile(r"[ \t]*-[ \t]*(.*)")


class UnreadableNoteError(MemsearchError):
    """A note file that cannot be stored as it is; the message says why (the file is skipped)."""


@dataclass(frozen=True)
class NoteChunk:
    key: str  # "note:{path}#{n}", n counting the file's chunks from 1
    trail: tuple[str, ...]  # the headings above the chunk, outermost first, its own heading last
    start_line: int  # 1-based, inclusive: the chunk's first line in the file
    end_line: int  # 1-based, inclusive
    text: str  # exactly the file's lines start_line..end_line, joined with "\n"
    digest: str  # sha256 of trail, lines, the note's tags and text: what the store keeps of the chunk

    @property
    def titled_text(self) -> str:
        """The text preceded by its heading trail when the chunk does not begin with its heading
        (the second and later pieces of a long section), so a piece read alone has its context."""
        if not self.trail or _HEADING.fullmatch(self.text.split("\n", 1)[0]):
            return self.text
        return " › ".join(self.trail) + "\n" + self.text


@dataclass(frozen=True)
class Note:
    """A file's chunks and the tags of its front matter."""

    chunks: tuple[NoteChunk, ...]
    tags: tuple[str, ...] = ()
    lossy: bool = False  # the file was not valid UTF-8: bad bytes were read as U+FFFD


def is_markdown(path: str) -> bool:
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def decode_note(data: bytes) -> tuple[str, bool]:
    """The file's text and whether it was lossy: invalid UTF-8 bytes become U+FFFD rather than
    losing the whole file (a stray Latin-1 byte in a note should not hide the rest of it)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def read_note(data: bytes, path: str) -> Note:
    """The chunks of a file's bytes (see `decode_note`); `UnreadableNoteError` if a line is too long
    to be one memory."""
    text, lossy = decode_note(data)
    note = chunk_note(text, path)
    for chunk in note.chunks:
        if len(chunk.text) > MAX_TEXT_CHARS:  # only one line over the budget can make a chunk this long
            lengths = [len(line) for line in chunk.text.split("\n")]
            longest = max(lengths)
            number = chunk.start_line + lengths.index(longest)
            raise UnreadableNoteError(
                f"line {number} is {longest:,} characters; its chunk is over one memory's limit of {MAX_TEXT_CHARS:,}"
            )
    return Note(note.chunks, note.tags, lossy)


def chunk_note(text: str, path: str) -> Note:
    """The chunks of a note's text; `path` keys the chunks and, by its suffix, says markdown or plain."""
    lines = split_lines(text)
    if not is_markdown(path):
        plain = _Layout(lines, [False] * len(lines), frozenset())
        return _make_note(path, lines, [((), start, end) for start, end in plain.split(0, len(lines))], ())
    body_start, tags = front_matter(lines)
    in_fence = fenced_lines(lines, body_start)
    sections = []  # (trail, first line index, end index exclusive)
    headings = set()
    trail: list[tuple[int, str]] = []
    start = body_start
    for index in range(body_start, len(lines)):
        heading = None if in_fence[index] else _HEADING.fullmatch(lines[index])
        if heading is None:
            continue
        headings.add(index)
        sections.append((tuple(title for _, title in trail), start, index))
        level = len(heading[1])
        title = _CLOSING_HASHES.sub("", (heading[2] or "").strip()).strip()
        trail = [*(entry for entry in trail if entry[0] < level), (level, title)]
        start = index
    sections.append((tuple(title for _, title in trail), start, len(lines)))
    return _make_note(path, lines, _Layout(lines, in_fence, frozenset(headings)).pieces(sections), tags)


Span = tuple[int, int]  # line indexes [start, end)


@dataclass(frozen=True)
class _Layout:
    """A text's lines, which are in code fences and which are headings: what cutting it needs."""

    lines: list[str]
    in_fence: list[bool]
    headings: frozenset[int]

    def pieces(self, sections: list[tuple[tuple[str, ...], int, int]]) -> list[tuple[tuple[str, ...], int, int]]:
        """Sections merged (bare headings into the next) and cut to the budget: (trail, start, end)."""
        merged: list[tuple[tuple[str, ...], int, int]] = []
        pending: int | None = None  # the first line of bare headings waiting for a body
        for trail, start, end in sections:
            content = [index for index in range(start, end) if self.lines[index].strip()]
            if not content:
                continue
            if content == [start] and start in self.headings:
                pending = start if pending is None else pending
                continue
            merged.append((trail, content[0] if pending is None else pending, end))
            pending = None
        if pending is not None:
            if merged:
                trail, start, _ = merged[-1]
                merged[-1] = (trail, start, len(self.lines))
            else:
                merged.append((sections[-1][0], pending, len(self.lines)))
        return [(trail, *span) for trail, start, end in merged for span in self.split(start, end)]

    def split(self, start: int, end: int) -> list[Span]:
        """Lines [start, end) as spans of at most CHUNK_CHARS that start and end on a non-blank line:
        whole blocks packed greedily, a longer block cut at line ends. A span may be longer only by
        its leading headings (a heading always goes with what follows it) or when it is one line."""
        units: list[Span] = []
        for block_start, block_end in self._blocks(start, end):
            if self._chars(block_start, block_end) <= CHUNK_CHARS:
                units.append((block_start, block_end))
            else:
                units.extend(self._pack([(i, i + 1) for i in range(block_start, block_end) if self.lines[i].strip()]))
        return self._pack(units)

    def _pack(self, units: list[Span]) -> list[Span]:
        spans: list[Span] = []
        for start, end in units:
            if spans and (self._bare(spans[-1]) or self._chars(spans[-1][0], end) <= CHUNK_CHARS):
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        if len(spans) > 1 and self._bare(spans[-1]):  # headings at the very end join the span before
            spans[-2:] = [(spans[-2][0], spans[-1][1])]
        return spans

    def _bare(self, span: Span) -> bool:
        """Whether the span holds only headings."""
        return all(index in self.headings for index in range(*span) if self.lines[index].strip())

    def _blocks(self, start: int, end: int) -> list[Span]:
        """Runs of lines between blank lines outside code fences, without blank edges."""
        blocks: list[Span] = []
        block_start: int | None = None
        last_content = start
        for index in range(start, end):
            blank = not self.lines[index].strip()
            if blank and not self.in_fence[index]:
                if block_start is not None:
                    blocks.append((block_start, last_content + 1))
                    block_start = None
                continue
            if not blank:
                last_content = index
                block_start = index if block_start is None else block_start
        if block_start is not None:
            blocks.append((block_start, last_content + 1))
        return blocks

    def _chars(self, start: int, end: int) -> int:
        return sum(len(line) for line in self.lines[start:end]) + end - start - 1


def _make_note(
    path: str, lines: list[str], pieces: list[tuple[tuple[str, ...], int, int]], tags: tuple[str, ...]
) -> Note:
    chunks = []
    for number, (trail, start, end) in enumerate(pieces, start=1):
        text = "\n".join(lines[start:end])
        stored = json.dumps([trail, start + 1, end, tags, text], ensure_ascii=False)
        digest = hashlib.sha256(stored.encode("utf-8", errors="surrogatepass")).hexdigest()
        chunks.append(NoteChunk(f"note:{path}#{number}", trail, start + 1, end, text, digest))
    return Note(tuple(chunks), tags)


def fenced_lines(lines: list[str], start: int = 0) -> list[bool]:
    """For each line, whether it is inside a fenced code block (the fence lines included)."""
    inside = [False] * len(lines)
    fence: str | None = None
    for index in range(start, len(lines)):
        match = _FENCE.fullmatch(lines[index])
        if fence is None:
            if match and not (match[1][0] == "`" and "`" in match[2]):
                fence = match[1]
                inside[index] = True
            continue
        inside[index] = True
        if match and match[1][0] == fence[0] and len(match[1]) >= len(fence) and not match[2].strip():
            fence = None
    return inside


def front_matter(lines: list[str]) -> tuple[int, tuple[str, ...]]:
    """The index of the first line after the front matter (0 when there is none) and its tags."""
    if not lines or lines[0].rstrip() != "---":
        return 0, ()
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _FRONT_MATTER_CLOSE:
            return index + 1, _tags(lines[1:index])
    return 0, ()  # never closed: a thematic break, not front matter


def _tags(block: list[str]) -> tuple[str, ...]:
    """The `tags:` (or `tag:`) of a front matter block: `[a, b]`, `a, b`, `a b` or a `- a` list."""
    found: list[str] = []
    for index, line in enumerate(block):
        key = _TAGS_KEY.fullmatch(line)
        if key is None:
            continue
        value = key[1].strip()
        if value:
            found.extend(re.split(r"[,\s]+", value.strip("[]")))
        else:
            for item_line in block[index + 1 :]:
                item = _LIST_ITEM.fullmatch(item_line)
                if item is None:
                    break
                found.append(item[1])
        break
    cleaned = (tag.strip().strip("'\"").strip().lstrip("#") for tag in found)
    return tuple(dict.fromkeys(tag for tag in cleaned if tag))
