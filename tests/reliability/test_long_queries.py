"""Any query is answered in time linear in its length (issue 9, item 4): the routing patterns
used to backtrack quadratically (a 100,000-character query took 58 s in auto mode). A query may be
a whole document (issue 30): up to MAX_QUERY_CHARS on every front end, one more is refused."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from memsearch.api import Memsearch
from memsearch.errors import InvalidInputError
from memsearch.models import NewMemory
from memsearch.operations import MAX_QUERY_CHARS
from memsearch.retrieval import routing
from memsearch.retrieval.request import SearchRequest

MEGABYTE = 1_000_000

# Texts that made the old patterns backtrack: long runs of path, identifier and flag characters.
HOSTILE = {
    "path": "a/" * (MEGABYTE // 2),
    "tilde-path": "a~" * (MEGABYTE // 2),
    "one-word": "x" * MEGABYTE,
    "scope": "ab::" * (MEGABYTE // 4),
    "quotes": '"x' * (MEGABYTE // 2),
    "dashes": "-" * MEGABYTE,
    "snake": "a_" * (MEGABYTE // 2),
    "fts-syntax": '"a" OR b* NEAR(c d) ' * (MEGABYTE // 20),
}


def _seconds(work: Callable[..., object], *args: object) -> float:
    """How long `work(*args)` takes (the arguments, not default values, carry a loop's variable in)."""
    start = time.perf_counter()
    work(*args)
    return time.perf_counter() - start


def _floor(text: str) -> float:
    """A linear pass over `text` in this run, on this machine: the unit the bounds are in."""
    return max(_seconds(lambda: re.findall(r"\w+", text)), 1e-3)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_token_pattern_is_linear_on_a_megabyte(name: str) -> None:
    """Not only capped: each pattern over the whole megabyte costs a few linear passes."""
    text = HOSTILE[name]
    floor = _floor(text)
    for pattern in (*routing._EXACT_TOKEN_RES, *routing._INTENT_RES.values()):
        elapsed = _seconds(lambda each: sum(1 for _ in each.finditer(text)), pattern)
        assert elapsed < 100 * floor + 2.0, (pattern.pattern, elapsed, floor)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_route_query_reads_a_bounded_head(name: str) -> None:
    text = HOSTILE[name]
    floor = _floor(text)
    elapsed = _seconds(lambda: routing.route_query(routing.route_features(text)))
    assert elapsed < 10 * floor + 0.5, (elapsed, floor)


def test_routing_still_finds_the_tokens_it_found() -> None:
    route = routing.route_query(routing.route_features("why does ~/src/app/main.py raise ENOENT in parse_config()"))
    assert route.exact_tokens[:1] == ("~/src/app/main.py",)
    assert {"ENOENT", "parse_config"} <= set(route.exact_tokens)


@pytest.mark.parametrize("mode", ["auto", "lexical"])
def test_a_query_up_to_the_limit_is_searched_in_linear_time_and_a_longer_one_refused(ms: Memsearch, mode: str) -> None:
    """Every front end takes queries up to MAX_QUERY_CHARS (one contract, a megabyte); the search
    stays linear up to it, and one character more is refused at once, in one line, before
    anything is embedded."""
    for text in ("the deploy script lives in tools/deploy.sh", "a/b/c is a path", "Alice drinks tea"):
        ms.add(NewMemory(text=text))
    ms.search(SearchRequest("warm up", mode=mode))
    for name in ("path", "fts-syntax"):
        big = (HOSTILE[name] * 2)[:MAX_QUERY_CHARS]
        tenth = big[: len(big) // 10]
        small_time = _seconds(lambda query: ms.search(SearchRequest(query, mode=mode, touch=False)), tenth)
        big_time = _seconds(lambda query: ms.search(SearchRequest(query, mode=mode, touch=False)), big)
        # Linear: ten times the text, about ten times the time (quadratic would be a hundred).
        assert big_time < 30 * small_time + 2.0, (name, small_time, big_time)
        started = time.perf_counter()
        with pytest.raises(InvalidInputError, match=f"the limit is {MAX_QUERY_CHARS:,}") as refused:
            ms.search(SearchRequest(big + "x", mode=mode, touch=False))
        assert refused.value.field == "query" and time.perf_counter() - started < 1.0
