"""Benchmark data as typed records: LoCoMo, LongMemEval and plain chat JSONL.

Every loader is strict: a malformed file raises `DatasetError` (a `ValueError`) that names the file
and the offending value or line, rather than yielding a silently different benchmark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsearch.errors import MemsearchError
from memsearch.timeutil import parse_time


class DatasetError(MemsearchError, ValueError):
    """A benchmark file is malformed; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Turn:
    conversation_id: str
    session_id: str
    key: str  # unique within the conversation: "D3:7" (LoCoMo), "<session id>:<n>" (LongMemEval), chat id
    speaker: str  # the speaker's name (LoCoMo) or the role ("user", "assistant")
    text: str  # the turn as spoken; `locomo_turn_text` builds LoCoMo's retrieval text
    position: int  # 1-based within the session (LoCoMo's "D3:7" is position 7 of session 3)
    timestamp: datetime  # aware UTC: the session's date (LoCoMo, LongMemEval) or the turn's own time (chat)
    image_caption: str | None = None  # LoCoMo's blip_caption of an image the speaker shared
    has_answer: bool = False  # LongMemEval: the turn holds evidence for the question


@dataclass(frozen=True)
class Session:
    id: str
    date: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    id: str
    sessions: tuple[Session, ...]
    speakers: tuple[str, ...]

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(turn for session in self.sessions for turn in session.turns)


@dataclass(frozen=True)
class Question:
    id: str
    conversation_id: str
    text: str
    answer: str
    category: str | int  # LoCoMo: 1 multi-hop … 5 adversarial; LongMemEval: question_type
    evidence_keys: tuple[str, ...]  # turn keys, only ones that name a turn of the conversation
    evidence_session_ids: tuple[str, ...]
    is_abstention: bool = False  # LongMemEval "_abs" questions: excluded from retrieval metrics
    question_date: datetime | None = None
    adversarial_answer: str | None = None  # LoCoMo category 5

    @property
    def has_evidence(self) -> bool:
        """False when no evidence id named a turn: recall is undefined, so the question is skipped."""
        return bool(self.evidence_keys)

    @property
    def is_scored(self) -> bool:
        """Counts in retrieval metrics (LoCoMo: has evidence; LongMemEval: also not an abstention)."""
        return self.has_evidence and not self.is_abstention


# -- shared helpers -------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: not valid JSON ({error})") from None


def _need(obj: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    """obj[name], which must exist and be of `kind`."""
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object, not {type(obj).__name__}")
    if name not in obj:
        raise DatasetError(f"{where}: missing field {name!r}")
    value = obj[name]
    # bool is an int in Python; no field here accepts a bool where it wants a number
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise DatasetError(f"{where}: field {name!r} has the wrong type ({value!r})")
    return value


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _answer_text(value: Any) -> str:
    # Some LoCoMo answers are JSON numbers (a year such as 2022); compare them as text.
    return value if isinstance(value, str) else json.dumps(value)


# -- LoCoMo ---------------------------------------------------------------------------------------

# English month names, matched without the locale (strptime's %B and %p follow it).
_MONTHS = {
    name: number
    for number, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
_LOCOMO_DATE = re.compile(r"(\d{1,2}):(\d{2}) ([ap]m) on (\d{1,2}) ([A-Za-z]+), (\d{4})")
_LOCOMO_SESSION = re.compile(r"session_(\d+)")
EVIDENCE_ID = re.compile(r"D\d+:\d+")


def parse_locomo_date(value: str) -> datetime:
    """Parse a LoCoMo date: "1:56 pm on 8 May, 2023" is 2023-05-08 13:56, taken as UTC (LoCoMo gives no zone)."""
    match = _LOCOMO_DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise DatasetError(f"cannot parse LoCoMo date {value!r} (expected e.g. '1:56 pm on 8 May, 2023')")
    hour, minute, half, day, year = int(match[1]), int(match[2]), match[3], int(match[4]), int(match[6])
    if not 1 <= hour <= 12:
        raise DatasetError(f"cannot parse LoCoMo date {value!r}: hour {hour} is not on a 12-hour clock")
    hour = hour % 12 + (12 if half == "pm" else 0)  # 12:06 am is 00:06, 12:30 pm is 12:30
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError as error:
        raise DatasetError(f"cannot parse LoCoMo date {value!r}: {error}") from None


def locomo_turn_text(turn: Turn) -> str:
    """The text a LoCoMo turn is retrieved by: "<speaker>: <text>" plus " [image: <caption>]"."""
    text = f"{turn.speaker}: {turn.text}"
    return f"{text} [image: {turn.image_caption}]" if turn.image_caption else text


def locomo_evidence_ids(evidence: Iterable[str]) -> list[str]:
    """Every `D<session>:<turn>` id in the evidence strings ("D8:6; D9:17" yields both), in order."""
    return [found for item in evidence for found in EVIDENCE_ID.findall(str(item))]


def _locomo_conversation(sample: Any, where: str) -> Conversation:
    conversation_id = _need(sample, "sample_id", str, where)
    where = f"{where} ({conversation_id})"
    data = _need(sample, "conversation", dict, where)
    speakers = tuple(data[name] for name in ("speaker_a", "speaker_b") if isinstance(data.get(name), str))
    # Sessions are the `session_N` lists; some conversations carry extra `session_N_date_time`
    # entries with no turns (conv-26 has 35 dates for 19 sessions), which are ignored.
    numbers = sorted(int(m[1]) for name in data if (m := _LOCOMO_SESSION.fullmatch(name)))
    sessions: list[Session] = []
    seen_keys: set[str] = set()
    for number in numbers:
        session_id = f"session_{number}"
        raw_turns = _need(data, session_id, list, where)
        date_value = _need(data, f"{session_id}_date_time", str, where)
        try:
            date = parse_locomo_date(date_value)
        except DatasetError as error:
            raise DatasetError(f"{where}, {session_id}_date_time: {error}") from None
        turns = []
        for position, raw in enumerate(raw_turns, start=1):
            turn_where = f"{where}, {session_id} turn {position}"
            key = _need(raw, "dia_id", str, turn_where)
            if key in seen_keys:
                raise DatasetError(f"{turn_where}: dia_id {key!r} repeats")
            seen_keys.add(key)
            caption = raw.get("blip_caption")
            turns.append(
                Turn(
                    conversation_id=conversation_id,
                    session_id=session_id,
                    key=key,
                    speaker=_need(raw, "speaker", str, turn_where),
                    text=_need(raw, "text", str, turn_where),
                    position=position,
                    timestamp=date,
                    image_caption=caption if isinstance(caption, str) and caption.strip() else None,
                )
            )
        sessions.append(Session(session_id, date, tuple(turns)))
    return Conversation(conversation_id, tuple(sessions), speakers)


def _locomo_question(
    raw: Any, index: int, conversation: Conversation, session_of: Mapping[str, str], where: str
) -> Question:
    evidence = _need(raw, "evidence", list, where)
    # Ids naming no turn (typos such as "D10:19" in conv-42) are dropped; see Question.has_evidence.
    keys = _unique(key for key in locomo_evidence_ids(evidence) if key in session_of)
    if "answer" in raw:
        answer = _answer_text(raw["answer"])
    elif "adversarial_answer" in raw:
        answer = _answer_text(raw["adversarial_answer"])
    else:
        raise DatasetError(f"{where}: missing field 'answer' (or 'adversarial_answer')")
    adversarial = raw.get("adversarial_answer")
    return Question(
        id=f"{conversation.id}:q{index}",
        conversation_id=conversation.id,
        text=_need(raw, "question", str, where),
        answer=answer,
        category=_need(raw, "category", (int, str), where),
        evidence_keys=keys,
        evidence_session_ids=_unique(session_of[key] for key in keys),
        adversarial_answer=None if adversarial is None else _answer_text(adversarial),
    )


def load_locomo(path: str | Path) -> list[tuple[Conversation, list[Question]]]:
    """LoCoMo (snap-research/LoCoMo data/locomo10.json layout): each conversation with its questions.

    Question ids are "<sample_id>:q<index into qa>". Category 5 (adversarial) questions have
    evidence and count in the retrieval protocol, so they are not abstentions here.
    """
    path = Path(path)
    samples = _read_json(path)
    if not isinstance(samples, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations")
    loaded = []
    for number, sample in enumerate(samples, start=1):
        where = f"{path}: conversation {number}"
        conversation = _locomo_conversation(sample, where)
        session_of = {turn.key: turn.session_id for turn in conversation.turns}
        questions = [
            _locomo_question(raw, index, conversation, session_of, f"{where}, question {index}")
            for index, raw in enumerate(_need(sample, "qa", list, where))
        ]
        loaded.append((conversation, questions))
    return loaded


# -- LongMemEval ----------------------------------------------------------------------------------

_LME_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2}) \((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) (\d{2}):(\d{2})")


def parse_longmemeval_date(value: str) -> datetime:
    """Parse a LongMemEval date: "2023/05/20 (Sat) 02:21" is 2023-05-20 02:21, taken as UTC.

    The weekday is not checked against the date: it is redundant, and one mislabelled weekday should
    not make a whole data file unreadable."""
    match = _LME_DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise DatasetError(f"cannot parse LongMemEval date {value!r} (expected e.g. '2023/05/20 (Sat) 02:21')")
    year, month, day, hour, minute = (int(part) for part in match.groups())
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError as error:
        raise DatasetError(f"cannot parse LongMemEval date {value!r}: {error}") from None


def _longmemeval_item(raw: Any, where: str) -> tuple[Conversation, list[Question]]:
    question_id = _need(raw, "question_id", str, where)
    where = f"{where} ({question_id})"
    session_ids = _need(raw, "haystack_session_ids", list, where)
    dates = _need(raw, "haystack_dates", list, where)
    raw_sessions = _need(raw, "haystack_sessions", list, where)
    if not len(session_ids) == len(dates) == len(raw_sessions):
        raise DatasetError(f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length")
    if len(set(session_ids)) != len(session_ids):
        raise DatasetError(f"{where}: haystack_session_ids repeat")
    sessions: list[Session] = []
    for session_id, date_value, raw_turns in zip(session_ids, dates, raw_sessions, strict=True):
        session_where = f"{where}, session {session_id!r}"
        if not isinstance(session_id, str) or not isinstance(raw_turns, list):
            raise DatasetError(f"{session_where}: expected a string id and a list of turns")
        try:
            date = parse_longmemeval_date(date_value)
        except DatasetError as error:
            raise DatasetError(f"{session_where}: {error}") from None
        turns = []
        for position, turn in enumerate(raw_turns, start=1):
            turn_where = f"{session_where} turn {position}"
            turns.append(
                Turn(
                    conversation_id=question_id,
                    session_id=session_id,
                    # LongMemEval's own corpus id is f"{session_id}_{position}" (1-based, counting
                    # assistant turns too); ":" keeps the session id recoverable when it holds "_".
                    key=f"{session_id}:{position}",
                    speaker=_need(turn, "role", str, turn_where),
                    text=_need(turn, "content", str, turn_where),
                    position=position,
                    timestamp=date,
                    has_answer=turn.get("has_answer") is True,  # absent outside answer sessions
                )
            )
        sessions.append(Session(session_id, date, tuple(turns)))
    conversation = Conversation(
        question_id, tuple(sessions), _unique(turn.speaker for session in sessions for turn in session.turns)
    )
    question_date = raw.get("question_date")
    try:
        parsed_question_date = None if question_date is None else parse_longmemeval_date(question_date)
    except DatasetError as error:
        raise DatasetError(f"{where}, question_date: {error}") from None
    answer_sessions = _need(raw, "answer_session_ids", list, where)
    question = Question(
        id=question_id,
        conversation_id=question_id,
        text=_need(raw, "question", str, where),
        answer=_answer_text(_need(raw, "answer", (str, int, float), where)),
        category=_need(raw, "question_type", str, where),
        # Every has_answer turn, of either role. LongMemEval's turn-level run indexes user turns
        # only, so its gold set is the user ones; filter by speaker to reproduce that exactly.
        evidence_keys=tuple(turn.key for turn in conversation.turns if turn.has_answer),
        evidence_session_ids=_unique(str(session_id) for session_id in answer_sessions),
        # LongMemEval's run_retrieval.py tests `'_abs' in question_id`; real ids end with it.
        is_abstention=question_id.endswith("_abs"),
        question_date=parsed_question_date,
    )
    return conversation, [question]


def load_longmemeval(path: str | Path) -> list[tuple[Conversation, list[Question]]]:
    """LongMemEval (xiaowu0162/LongMemEval, e.g. longmemeval_s.json): a list of questions, each
    searched within its own haystack, which becomes a conversation whose id is the question id."""
    path = Path(path)
    items = _read_json(path)
    if not isinstance(items, list):
        raise DatasetError(f"{path}: expected a JSON list of questions")
    return [_longmemeval_item(raw, f"{path}: item {number}") for number, raw in enumerate(items, start=1)]


# -- plain chat JSONL -----------------------------------------------------------------------------

CHAT_FIELDS = frozenset({"session", "role", "speaker", "text", "created_at", "id"})


def _chat_line(obj: Any, where: str) -> tuple[str, str, str, datetime, str | None]:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    unknown = sorted(set(obj) - CHAT_FIELDS)
    if unknown:
        raise DatasetError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(CHAT_FIELDS))})")
    values = {}
    for name in ("session", "text", "created_at"):
        value = _need(obj, name, str, where)
        if not value.strip():
            raise DatasetError(f"{where}: field {name!r} is empty")
        values[name] = value
    speaker = obj.get("speaker", obj.get("role"))  # `speaker` wins when a line has both
    if not isinstance(speaker, str) or not speaker.strip():
        raise DatasetError(f"{where}: needs a non-empty 'role' or 'speaker'")
    turn_id = obj.get("id")
    if turn_id is not None and (not isinstance(turn_id, str) or not turn_id.strip()):
        raise DatasetError(f"{where}: field 'id' must be a non-empty string, not {turn_id!r}")
    try:
        created = parse_time(values["created_at"], what="created_at")
    except MemsearchError as error:
        raise DatasetError(f"{where}: {error}") from None
    return values["session"], speaker, values["text"], created, turn_id


def load_chat_jsonl(path: str | Path, conversation_id: str | None = None) -> Conversation:
    """Plain chat JSONL, one turn a line: `session`, `role` or `speaker`, `text`, `created_at`
    (ISO-8601, UTC when it has no offset), optional `id`. Turns keep file order within their
    session; sessions are in order of first appearance; blank lines are skipped. A turn's key is
    its `id`, else "<session>:<position>". The conversation id defaults to the file's stem."""
    path = Path(path)
    conversation_id = conversation_id or path.stem
    by_session: dict[str, list[Turn]] = {}
    seen_keys: set[str] = set()
    with path.open(encoding="utf-8") as lines:
        for line_number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {line_number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{where}: not valid JSON ({error.msg})") from None
            session_id, speaker, text, created, turn_id = _chat_line(obj, where)
            turns = by_session.setdefault(session_id, [])
            position = len(turns) + 1
            key = turn_id if turn_id is not None else f"{session_id}:{position}"
            if key in seen_keys:
                raise DatasetError(f"{where}: turn key {key!r} repeats an earlier line")
            seen_keys.add(key)
            turns.append(Turn(conversation_id, session_id, key, speaker, text, position, created))
    sessions = tuple(
        Session(session_id, min(turn.timestamp for turn in turns), tuple(turns))
        for session_id, turns in by_session.items()
    )
    speakers = _unique(turn.speaker for session in sessions for turn in session.turns)
    return Conversation(conversation_id, sessions, speakers)
