"""Snippets: where the query's words occur in each result's text (JSON `matches`, offsets in code
points), found as the lexical leg matches them, and highlighted in a terminal's table."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.cli.literal import one_line, one_line_offsets
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store.fts import FTS_TOKENIZER
from memsearch.store.matches import match_offsets
from memsearch.text import LexicalQuery, query_grams
from tests.conftest import T0
from tests.serving import Served, server_env

runner = CliRunner()
TEXT = "The deploy key lives in the vault; Deploys [bold]keys[/bold] \x1b[31m and the KEY"


def shown(text: str, query: str) -> list[str]:
    return [text[start:end] for start, end in match_offsets(LexicalQuery.of(query), [text])[0]]


def test_the_query_words_are_found_as_the_lexical_leg_matches_them() -> None:
    # stop words are not matched; case aside; Porter stems (keys → key); markup is only text
    assert shown(TEXT, "where is the deploy key?") == ["deploy", "key", "Deploys", "keys", "KEY"]
    assert shown("A café in Zürich", "cafe zurich") == ["café", "Zürich"]  # diacritics, as FTS5 folds them
    assert shown("the cat sat", "the") == ["the"]  # a query of stop words only searches them
    assert shown("nothing to see", "deploy") == []
    assert match_offsets(LexicalQuery.of("deploy"), []) == []


def test_adjacent_words_are_separate_matches() -> None:
    assert shown("DEPLOY-KEY and deploy_key", "deploy key") == ["DEPLOY", "KEY", "deploy", "key"]


def test_offsets_are_code_points_of_the_text() -> None:
    text = "😀 \x00 naïve 東京 deploy"
    # After an emoji and a NUL:
    assert match_offsets(LexicalQuery.of("deploy"), [text])[0] == [(len(text) - 6, len(text))]
    assert shown("私は東京に行った ✓ done", "東京都 ✓") == ["東京", "✓"]  # CJK bigrams and symbols, as the grams column


WORDS = ["deploy", "key", "vault", "coffee", "alice", "yaml", "staging", "python"]
SEPARATORS = [" ", ", ", "-", "\n", " [", "] ", "\x1b", "\t", "’s ", " 😀 "]


@given(
    st.lists(
        st.tuples(st.sampled_from(WORDS), st.sampled_from(["lower", "upper", "title"]), st.sampled_from(SEPARATORS))
    ),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_every_occurrence_of_a_query_word_is_found_and_nothing_else(
    parts: list[tuple[str, str, str]], query_words: list[str]
) -> None:
    text = "".join(getattr(word, case)() + separator for word, case, separator in parts)
    spans = match_offsets(LexicalQuery.of(" ".join(query_words)), [text])[0]
    assert [text[start:end].lower() for start, end in spans] == [word for word, _, _ in parts if word in query_words]


@pytest.mark.slow  # many generated texts: out of the quick tier
@given(st.text(max_size=200), st.data())
@settings(max_examples=300, deadline=None)
def test_offsets_lie_in_the_text_and_each_slice_matches_the_query(text: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(text)))
    pieces = [text[at : at + n] for n in range(1, 12)] + ["the", "Deploy", "東京"]
    # Any query, or pieces of the text with more words (so that some words match).
    query = data.draw(
        st.one_of(st.text(max_size=40), st.builds(" ".join, st.lists(st.sampled_from(pieces), max_size=4)))
    )
    spans = match_offsets(LexicalQuery.of(query), [text])[0]
    asked = {word for phrase in LexicalQuery.of(query).match_phrases for word in FTS_TOKENIZER.phrase(phrase)}
    assert spans == sorted(spans)
    for (start, end), (following, _) in zip(spans, [*spans[1:], (len(text), 0)], strict=False):
        assert 0 <= start < end <= len(text) and end <= following
        piece = text[start:end]
        # The slice is a word of the query as the lexical leg asks FTS5 for it (case folded,
        # stemmed), or CJK / symbol grams of it.
        words = FTS_TOKENIZER.phrase(piece)
        if words and set(words) <= asked:
            continue
        grams = [g if not g.isascii() else chr(int(g[1:], 16)) for g in query_grams(query)]
        assert any(gram in piece for gram in grams), (piece, words)


@given(st.text(max_size=300), st.one_of(st.none(), st.integers(1, 120)))
@settings(max_examples=300, deadline=None)
def test_one_line_offsets_shows_what_one_line_shows(text: str, limit: int | None) -> None:
    shown_text, at = one_line_offsets(text, limit)
    assert shown_text == one_line(text, limit)
    assert len(at) == len(text) + 1 and at == sorted(at) and at[-1] <= len(shown_text)


# -- through the library, the CLI, HTTP and MCP --------------------------------------------

NOTES = ["The deploy key lives in the team vault under ops/deploy", "Alice prefers [red]dark roast[/red] coffee"]


@pytest.fixture
def notes(ms: Memsearch) -> Memsearch:
    ms.add_many([NewMemory(text) for text in NOTES])
    return ms


def _spans(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {row["text"]: [row["text"][start:end] for start, end in row["matches"]] for row in rows}


def test_each_result_and_candidate_carries_its_matches(notes: Memsearch) -> None:
    document = notes.search(SearchRequest("where is the deploy key", as_of=T0)).to_dict(raw=True)
    assert _spans(document["results"])[NOTES[0]] == ["deploy", "key", "deploy"]
    assert _spans(document["results"])[NOTES[1]] == []
    assert _spans(document["candidates"]) == _spans(document["results"])


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, [*args], env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def terminal(**extra: str) -> dict[str, str]:
    return {"TTY_COMPATIBLE": "1", "COLUMNS": "120", "TERM": "xterm", **extra}


def test_the_cli_json_carries_the_matches(notes: Memsearch, db_path: Path) -> None:
    document = json.loads(run("search", "deploy key", "--db", str(db_path), "-f", "json").stdout)
    assert _spans(document["results"])[NOTES[0]] == ["deploy", "key", "deploy"]


_STYLED = re.compile(r"\x1b\[([0-9;]*)m([^\x1b]*)\x1b\[0m")


def test_a_terminal_table_highlights_the_matched_words_only(ms: Memsearch, db_path: Path) -> None:
    ms.add(NewMemory("[bold]Deploys[/bold] \x1b[31m keys in [link=x]the vault[/link]"))
    out = run("--color", "always", "search", "deploy vault", "--db", str(db_path), env=terminal()).stdout
    styled = [text for codes, text in _STYLED.findall(out) if "31" in codes.split(";")]
    assert styled == ["Deploys", "vault"]
    assert "[bold]" in out and "\\x1b[31m" in out and "[link=x]" in out  # stored text stays literal


def test_a_pipe_or_no_colour_gets_no_highlight(notes: Memsearch, db_path: Path) -> None:
    piped = run("search", "deploy key", "--db", str(db_path)).stdout
    assert "\x1b" not in piped and "deploy key" in piped
    plain = run("--color", "never", "search", "deploy key", "--db", str(db_path), env=terminal()).stdout
    assert not [codes for codes, _ in _STYLED.findall(plain) if "31" in codes.split(";")]


def test_a_match_past_the_preview_is_shown_in_a_snippet(ms: Memsearch, db_path: Path) -> None:
    ms.add(NewMemory("filler words " * 30 + "the deploy key is here"))
    out = run("--color", "always", "search", "deploy", "--db", str(db_path), env=terminal()).stdout
    assert [text for codes, text in _STYLED.findall(out) if "31" in codes.split(";")] == ["deploy"]


def test_http_search_carries_the_matches(served: Served) -> None:
    for text in NOTES:
        assert served.request("POST", "/add", {"text": text}).status == 200
    document = served.request("GET", "/search?q=deploy+key").json()
    assert _spans(document["results"])[NOTES[0]] == ["deploy", "key", "deploy"]


def test_mcp_search_carries_the_matches(db_path: Path, encoder: Encoder) -> None:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add_many([NewMemory(text) for text in NOTES])

    async def call() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memsearch", "mcp", "--db", str(db_path)], env=server_env()
        )
        with anyio.fail_after(180):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("mem_search", {"query": "coffee roast"})
                assert result.structured_content is not None
                return dict(result.structured_content)

    assert _spans(anyio.run(call)["results"])[NOTES[1]] == ["roast", "coffee"]
