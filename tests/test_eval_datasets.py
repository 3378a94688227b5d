"""The benchmark loaders, on small hand-made fixtures (tests/data) and on the real LoCoMo dev file."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsearch.eval.datasets import Question, load_locomo, load_longmemeval, locomo_evidence_ids
from memsearch.ingest.readers import (
    Conversation,
    DatasetError,
    load_chat_jsonl,
    parse_locomo_date,
    parse_longmemeval_date,
    turn_text,
)

DATA = Path(__file__).parent / "data"
# The LoCoMo dev file sits beside the repository (its licence forbids committing it).
LOCOMO_DEV = Path(__file__).parents[2] / "shared" / "benchdata" / "locomo_dev.json"
Locomo = list[tuple[Conversation, list[Question]]]


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# -- LoCoMo dates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:06 am on 11 November, 2022", datetime(2022, 11, 11, 0, 6, tzinfo=UTC)),  # 12 am is midnight
        ("12:30 pm on 2 December, 2023", datetime(2023, 12, 2, 12, 30, tzinfo=UTC)),  # 12 pm is noon
        ("10:04 am on 19 June, 2023", datetime(2023, 6, 19, 10, 4, tzinfo=UTC)),
        ("9:05 am on 29 February, 2024", datetime(2024, 2, 29, 9, 5, tzinfo=UTC)),
    ],
)
def test_locomo_dates_parse_as_utc(text: str, expected: datetime) -> None:
    assert parse_locomo_date(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "13:56 pm on 8 May, 2023",  # not a 12-hour clock
        "0:56 am on 8 May, 2023",
        "1:56 pm on 30 February, 2023",  # no such day
        "1:56 pm on 8 Mai, 2023",  # not an English month
        "1:56 pm 8 May, 2023",
        "1:56 PM on 8 May, 2023",
        "2023-05-08T13:56:00",
        "",
    ],
)
def test_bad_locomo_dates_raise_a_value_error_naming_the_value(text: str) -> None:
    with pytest.raises(ValueError, match="LoCoMo date") as caught:
        parse_locomo_date(text)
    assert repr(text) in str(caught.value)


def test_evidence_ids_are_extracted_from_malformed_strings() -> None:
    assert locomo_evidence_ids(["D8:6; D9:17", "D1:2", "D", "D:11:26"]) == ["D8:6", "D9:17", "D1:2"]


# -- LoCoMo loader ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locomo() -> Locomo:
    return load_locomo(DATA / "locomo_tiny.json")


def test_locomo_sessions_are_in_numeric_order_and_dateless_ones_are_skipped(locomo: Locomo) -> None:
    conversation, _ = locomo[0]
    assert conversation.id == "conv-a"
    assert conversation.speakers == ("Ana", "Ben")
    # session_11 has a date but no turns; order is 1, 8, 9, 10 (not the file's, nor lexical)
    assert [s.id for s in conversation.sessions] == ["session_1", "session_8", "session_9", "session_10"]
    assert [len(s.turns) for s in conversation.sessions] == [3, 6, 17, 1]
    assert conversation.sessions[1].date == datetime(2023, 11, 11, 0, 6, tzinfo=UTC)


def test_locomo_turns(locomo: Locomo) -> None:
    conversation, _ = locomo[0]
    turn = conversation.sessions[2].turns[16]
    assert (turn.key, turn.session_id, turn.position, turn.speaker) == ("D9:17", "session_9", 17, "Ana")
    assert turn.timestamp == datetime(2023, 12, 2, 12, 30, tzinfo=UTC)
    assert turn.conversation_id == "conv-a"
    assert turn.image_caption is None
    assert turn_text(turn) == "Ana: The lake froze over, so we went skating."


def test_locomo_image_caption_goes_into_the_retrieval_text(locomo: Locomo) -> None:
    turn = locomo[0][0].sessions[0].turns[1]
    assert turn.image_caption == "a painting of a lake at sunset"
    assert turn.text == "Look at what I painted last week!"
    assert turn_text(turn) == "Ben: Look at what I painted last week! [image: a painting of a lake at sunset]"


def test_locomo_questions(locomo: Locomo) -> None:
    questions = locomo[0][1]
    assert [q.id for q in questions] == [f"conv-a:q{i}" for i in range(5)]
    multi_hop, painted, no_evidence, adversarial, violin = questions
    # "D8:6; D9:17" is one malformed string holding two valid ids
    assert multi_hop.evidence_keys == ("D8:6", "D9:17")
    assert multi_hop.evidence_session_ids == ("session_8", "session_9")
    assert multi_hop.category == 1
    # D9:30 names no turn (session 9 has 17): dropped
    assert painted.evidence_keys == ("D1:2",)
    assert painted.is_scored
    # D12:1 names no turn and was the only id: kept, but flagged so metrics skip it
    assert no_evidence.evidence_keys == ()
    assert not no_evidence.has_evidence and not no_evidence.is_scored
    # a question with only adversarial_answer
    assert adversarial.answer == "bread" and adversarial.adversarial_answer == "bread"
    assert adversarial.category == 5 and not adversarial.is_abstention and adversarial.is_scored
    # a numeric answer becomes text; "D" and "D:11:26" hold no id; repeats collapse
    assert violin.answer == "2022"
    assert violin.evidence_keys == ("D10:1",)
    assert all(q.conversation_id == "conv-a" and q.question_date is None for q in questions)


def test_locomo_evidence_is_scoped_to_its_own_conversation(locomo: Locomo) -> None:
    conversation, questions = locomo[1]
    assert conversation.id == "conv-b"
    assert len(conversation.turns) == 2  # conv-b also has a "D1:1", keys are per conversation
    assert questions[0].evidence_keys == ("D1:2",)
    assert questions[0].id == "conv-b:q0"


def test_locomo_bad_date_names_conversation_session_and_value(tmp_path: Path) -> None:
    data = json.loads((DATA / "locomo_tiny.json").read_text())
    data[1]["conversation"]["session_1_date_time"] = "sometime in May"
    with pytest.raises(ValueError, match=r"conv-b.*session_1_date_time.*'sometime in May'"):
        load_locomo(_write(tmp_path / "bad.json", data))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[0]["conversation"].pop("session_8_date_time"), "missing field 'session_8_date_time'"),
        (lambda d: d[1]["qa"][0].pop("answer"), "missing field 'answer'"),
        (lambda d: d[1]["qa"][0].pop("evidence"), "missing field 'evidence'"),
        (lambda d: d[1]["conversation"]["session_1"][1].update(dia_id="D1:1"), "dia_id 'D1:1' repeats"),
        (lambda d: d[1]["conversation"]["session_1"][0].pop("text"), "missing field 'text'"),
    ],
)
def test_locomo_structural_errors(tmp_path: Path, mutate: Callable[[Any], object], message: str) -> None:
    data = json.loads((DATA / "locomo_tiny.json").read_text())
    mutate(data)
    with pytest.raises(DatasetError, match=message):
        load_locomo(_write(tmp_path / "bad.json", data))


def test_locomo_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_locomo(path)


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason=f"{LOCOMO_DEV} is absent (shared benchmark data)")
def test_real_locomo_dev_counts() -> None:
    loaded = load_locomo(LOCOMO_DEV)
    conversations = [conversation for conversation, _ in loaded]
    questions = [q for _, qs in loaded for q in qs]
    assert [c.id for c in conversations] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    # The benchdata README says 118 sessions and 2,940 turns, but the file holds 128 `session_N`
    # lists with 2,760 turns (`grep -o '"dia_id"' | wc -l` agrees): the README's figures are off.
    assert sum(len(c.sessions) for c in conversations) == 128
    assert sum(len(c.turns) for c in conversations) == 2760
    assert len(questions) == 999
    # conv-26 q30 and q46 cite no turn; conv-42's "D10:19" names none and is dropped
    assert [q.id for q in questions if not q.is_scored] == ["conv-26:q30", "conv-26:q46"]
    assert sum(q.is_scored for q in questions) == 997
    assert "D10:19" not in {key for q in questions if q.conversation_id == "conv-42" for key in q.evidence_keys}
    assert {q.category for q in questions} == {1, 2, 3, 4, 5}


# -- LongMemEval --------------------------------------------------------------------------------------


def test_longmemeval_dates() -> None:
    assert parse_longmemeval_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    for bad in ("2023-05-20 02:21", "2023/05/20 02:21", "2023/02/30 (Thu) 10:00", "2023/05/20 (Sat) 2:21"):
        with pytest.raises(ValueError, match="LongMemEval date"):
            parse_longmemeval_date(bad)


def test_longmemeval_loader() -> None:
    loaded = load_longmemeval(DATA / "longmemeval_tiny.json")
    assert [c.id for c, _ in loaded] == ["q_user_1", "q_asst_2", "q_temp_3_abs"]
    conversation, (question,) = loaded[0]
    assert [s.id for s in conversation.sessions] == ["sharegpt_noise_1", "answer_a1", "ultrachat_noise_2"]
    assert conversation.speakers == ("user", "assistant")
    assert conversation.sessions[1].date == datetime(2023, 5, 21, 14, 5, tzinfo=UTC)
    turn = conversation.sessions[1].turns[0]
    assert (turn.key, turn.speaker, turn.position, turn.has_answer) == ("answer_a1:1", "user", 1, True)
    assert turn.timestamp == conversation.sessions[1].date
    assert not any(t.has_answer for t in conversation.sessions[0].turns)  # has_answer absent: False
    assert question.id == question.conversation_id == "q_user_1"
    assert question.category == "single-session-user"
    assert question.answer == "a beagle"
    assert question.question_date == datetime(2023, 5, 30, 23, 40, tzinfo=UTC)
    assert question.evidence_keys == ("answer_a1:1",)
    assert question.evidence_session_ids == ("answer_a1",)
    assert question.is_scored and not question.is_abstention


def test_longmemeval_assistant_evidence_and_abstention() -> None:
    loaded = load_longmemeval(DATA / "longmemeval_tiny.json")
    assistant = loaded[1][1][0]
    assert assistant.evidence_keys == ("answer_b1:2",)  # an assistant turn counts as evidence
    assert assistant.answer == "9"
    abstention = loaded[2][1][0]
    assert abstention.is_abstention and abstention.has_evidence and not abstention.is_scored


def test_longmemeval_mismatched_haystack_lengths(tmp_path: Path) -> None:
    data = json.loads((DATA / "longmemeval_tiny.json").read_text())
    data[0]["haystack_dates"].pop()
    with pytest.raises(DatasetError, match=r"q_user_1.*differ in length"):
        load_longmemeval(_write(tmp_path / "bad.json", data))


def test_longmemeval_bad_date_names_the_session(tmp_path: Path) -> None:
    data = json.loads((DATA / "longmemeval_tiny.json").read_text())
    data[1]["haystack_dates"][1] = "yesterday"
    with pytest.raises(DatasetError, match=r"q_asst_2.*'sharegpt_noise_3'.*'yesterday'"):
        load_longmemeval(_write(tmp_path / "bad.json", data))


# -- chat JSONL ---------------------------------------------------------------------------------------


def test_chat_jsonl() -> None:
    conversation = load_chat_jsonl(DATA / "chat_tiny.jsonl")
    assert conversation.id == "chat_tiny"
    assert conversation.speakers == ("user", "assistant")
    mon, tue = conversation.sessions
    assert [t.key for t in mon.turns] == ["mon:1", "ack-1", "mon:3"]  # file order; an id replaces the key
    assert [t.position for t in mon.turns] == [1, 2, 3]
    assert [t.text for t in mon.turns][2] == "Also the cactus."
    assert mon.turns[1].speaker == "assistant"
    assert mon.turns[2].timestamp == datetime(2024, 5, 6, 9, 1, tzinfo=UTC)  # no offset: UTC
    assert tue.turns[0].key == "tue:1"
    assert tue.turns[0].timestamp == datetime(2024, 5, 7, 8, 30, tzinfo=UTC)  # +02:00 → UTC
    assert mon.date == datetime(2024, 5, 6, 9, 0, tzinfo=UTC)  # the session's earliest turn
    assert load_chat_jsonl(DATA / "chat_tiny.jsonl", conversation_id="c1").turns[0].conversation_id == "c1"


def test_chat_jsonl_bad_line_fixture() -> None:
    with pytest.raises(DatasetError, match=r"chat_bad_line.jsonl, line 3: missing field 'text'"):
        load_chat_jsonl(DATA / "chat_bad_line.jsonl")


GOOD = {"session": "s", "role": "user", "text": "hi", "created_at": "2024-05-06T09:00:00Z"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({**GOOD, "created_at": "yesterday"}), "created_at 'yesterday' is not an ISO-8601"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "role"}), "needs a non-empty 'role' or 'speaker'"),
        (json.dumps({**GOOD, "text": "  "}), "field 'text' is empty"),
        (json.dumps({**GOOD, "sesion": "s"}), "unknown field 'sesion'"),
        (json.dumps({**GOOD, "id": 7}), "field 'id' must be a non-empty string"),
        (json.dumps({**GOOD, "id": "s:1"}), "turn key 's:1' repeats"),  # clashes with line 1's key
    ],
)
def test_chat_jsonl_bad_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="line 3: " + message):
        load_chat_jsonl(path)


# -- the streaming reader --------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_json_list_is_read_one_item_at_a_time(chunk: int) -> None:
    import io

    from memsearch.ingest.readers import iter_json_list

    text = (DATA / "longmemeval_tiny.json").read_text(encoding="utf-8")
    assert list(iter_json_list(io.StringIO("\ufeff" + text), "s", "questions", chunk)) == json.loads(text)
    items = [{"n": n, "text": 'é"\\' * n} for n in range(50)] + [12345, "x", None, 1.5e3]
    assert list(iter_json_list(io.StringIO(json.dumps(items)), "s", "items", chunk)) == items


def test_the_stream_holds_one_item_not_the_file() -> None:
    import io

    from memsearch.ingest.readers import iter_json_list

    class Counting(io.StringIO):
        most = 0

        def read(self, size: int | None = -1) -> str:
            text = super().read(size)
            Counting.most = max(Counting.most, len(text))
            return text

    item = {"haystack": "x" * 10_000}
    stream = Counting(json.dumps([item] * 200))  # 2 MB
    assert sum(1 for _ in iter_json_list(stream, "s", "items", 1024)) == 200
    assert Counting.most < 50_000  # never the whole file at once


@pytest.mark.parametrize("bad", ["{}", "[1,", "[1 2]", "[1]x", '[{"a":}]', "", "[1,]"])
def test_the_stream_reports_malformed_json(bad: str) -> None:
    import io

    from memsearch.ingest.readers import iter_json_list

    with pytest.raises(DatasetError, match=r"^s: "):
        list(iter_json_list(io.StringIO(bad), "s", "items", 2))


def test_longmemeval_loader_streams() -> None:
    from memsearch.eval.datasets import iter_longmemeval_questions

    stream = iter_longmemeval_questions(DATA / "longmemeval_tiny.json")
    _, (question,) = next(stream)  # the first question before the rest is read
    assert question.id == "q_user_1"
    assert [c.id for c, _ in stream] == ["q_asst_2", "q_temp_3_abs"]
