"""The ingest package and the service's import, pin, timeline and output use cases."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import DuplicateKeyError, ImportLineError, InvalidInputError, MemoryNotFoundError
from memsearch.ingest.readers import read_chat
from memsearch.ingest.records import parse_memories
from memsearch.jsonl import parse_jsonl, split_lines
from memsearch.models import NewMemory
from memsearch.retrieval.queries import request_from_json

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def run(*args: str, input: str | None = None, code: int = 0) -> Result:
    result = runner.invoke(app, list(args), input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


# -- records --------------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_line_separator_inside_a_json_string_does_not_split_the_line(separator: str) -> None:
    content = json.dumps({"text": f"one{separator}two"}, ensure_ascii=False) + "\n" + json.dumps({"text": "three"})
    parsed = parse_memories(content, "notes.jsonl")
    assert parsed.numbers == [1, 2]
    assert [m.text for m in parsed.memories] == [f"one{separator}two", "three"]


def test_windows_line_ends_and_a_byte_order_mark_are_accepted() -> None:
    content = '\ufeff{"text": "first"}\r\n\r\n{"text": "second"}\r\n'
    assert split_lines(content) == ['{"text": "first"}', "", '{"text": "second"}', ""]
    assert parse_jsonl(content, "x") == [(1, {"text": "first"}), (3, {"text": "second"})]


def test_a_byte_order_mark_later_in_the_text_is_not_stripped() -> None:
    with pytest.raises(ImportLineError, match="line 2"):
        parse_jsonl('{"text": "a"}\n\ufeff{"text": "b"}', "x")


def test_bad_lines_are_named_by_their_number() -> None:
    with pytest.raises(ImportLineError, match=r"notes.jsonl, line 3: not valid JSON"):
        parse_memories('{"text": "a"}\n\n{nope', "notes.jsonl")


def test_request_from_json_takes_defaults_and_checks_fields() -> None:
    request = request_from_json({"query": "coffee", "k": 3}, {"mode": "lexical", "granularity": "session"})
    assert (request.query, request.k, request.mode, request.granularity) == ("coffee", 3, "lexical", "session")
    with pytest.raises(InvalidInputError, match="unknown field 'q'"):
        request_from_json({"query": "x", "q": 1}, {})
    with pytest.raises(InvalidInputError, match="k must be a whole number"):
        request_from_json({"query": "x", "k": True}, {})


def test_parse_queries_numbers_its_lines() -> None:
    requests = Memsearch.parse_queries('{"query": "a"}\n{"query": "b", "mode": "lexical"}', source="q.jsonl", k=2)
    assert [(r.query, r.k, r.mode) for r in requests] == [("a", 2, "auto"), ("b", 2, "lexical")]
    with pytest.raises(ImportLineError, match=r"q.jsonl, line 2: mode must be one of auto, vector, hybrid, lexical"):
        Memsearch.parse_queries('{"query": "a"}\n{"query": "b", "mode": "fuzzy"}', source="q.jsonl")


def test_read_chat_from_text_and_from_an_open_file() -> None:
    path = DATA / "chat_tiny.jsonl"
    from_text = read_chat(path.read_text(encoding="utf-8"), "stdin", "talk")
    with path.open(encoding="utf-8") as handle:
        from_file = read_chat(handle, str(path), "talk")
    assert from_text == from_file and from_text.id == "talk" and from_text.turns


# -- the service ----------------------------------------------------------------------------------


def test_import_text_counts_and_reports_an_existing_key_with_its_line_before_embedding(
    db_path: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.import_text('{"text": "alpha", "key": "a"}\n{"text": "beta"}\n', source="one.jsonl")
        assert outcome.counts == {"note": 2, "turn": 0, "session": 0} and outcome.duplicates == []
        assert outcome.to_dict() == {
            "source": "one.jsonl",
            "counts": outcome.counts,
            "duplicates": [],
            "ignored_fields": [],
            "repeats": 0,
        }

    def no_model() -> Encoder:
        raise AssertionError("the model was loaded for an import that must fail first")

    with Memsearch(db_path, encoder_factory=no_model) as ms:
        with pytest.raises(DuplicateKeyError, match=r"two.jsonl, line 3: a memory with key 'a' exists already"):
            ms.import_text('{"text": "gamma"}\n\n{"text": "alpha again", "key": "a"}\n', source="two.jsonl")
        assert ms.stats()["memories"] == 2


def test_import_text_rejects_an_unknown_format(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms, pytest.raises(InvalidInputError) as error:
        ms.import_text("{}", source="x", fmt="csv")
    assert error.value.field == "fmt"


def test_set_pinned_is_all_or_nothing(ms: Memsearch) -> None:
    first = ms.add(NewMemory("pin me", key="p")).id
    with pytest.raises(MemoryNotFoundError):
        ms.set_pinned([first, 99_999], True)
    assert ms.get(first).pinned is False
    assert ms.set_pinned(["p", first], True) == [first]
    assert ms.get(first).pinned is True


def test_get_many_and_resolve(ms: Memsearch) -> None:
    ms.add(NewMemory("by key", key="42"))
    ms.add(NewMemory("plain"))
    assert Memsearch.resolve("7") == 7 and Memsearch.resolve("7", by_key=True) == "7"
    assert Memsearch.resolve("k7") == "k7"
    assert [m.text for m in ms.get_many(["42"], by_key=True)] == ["by key"]
    assert [m.text for m in ms.get_many([2, "1"])] == ["plain", "by key"]
    with pytest.raises(MemoryNotFoundError):
        ms.get_many([1, "nope"])


def test_delete_by_refs_is_all_or_nothing(ms: Memsearch) -> None:
    ms.add_many([NewMemory("one", key="one"), NewMemory("two")])
    with pytest.raises(MemoryNotFoundError):
        ms.delete(["one", 99])
    assert ms.stats()["memories"] == 2
    assert ms.delete(["one", 1, 2]) == [1, 2]


def test_delete_and_pin_by_a_numeric_key(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("add", "first", "--db", db)  # id 1
    run("add", "keyed", "--key", "1", "--db", db)  # id 2, key "1"
    assert run("pin", "--key", "1", "--db", db).stderr.strip() == "pinned 2"
    assert json.loads(run("get", "1", "--db", db, "-f", "json").stdout)["pinned"] is False
    run("delete", "--key", "1", "--db", db)
    assert [m["text"] for m in json.loads(run("list", "--db", db, "-f", "json").stdout)] == ["first"]


def test_timeline_marks_the_memory_asked_for(ms: Memsearch) -> None:
    ms.import_text((DATA / "chat_tiny.jsonl").read_text(encoding="utf-8"), source="chat_tiny.jsonl", fmt="chat")
    turn = ms.get("chat_tiny/ack-1")
    timeline = ms.timeline(turn.id, before=1, after=1)
    assert timeline.current == turn.id and turn.id in [m.id for m in timeline.memories]
    assert [d["current"] for d in timeline.to_dict()["memories"]].count(True) == 1


# -- the command line -----------------------------------------------------------------------------


def test_pin_of_a_missing_memory_pins_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("add", "keep unpinned", "--db", db)
    assert "no memory with id 99999" in run("pin", "1", "99999", "--db", db, code=1).stderr
    assert json.loads(run("get", "1", "--db", db, "-f", "json").stdout)["pinned"] is False


def test_import_of_an_existing_key_names_the_line_and_the_option(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("add", "first", "--key", "k1", "--db", db)
    lines = '{"text": "new"}\n{"text": "again", "key": "k1"}\n'
    error = run("import", "-", "--db", db, input=lines, code=1).stderr
    assert "stdin, line 2: a memory with key 'k1' exists already" in error and "--replace" in error
    assert json.loads(run("stats", "--db", db, "-f", "json").stdout)["memories"] == 1


def test_a_chat_from_stdin_takes_its_conversation_name(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    chat = (DATA / "chat_tiny.jsonl").read_text(encoding="utf-8")
    run("import", "-", "-f", "chat", "--conversation", "ferns", "--db", db, input=chat)
    assert json.loads(run("get", "ferns/ack-1", "--db", db, "-f", "json").stdout)["conversation"] == "ferns"
    run("import", "-", "-f", "chat", "--db", db, input=chat)  # unnamed: the conversation is "stdin"
    assert json.loads(run("get", "stdin/ack-1", "--db", db, "-f", "json").stdout)["conversation"] == "stdin"


def test_a_conversation_name_is_only_for_chats(tmp_path: Path) -> None:
    error = run("import", "-", "--conversation", "x", "--db", str(tmp_path / "m.db"), input="{}", code=2).stderr
    assert "--conversation names a chat's conversation" in error


def test_consolidate_and_profiles_show_print_csv_when_asked(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("add", "The staging database password rotates every month", "--db", db)
    run("add", "The staging database password rotates every month.", "--db", db)
    rows = list(csv.reader(io.StringIO(run("consolidate", "--dry-run", "-f", "csv", "--db", db).stdout)))
    assert rows[0] == ["id", "superseded_by", "group_id", "text", "newer_text"]
    assert rows[1][:2] == ["1", "2"] and rows[1][3].startswith("The staging database")
    shown = list(csv.reader(io.StringIO(run("profiles", "show", "cems", "-f", "csv").stdout)))
    assert shown[0] == ["name", "value"] and ["name", "cems"] in shown
