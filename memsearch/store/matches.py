"""Where a query's words occur in texts, as the lexical leg matches them: the character offsets a
search result's `matches` carries, for highlighting.

The words are found by SQLite's own FTS5 tokenizer (the one both stores rank with, see
`fts.TOKENIZER`) through FTS5's highlight() over an in-memory table, so a highlighted word is one
the lexical leg matched: case aside, "deploys" for "deploy" (Porter stems), "café" for "cafe", and
the stop words a query drops (see `text.query_terms`) are not highlighted. A range FTS5 marks
over adjacent words ("deploy-key") is split into its words. CJK words and symbols, which the
stores match through their `grams` columns (see `text.gram_terms`), are found as those literal
bigrams and characters.

Offsets are [start, end) in Python `str` code points of the text (not bytes, not UTF-16 units).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence

from memsearch.store.fts import TOKENIZER, match_expression
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import LexicalQuery

Span = tuple[int, int]

_lock = threading.Lock()
_tables: list[sqlite3.Connection] = []  # the one in-memory table, made on first use

# Characters FTS5's tokenizer never puts inside a word here: a highlighted range is split at them.
_SEPARATOR_CATEGORIES = ("Z", "P", "S", "Cc", "Cf", "Cs", "Cn")
# Marker characters (noncharacters, then the supplementary private use planes): each text is
# marked with two it does not contain, so no marker is ever mistaken for text.
_MARKER_CODES = (range(0xFDD0, 0xFDF0), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def match_offsets(lexical: LexicalQuery, texts: Sequence[str]) -> list[list[Span]]:
    """For each text, the sorted, disjoint [start, end) offsets of the words the query matches."""
    expression = match_expression(lexical)
    found = _fts_offsets(expression, texts) if expression is not None and texts else [[] for _ in texts]
    grams = [term if not term.isascii() else chr(int(term[1:], 16)) for term in lexical.grams]
    if grams:
        found = [_merged([*spans, *_literal_offsets(text, grams)]) for spans, text in zip(found, texts, strict=True)]
    return found


def _table() -> sqlite3.Connection:
    if not _tables:
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        db.execute(
            f"CREATE VIRTUAL TABLE doc USING fts5 (text, open UNINDEXED, close UNINDEXED, tokenize = '{TOKENIZER}')"
        )
        _tables.append(db)
    return _tables[0]


def _markers(text: str) -> tuple[str, str]:
    chosen: list[str] = []
    for codes in _MARKER_CODES:
        for code in codes:
            if chr(code) not in text:
                chosen.append(chr(code))
                if len(chosen) == 2:
                    return chosen[0], chosen[1]
    raise AssertionError("a text holds every marker character")  # it would be over 131,000 characters


def _fts_offsets(expression: str, texts: Sequence[str]) -> list[list[Span]]:
    rows = []
    for number, text in enumerate(texts, start=1):
        opening, closing = _markers(text)
        # SQLite's text ends at a NUL, which separates words: a space stands in for it.
        rows.append((number, text.replace("\x00", " "), opening, closing))
    found: list[list[Span]] = [[] for _ in texts]
    with _lock:
        db = _table()
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO doc (rowid, text, open, close) VALUES (?, ?, ?, ?)", rows)
            marked = db.execute(
                "SELECT rowid, highlight(doc, 0, open, close) FROM doc WHERE doc MATCH ?", (expression,)
            )
            for number, text in marked.fetchall():
                _, original, opening, closing = rows[number - 1]
                found[number - 1] = [
                    word for span in _marked_spans(text, opening, closing) for word in _words(original, span)
                ]
        finally:
            db.execute("ROLLBACK")
    return found


def _marked_spans(marked: str, opening: str, closing: str) -> list[Span]:
    """The ranges between the markers, as offsets into the text without them."""
    spans, start = [], 0
    for seen, marker in enumerate(re.finditer(f"[{opening}{closing}]", marked)):
        at = marker.start() - seen
        if marker.group() == opening:
            start = at
        elif at > start:
            spans.append((start, at))
    return spans


def _separates(char: str) -> bool:
    return unicodedata.category(char).startswith(_SEPARATOR_CATEGORIES)


def _words(text: str, span: Span) -> list[Span]:
    """The words of a highlighted range: FTS5 marks adjacent matched words as one range."""
    words, start = [], None
    for at in range(span[0], span[1]):
        if _separates(text[at]):
            if start is not None:
                words.append((start, at))
                start = None
        elif start is None:
            start = at
    if start is not None:
        words.append((start, span[1]))
    return words


def _literal_offsets(text: str, needles: Sequence[str]) -> list[Span]:
    spans = []
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            spans.append((at, at + len(needle)))
            at = text.find(needle, at + 1)
    return spans


def _merged(spans: list[Span]) -> list[Span]:
    """Sorted, overlapping spans joined (bigrams of one CJK word overlap)."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out
