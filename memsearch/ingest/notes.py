"""A note file's text as chunks to store: split at markdown headings, and by length inside a long
section; each chunk knows its heading trail, its line range and a digest of everything stored.

Rules (`chunk_note`):
- Lines are split on "\\n" only (a trailing "\\r" and a leading byte-order mark are dropped), so
  line numbers are the ones an editor shows; U+2028 and friends stay inside their line.
- Markdown (`.md`, `.markdown`): a chunk starts at each ATX heading (`#` to `######` after at most
  three spaces, then a space or the line's end; `#tag` is no heading), never inside a fenced code
  block (``` or ~~~, closed by a fence of the same character at least as long; an unclosed fence runs
  to the end). Setext headings (a line underlined with === or ---) are not split at.
- A `---` block at the very top, closed by `---` or `...`, is front matter: it is in no chunk; its
  `tags:` (an inline `[a, b]` list, `a, b`, or a `- a` block list) are the note's tags, its
  `title:` the note's title and its `date:` (ISO-8601, read by `timeutil.parse_time`) the note's
  time. A date that cannot be read is left out, with the reason in `Note.problems`.
- Every other file is plain text: blank-line paragraphs packed into chunks under the budget.
- A chunk's text is exactly its lines, `start_line` to `end_line` (1-based), and starts and ends on
  a non-blank line: every non-blank line after the front matter is in exactly one chunk, in order.
  A heading is the first line of its chunk, so the chunk reads on its own.
- A section longer than `CHUNK_CHARS` is cut at blank lines outside code fences (whole paragraphs
  packed greedily), a paragraph longer than that at line ends; a single line is never cut.
- A heading with nothing under it but other headings is merged into the next chunk (into the one
  before when it is the last), so no chunk is a bare heading unless the note has nothing else.
- Identity: a chunk is keyed by what it is, not by its place: `note:{path}#{h}`, where `h` is 16
  hex digits of the SHA-256 of its heading trail and its (titled) text; the second and later
  chunks of a file with the same trail and text get `-2`, `-3`, … in file order. Editing the
  section above leaves a chunk's key as it was. Its digest is `{text}:{layout}`: a fingerprint of
  the text stored (`models.content_hash`, so a store can be checked against it) and a hash of the
  rest the store keeps (trail, lines, tags, title, date). An equal key and digest means the
  stored memory is exactly right, line numbers included; an equal key and text fingerprint means
  only where it is (or the note's tags, title or date) moved.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memsearch.errors import InvalidInputError, MemsearchError
from memsearch.fields import MAX_TEXT_CHARS
from memsearch.jsonl import split_lines
from memsearch.models import content_hash
from memsearch.sections import NOTE_KEY_PREFIX
from memsearch.timeutil import parse_time

# MiniLM reads about 256 word pieces; 1,200 characters of English prose is about 250 to 300 of them
# (memsearch.text embeds any longer memory in overlapping windows, so an over-long chunk is still found).
CHUNK_CHARS = 1_200

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FRONT_MATTER_CLOSE = ("---", "...")
_TAGS_KEY = re.compile(r"tags?[ \t]*:(.*)", re.IGNORECASE)
_FIELD = re.compile(r"(title|date)[ \t]*:(.*)", re.IGNORECASE)
KEY_HASH_DIGITS = 16
_LIST_ITEM = re.compile(r"[ \t]*-[ \t]*(.*)")


class UnreadableNoteError(MemsearchError):
    """A note file that cannot be stored as it is; the message says why (the file is skipped)."""


@dataclass(frozen=True)
class NoteChunk:
    key: str  # "note:{path}#{h}" (module doc: by trail and text, not by place)
    trail: tuple[str, ...]  # the headings above the chunk, outermost first, its own heading last
    start_line: int  # 1-based, inclusive: the chunk's first line in the file
    end_line: int  # 1-based, inclusive
    text: str  # exactly the file's lines start_line..end_line, joined with "\n"
    digest: str  # "{text fingerprint}:{layout hash}" (module doc): what the store keeps of the chunk

    @property
    def titled_text(self) -> str:
        return titled(self.trail, self.text)


def titled(trail: tuple[str, ...], text: str) -> str:
    """The text preceded by its heading trail when the chunk does not begin with its heading
    (the second and later pieces of a long section), so a piece read alone has its context."""
    if not trail or _HEADING.fullmatch(text.split("\n", 1)[0]):
        return text
    return " › ".join(trail) + "\n" + text


def text_fingerprint(digest: str) -> str:
    """The part of a chunk's digest that the stored text's `content_hash` starts with ("" for none)."""
    return digest.partition(":")[0]


@dataclass(frozen=True)
class FrontMatter:
    """What a note's front matter says: where the body starts, its tags, title and date, and the
    lines it could not use (line number, reason)."""

    body_start: int = 0  # the index of the first line after it (0: no front matter)
    tags: tuple[str, ...] = ()
    title: str | None = None
    date: datetime | None = None
    date_text: str | None = None  # the date as written
    problems: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Note:
    """A file's chunks and what its front matter says."""

    chunks: tuple[NoteChunk, ...]
    tags: tuple[str, ...] = ()
    lossy: bool = False  # the file was not valid UTF-8: bad bytes were read as U+FFFD
    title: str | None = None
    date: datetime | None = None  # the front matter's date: the time of every chunk
    problems: tuple[tuple[int, str], ...] = ()  # (line, reason): front matter left unused


NoteReader = Callable[[str, list[str]], Note]  # (the file's path, its lines) → its chunks


def reader_for(path: str) -> NoteReader:
    """The reader of a file by its suffix (lower case; the name's last dot on): `NOTE_READERS`'s,
    else plain text (a file named as a root, or matched by `--include`, may have any suffix)."""
    name = path.rsplit("/", 1)[-1].lower()
    return NOTE_READERS.get(name[name.rfind(".") :] if "." in name else "", read_plain)


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
    return Note(note.chunks, note.tags, lossy, note.title, note.date, note.problems)


def chunk_note(text: str, path: str) -> Note:
    """The chunks of a note's text; `path` keys the chunks and, by its suffix, picks the reader
    (`NOTE_READERS`)."""
    return reader_for(path)(path, split_lines(text))


def read_plain(path: str, lines: list[str]) -> Note:
    """Plain text: blank-line paragraphs packed into chunks under the budget."""
    plain = _Layout(lines, [False] * len(lines), frozenset())
    return _make_note(path, lines, [((), start, end) for start, end in plain.split(0, len(lines))], FrontMatter())


def read_markdown(path: str, lines: list[str]) -> Note:
    """Markdown: front matter, then a chunk at each ATX heading outside code fences (module doc)."""
    meta = front_matter(lines)
    body_start = meta.body_start
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
    return _make_note(path, lines, _Layout(lines, in_fence, frozenset(headings)).pieces(sections), meta)


# The readers of `memsearch index`, by a file's suffix: a new file type is one reader and one row.
# A folder's files with these suffixes are walked unless `--include` says otherwise
# (note_files.default_include).
NOTE_READERS: dict[str, NoteReader] = {".md": read_markdown, ".markdown": read_markdown, ".txt": read_plain}


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


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8", errors="surrogatepass")).hexdigest()


def chunk_key(path: str, trail: tuple[str, ...], titled_text: str) -> str:
    """`note:{path}#{h}` of the first chunk of a file with this trail and (titled) text."""
    return f"{NOTE_KEY_PREFIX}{path}#{_sha256([trail, titled_text])[:KEY_HASH_DIGITS]}"


def _make_note(path: str, lines: list[str], pieces: list[tuple[tuple[str, ...], int, int]], meta: FrontMatter) -> Note:
    chunks = []
    seen: dict[str, int] = {}
    for trail, start, end in pieces:
        text = "\n".join(lines[start:end])
        stored = titled(trail, text)
        identity = chunk_key(path, trail, stored)
        seen[identity] = seen.get(identity, 0) + 1
        layout = _sha256([trail, start + 1, end, meta.tags, meta.title, meta.date_text])[:KEY_HASH_DIGITS]
        digest = f"{content_hash(stored)[:KEY_HASH_DIGITS]}:{layout}"
        key = identity if seen[identity] == 1 else f"{identity}-{seen[identity]}"
        chunks.append(NoteChunk(key, trail, start + 1, end, text, digest))
    return Note(tuple(chunks), meta.tags, title=meta.title, date=meta.date, problems=meta.problems)


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


def front_matter(lines: list[str]) -> FrontMatter:
    """What the front matter at the top says (an empty FrontMatter when there is none)."""
    if not lines or lines[0].rstrip() != "---":
        return FrontMatter()
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _FRONT_MATTER_CLOSE:
            return _front_matter(lines[1:index], index + 1)
    return FrontMatter()  # never closed: a thematic break, not front matter


def _front_matter(block: list[str], body_start: int) -> FrontMatter:
    """The tags, title and date of a front matter block (line 2 of the file is its first line)."""
    found: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(block, start=2):
        field = _FIELD.fullmatch(line)
        if field is not None:
            found.setdefault(field[1].lower(), (number, _scalar(field[2])))
    title = found["title"][1] if "title" in found and found["title"][1] else None
    date, date_text, problems = None, None, []
    if "date" in found:
        number, value = found["date"]
        try:
            date, date_text = parse_time(value, what="date"), value
        except InvalidInputError as error:
            problems.append((number, f"{error}; the file's modification time is used"))
    return FrontMatter(body_start, _tags(block), title, date, date_text, tuple(problems))


def _scalar(value: str) -> str:
    """A front matter value as written: trimmed, without the quotes around it."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value.strip()


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
