"""Filters by kind, conversation, role and session, relative dates, and the one constructor of a
search request from fields that the CLI, the HTTP API and MCP share."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.models import NewMemory
from memsearch.profiles import load_profile
from memsearch.retrieval.request import REQUEST_NAMES, request_from_fields, scope_from_fields
from memsearch.timeutil import EARLIEST, parse_moment

DATA = Path(__file__).parent / "data"
NOW = datetime(2024, 5, 8, 15, 30, tzinfo=UTC)
runner = CliRunner()


# -- relative dates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        ("3h", NOW - timedelta(hours=3)),
        ("30m", NOW - timedelta(minutes=30)),
        (" 7D ", NOW - timedelta(days=7)),
        ("today", datetime(2024, 5, 8, tzinfo=UTC)),
        ("yesterday", datetime(2024, 5, 7, tzinfo=UTC)),
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024-05-01T13:56:00+02:00", datetime(2024, 5, 1, 11, 56, tzinfo=UTC)),
        ("1y", datetime(2023, 5, 8, 15, 30, tzinfo=UTC)),
        ("3mo", datetime(2024, 2, 8, 15, 30, tzinfo=UTC)),
        (" 2 MO ", datetime(2024, 3, 8, 15, 30, tzinfo=UTC)),
        ("12mo", datetime(2023, 5, 8, 15, 30, tzinfo=UTC)),
        ("30m", NOW - timedelta(minutes=30)),  # m stays minutes; months are mo
    ],
)
def test_relative_and_iso_moments(value: str, expected: datetime) -> None:
    assert parse_moment(value, now=NOW, field="since") == expected


@pytest.mark.parametrize(
    "value", ["7", "d", "7yr", "3mon", "-3d", "7d ago", "last week", "", "99999999d", "2024-13-01", "999999y", "1mo3d"]
)
def test_a_bad_moment_names_its_field(value: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_moment(value, now=NOW, field="until")
    assert caught.value.field == "until" and "\n" not in str(caught.value)


@given(st.integers(0, 999_999), st.sampled_from("mhdw"))
def test_a_relative_moment_lies_that_far_before_now_or_is_refused(amount: int, unit: str) -> None:
    seconds = amount * {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}[unit]
    try:
        moment = parse_moment(f"{amount}{unit}", now=NOW, field="since")
    except InvalidInputError:
        assert timedelta(seconds=seconds) > NOW - EARLIEST
    else:
        assert NOW - moment == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("now", "value", "expected"),
    [
        (datetime(2024, 3, 31, 9, tzinfo=UTC), "1mo", datetime(2024, 2, 29, 9, tzinfo=UTC)),  # a shorter month
        (datetime(2023, 3, 31, 9, tzinfo=UTC), "1mo", datetime(2023, 2, 28, 9, tzinfo=UTC)),
        (datetime(2024, 2, 29, tzinfo=UTC), "1y", datetime(2023, 2, 28, tzinfo=UTC)),  # no 29 February
        (datetime(2024, 1, 15, tzinfo=UTC), "1mo", datetime(2023, 12, 15, tzinfo=UTC)),  # across the year
        (datetime(2024, 1, 15, tzinfo=UTC), "25mo", datetime(2021, 12, 15, tzinfo=UTC)),
    ],
)
def test_months_and_years_go_back_on_the_calendar(now: datetime, value: str, expected: datetime) -> None:
    assert parse_moment(value, now=now, field="since") == expected


@given(st.integers(0, 999_999), st.sampled_from(["mo", "y"]))
def test_months_and_years_back_are_that_many_calendar_months_or_refused(amount: int, unit: str) -> None:
    months = amount * (12 if unit == "y" else 1)
    try:
        moment = parse_moment(f"{amount}{unit}", now=NOW, field="since")
    except InvalidInputError as error:
        assert error.field == "since" and (NOW.year * 12 + NOW.month - 1 - months) // 12 < EARLIEST.year
    else:
        assert (NOW.year - moment.year) * 12 + NOW.month - moment.month == months
        assert (moment.day, moment.time()) == (NOW.day, NOW.time())  # the 8th exists in every month


def test_relative_times_resolve_against_as_of() -> None:
    request = request_from_fields("q", since="7d", until="yesterday", as_of="2024-05-08T15:30:00Z")
    assert request.scope.since == NOW - timedelta(days=7)
    assert request.scope.until == datetime(2024, 5, 7, tzinfo=UTC)


def test_fields_are_checked_and_named() -> None:
    scope = scope_from_fields(kinds=["turn", "turn"], roles="user", sessions=["mon"], conversation="c")
    assert (scope.kinds, scope.roles, scope.sessions, scope.conversation) == (("turn",), ("user",), ("mon",), "c")
    for fields, field in (
        ({"kinds": ["fact"]}, "kinds"),
        ({"roles": [1]}, "roles"),
        ({"conversation": 3}, "conversation"),
        ({"since": 7}, "since"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            scope_from_fields(**fields)
        assert caught.value.field == field
    with pytest.raises(InvalidInputError) as caught:
        request_from_fields("q", k="3")
    assert caught.value.field == "k"


# -- the filters in the stores and the pipeline -----------------------------------------------


@pytest.fixture
def chat(store_location: Path | str, encoder: Encoder) -> Memsearch:
    ms = Memsearch(store_location, encoder=encoder)
    ms.add(NewMemory("water the ferns daily"))
    ms.import_text((DATA / "chat_tiny.jsonl").read_text(encoding="utf-8"), source="chat.jsonl", fmt="chat")
    ms.import_text((DATA / "locomo_tiny.json").read_text(encoding="utf-8"), source="locomo.json", fmt="locomo")
    return ms


def test_list_and_search_honour_kind_conversation_role_and_session(chat: Memsearch) -> None:
    def listed(**fields: Any) -> list[tuple[str, str | None, str | None]]:
        return [(m.kind, m.role, m.session) for m in chat.list(scope_from_fields(**fields))]

    assert {kind for kind, _, _ in listed(kinds=["note"])} == {"note"}
    assert listed(conversation="chat", kinds=["turn"], roles=["user"], sessions=["mon"]) == [
        ("turn", "user", "mon"),
        ("turn", "user", "mon"),
    ]
    assert {session for _, _, session in listed(conversation="chat", sessions=["tue", "mon"])} == {"mon", "tue"}
    filter_sets: list[dict[str, Any]] = [
        {"kinds": ["turn"], "roles": ["user"]},
        {"sessions": ["tue"]},
        {"kinds": ["note"]},
    ]
    for fields in filter_sets:
        outcome = chat.search(request_from_fields("water the ferns", k=10, touch=False, **fields))
        scope = scope_from_fields(**fields)
        assert outcome.results and all(scope.admits(c.memory) for c in outcome.results)
    sessions = chat.search(request_from_fields("ferns", granularity="session", kinds=["note"], touch=False))
    assert [c.memory.kind for c in sessions.results] == ["note"]
    chat.close()


def test_a_speakers_leg_stays_inside_a_role_filter(chat: Memsearch) -> None:
    profile = load_profile("default")
    profile = replace(profile, legs={"vector": "vector", "assistant": "vector:assistant"})
    outcome = chat.search(request_from_fields("water the ferns", k=10, roles=["user"], touch=False, profile=profile))
    assert outcome.results and {c.memory.role for c in outcome.results} == {"user"}
    chat.close()


# -- the command line --------------------------------------------------------------------------


@pytest.fixture
def chat_cli() -> None:
    assert runner.invoke(app, ["add", "water the ferns daily", "--at", "2024-05-01"]).exit_code == 0
    assert runner.invoke(app, ["import", str(DATA / "chat_tiny.jsonl"), "-f", "chat"]).exit_code == 0


def test_cli_filters_and_relative_dates(chat_cli: None) -> None:
    found = runner.invoke(
        app, ["search", "ferns", "-f", "json", "--kind", "turn", "--role", "user", "--session", "mon"]
    )
    assert found.exit_code == 0, found.stderr
    assert {(r["kind"], r["role"], r["session"]) for r in json.loads(found.stdout)["results"]} == {
        ("turn", "user", "mon")
    }
    recent = runner.invoke(app, ["list", "-f", "json", "--since", "3d", "--conversation", "chat_tiny"])
    assert recent.exit_code == 0 and json.loads(recent.stdout) == []  # the chat is from 2024
    as_of = ["--as-of", "2024-05-08T00:00:00Z", "-f", "json", "--no-touch"]
    week = runner.invoke(app, ["search", "ferns", "--since", "7d", "--until", "yesterday", *as_of])
    assert week.exit_code == 0, week.stderr
    assert {r["created_at"][:10] for r in json.loads(week.stdout)["results"]} == {"2024-05-01", "2024-05-06"}


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["search", "x", "--since", "3x"], "--since"),
        (["list", "--until", "last week"], "--until"),
        (["search", "x", "--as-of", "soon"], "--as-of"),
        (["search", "x", "--kind", "fact"], "--kind"),
        (["list", "--kind", "fact"], "--kind"),
    ],
)
def test_a_bad_filter_is_a_one_line_usage_error_naming_the_option(chat_cli: None, args: list[str], option: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.stderr
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1 and option in result.stderr


def test_ndjson_prints_one_hit_a_line(chat_cli: None, tmp_path: Path) -> None:
    result = runner.invoke(app, ["search", "water the ferns", "-f", "ndjson", "-k", "3"])
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(h["query"], h["rank"]) for h in hits] == [
        ("water the ferns", 1),
        ("water the ferns", 2),
        ("water the ferns", 3),
    ]
    assert all("text" in h and "id" in h and "score" in h for h in hits)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "ferns", "k": 1}\n{"query": "cactus", "k": 2}\n', encoding="utf-8")
    batch = runner.invoke(app, ["search", "--queries", str(queries), "-f", "ndjson"])
    assert [json.loads(line)["query"] for line in batch.stdout.splitlines()] == ["ferns", "cactus", "cactus"]
    listed = runner.invoke(app, ["list", "-f", "ndjson", "-n", "2"])
    assert len(listed.stdout.splitlines()) == 2


def test_a_request_goes_to_its_json_fields_and_back_unchanged() -> None:
    """What the CLI sends a server (`to_fields`) is read back as the same request, every field set."""
    request = request_from_fields(
        "deploy key",
        k=7, min_score=0.02, mode="hybrid", profile="cems", tau_days=30.0, granularity="session", max_tokens=500,
        as_of="2024-05-08T15:30:00Z", touch=False, boost=["tag:ops=2", "project:web"], rerank="deterministic",
        max_ms=900, project="web", namespace="personal", tags=["ops", "keys"], since="7d", until="yesterday",
        kinds=["note", "turn"], conversation="c1", roles=["user"], sessions=["s1", "s2"],
    )  # fmt: skip
    fields = request.to_fields()
    assert set(fields) == {"query", *REQUEST_NAMES}  # every field set above is carried
    assert request_from_fields(**fields) == request
    assert request_from_fields("q").to_fields() == {"query": "q", "mode": "auto", "granularity": "turn", "touch": True}
