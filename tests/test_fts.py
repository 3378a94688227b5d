"""Any user query becomes a safe FTS5 expression that searches its words."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsearch.store.fts import match_expression
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import MAX_TERMS, LexicalQuery, query_terms

NASTY = [
    "fix the auth-middleware bug",
    '"',
    'say "hello',
    "NEAR(",
    "a:b",
    "*",
    "^start",
    "AND",
    "foo AND OR NOT bar",
    "text: tags:",
    "🎉🔥 emoji party 🎉",
    "x" * 10_000,
    "word " * 2_000,
    "(((",
    "{col1 col2}: x",
    "-negated +plus",
    "NEAR(a b, 3)",
    "'; DROP TABLE memories; --",
]


@pytest.fixture
def fts() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tags, tokenize='porter unicode61 remove_diacritics 2')")
    rows = [
        ("Fixed the auth middleware bug in login", ""),
        ("NEAR the river we camped", "camping"),
        ("a b c and more", ""),
        ("emoji party planning", "fun"),
    ]
    db.executemany("INSERT INTO f (text, tags) VALUES (?, ?)", rows)
    return db


@pytest.mark.parametrize("query", NASTY)
def test_nasty_queries_never_raise(fts: sqlite3.Connection, query: str) -> None:
    expression = match_expression(LexicalQuery.of(query))
    if expression is not None:
        fts.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank", (expression,)).fetchall()


def test_words_of_a_hyphenated_query_are_searched(fts: sqlite3.Connection) -> None:
    expression = match_expression(LexicalQuery.of("fix the auth-middleware bug"))
    rows = fts.execute("SELECT text FROM f WHERE f MATCH ? ORDER BY rank", (expression,)).fetchall()
    assert rows[0][0] == "Fixed the auth middleware bug in login"


def test_operator_words_are_searched_as_words(fts: sqlite3.Connection) -> None:
    rows = fts.execute("SELECT text FROM f WHERE f MATCH ?", (match_expression(LexicalQuery.of("NEAR(")),)).fetchall()
    assert rows == [("NEAR the river we camped",)]


def test_tags_are_searched(fts: sqlite3.Connection) -> None:
    rows = fts.execute("SELECT text FROM f WHERE f MATCH ?", (match_expression(LexicalQuery.of("camping")),)).fetchall()
    assert rows == [("NEAR the river we camped",)]


def test_stop_words_dropped_only_when_other_words_remain() -> None:
    assert query_terms("what is the auth bug") == ["auth", "bug"]
    assert query_terms("what is it") == ["what", "is", "it"]


def test_a_query_without_words_has_no_expression() -> None:
    assert match_expression(LexicalQuery.of("*")) is None
    assert match_expression(LexicalQuery.of("🎉 ^ :")) is None


def test_terms_are_capped_and_deduplicated() -> None:
    terms = query_terms(" ".join(f"w{i}" for i in range(500)) + " w1 w1")
    assert len(terms) == MAX_TERMS
    assert len(set(terms)) == len(terms)


def test_quoted_phrase_adds_a_phrase_term() -> None:
    assert '"connection reset"' in (match_expression(LexicalQuery.of('the "connection reset" error')) or "")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_valid_match_expression(query: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    db.execute("INSERT INTO f (text) VALUES ('some text')")
    expression = match_expression(LexicalQuery.of(query))
    if expression is not None:
        db.execute("SELECT rowid FROM f WHERE f MATCH ?", (expression,)).fetchall()
