"""Conversations as typed records, read from plain chat JSONL, LoCoMo and LongMemEval text.

Readers take the text (or, for chat JSONL, an open text file) and a display name for messages, so
a stream such as stdin is read as it is. Every reader is strict: a malformed input raises
`DatasetError` naming the source and the offending value or line, rather than yielding a silently
different conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from memsearch.errors import MemsearchError, NumberTooLongError
from memsearch.jsonl import BOM, decode_json, split_lines
from memsearch.timeutil import MONTHS, parse_time


class DatasetError(MemsearchError, ValueError):
    """A conversation or benchmark file is malformed; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Turn:
    conversation_id: str
    session_id: str
    key: str  # unique within the conversation: "D3:7" (LoCoMo), "<session id>:<n>" (LongMemEval), chat id
    speaker: str  # the speaker's name (LoCoMo) or the role ("user", "assistant")
    text: str  # the turn as spoken; `turn_text` builds the text it is retrieved by
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


def turn_text(turn: Turn) -> str:
    """`<speaker>: <text>`, plus ` [image: <caption>]` for a shared image (the LoCoMo protocol's text)."""
    text = f"{turn.speaker}: {turn.text}"
    return f"{text} [image: {turn.image_caption}]" if turn.image_caption else text


# -- shared helpers -------------------------------------------------------------------------------


def read_json(content: str, source: str) -> Any:
    try:
        return decode_json(content.removeprefix(BOM))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{source}: not valid JSON ({error})") from None
    except NumberTooLongError as error:
        raise DatasetError(f"{source}: {error}") from None


def need(obj: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
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


def unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


STREAM_CHUNK_CHARS = 1 << 20


def iter_json_list(stream: TextIO, source: str, what: str, chunk_chars: int = STREAM_CHUNK_CHARS) -> Iterator[Any]:
    """The items of a JSON list read from `stream` one at a time, so a file far larger than memory
    (LongMemEval's 2.7 GB `_m`) never has to fit: only the item being decoded is held. Each item is
    decoded by `json.JSONDecoder.raw_decode`; when the text read so far ends inside it, as much
    again is read and the item decoded anew (so an item costs at most a few times its length)."""
    decoder = json.JSONDecoder()
    buffer, position, at_end = "", 0, False

    def fill() -> bool:
        nonlocal buffer, position, at_end
        if at_end:
            return False
        more = stream.read(max(chunk_chars, len(buffer) - position))
        at_end = not more
        buffer = buffer[position:] + more
        position = 0
        return bool(more)

    def next_char() -> str:
        nonlocal position
        while True:
            while position < len(buffer) and buffer[position] in " \t\r\n":
                position += 1
            if position < len(buffer) or not fill():
                return buffer[position] if position < len(buffer) else ""

    fill()
    buffer = buffer.removeprefix(BOM)
    if next_char() != "[":
        raise DatasetError(f"{source}: expected a JSON list of {what}")
    position += 1
    first = True
    while True:
        char = next_char()
        if char == "]":
            position += 1
            if next_char() != "":
                raise DatasetError(f"{source}: not valid JSON (text after the list)")
            return
        if not first:
            if char != ",":
                raise DatasetError(f"{source}: not valid JSON (expected ',' or ']' between {what})")
            position += 1
            next_char()
        while True:
            try:
                item, end = decoder.raw_decode(buffer, position)
            except RecursionError:
                raise DatasetError(f"{source}: not valid JSON (nested too deeply)") from None
            except json.JSONDecodeError as error:
                if fill():
                    continue
                raise DatasetError(f"{source}: not valid JSON ({error.msg})") from None
            if end == len(buffer) and fill():  # a number may go on in the next chunk
                continue
            break
        position = end
        first = False
        yield item


def json_list(content: str, source: str, what: str) -> list[Any]:
    items = read_json(content, source)
    if not isinstance(items, list):
        raise DatasetError(f"{source}: expected a JSON list of {what}")
    return items


# -- LoCoMo ---------------------------------------------------------------------------------------

_LOCOMO_DATE = re.compile(r"(\d{1,2}):(\d{2}) ([ap]m) on (\d{1,2}) ([A-Za-z]+), (\d{4})")
_LOCOMO_SESSION = re.compile(r"session_(\d+)")


def parse_locomo_date(value: str) -> datetime:
    """Parse a LoCoMo date: "1:56 pm on 8 May, 2023" is 2023-05-08 13:56, taken as UTC (LoCoMo gives no zone)."""
    match = _LOCOMO_DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    month = MONTHS.get(match.group(5).lower()) if match else None
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


def locomo_conversation(sample: Any, where: str) -> Conversation:
    """One LoCoMo sample's conversation (its `qa` list is the benchmark's business, not read here)."""
    conversation_id = need(sample, "sample_id", str, where)
    where = f"{where} ({conversation_id})"
    data = need(sample, "conversation", dict, where)
    speakers = tuple(data[name] for name in ("speaker_a", "speaker_b") if isinstance(data.get(name), str))
    # Sessions are the `session_N` lists; some conversations carry extra `session_N_date_time`
    # entries with no turns (conv-26 has 35 dates for 19 sessions), which are ignored.
    numbers = sorted(int(m[1]) for name in data if (m := _LOCOMO_SESSION.fullmatch(name)))
    sessions: list[Session] = []
    seen_keys: set[str] = set()
    for number in numbers:
        session_id = f"session_{number}"
        raw_turns = need(data, session_id, list, where)
        date_value = need(data, f"{session_id}_date_time", str, where)
        try:
            date = parse_locomo_date(date_value)
        except DatasetError as error:
            raise DatasetError(f"{where}, {session_id}_date_time: {error}") from None
        turns = []
        for position, raw in enumerate(raw_turns, start=1):
            turn_where = f"{where}, {session_id} turn {position}"
            key = need(raw, "dia_id", str, turn_where)
            if key in seen_keys:
                raise DatasetError(f"{turn_where}: dia_id {key!r} repeats")
            seen_keys.add(key)
            caption = raw.get("blip_caption")
            turns.append(
                Turn(
                    conversation_id=conversation_id,
                    session_id=session_id,
                    key=key,
                    speaker=need(raw, "speaker", str, turn_where),
                    text=need(raw, "text", str, turn_where),
                    position=position,
                    timestamp=date,
                    image_caption=caption if isinstance(caption, str) and caption.strip() else None,
                )
            )
        sessions.append(Session(session_id, date, tuple(turns)))
    return Conversation(conversation_id, tuple(sessions), speakers)


def read_locomo(content: str, source: str) -> list[Conversation]:
    """The conversations of a LoCoMo file (snap-research/LoCoMo data/locomo10.json layout)."""
    samples = json_list(content, source, "conversations")
    return [locomo_conversation(sample, f"{source}: conversation {n}") for n, sample in enumerate(samples, start=1)]


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


def longmemeval_conversation(raw: Any, where: str) -> Conversation:
    """One LongMemEval item's haystack as a conversation whose id is the question id."""
    question_id = need(raw, "question_id", str, where)
    where = f"{where} ({question_id})"
    session_ids = need(raw, "haystack_session_ids", list, where)
    dates = need(raw, "haystack_dates", list, where)
    raw_sessions = need(raw, "haystack_sessions", list, where)
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
                    speaker=need(turn, "role", str, turn_where),
                    text=need(turn, "content", str, turn_where),
                    position=position,
                    timestamp=date,
                    has_answer=turn.get("has_answer") is True,  # absent outside answer sessions
                )
            )
        sessions.append(Session(session_id, date, tuple(turns)))
    return Conversation(
        question_id, tuple(sessions), unique(turn.speaker for session in sessions for turn in session.turns)
    )


def iter_longmemeval(stream: TextIO, source: str) -> Iterator[tuple[Any, Conversation]]:
    """Each item of a LongMemEval file as it is read, with its haystack as a conversation."""
    for n, raw in enumerate(iter_json_list(stream, source, "questions"), start=1):
        yield raw, longmemeval_conversation(raw, f"{source}: item {n}")


def read_longmemeval(content: str, source: str) -> list[Conversation]:
    """The haystacks of a LongMemEval file (xiaowu0162/LongMemEval, e.g. longmemeval_s.json)."""
    items = json_list(content, source, "questions")
    return [longmemeval_conversation(raw, f"{source}: item {n}") for n, raw in enumerate(items, start=1)]


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
        value = need(obj, name, str, where)
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


def read_chat(content: str | Iterable[str], source: str, conversation_id: str) -> Conversation:
    """Plain chat JSONL, one turn a line: `session`, `role` or `speaker`, `text`, `created_at`
    (ISO-8601, UTC when it has no offset), optional `id`. Turns keep their order within their
    session; sessions are in order of first appearance; blank lines are skipped. A turn's key is
    its `id`, else "<session>:<position>"."""
    by_session: dict[str, list[Turn]] = {}
    seen_keys: set[str] = set()
    for line_number, line in enumerate(split_lines(content), start=1):
        if not line.strip():
            continue
        where = f"{source}, line {line_number}"
        try:
            obj = decode_json(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{where}: not valid JSON ({error.msg})") from None
        except NumberTooLongError as error:
            raise DatasetError(f"{where}: {error}") from None
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
    speakers = unique(turn.speaker for session in sessions for turn in session.turns)
    return Conversation(conversation_id, sessions, speakers)


def load_chat_jsonl(path: str | Path, conversation_id: str | None = None) -> Conversation:
    """`read_chat` of a file; the conversation id defaults to the file's stem."""
    path = Path(path)
    with path.open(encoding="utf-8") as lines:
        return read_chat(lines, str(path), conversation_id or path.stem)
