"""Benchmarks as typed records: LoCoMo and LongMemEval conversations with their questions.

The conversations are read by `memsearch.ingest.readers` (the product imports them too); what is
only the benchmark's (questions, evidence, gold keys) lives here. Every loader is strict: a
malformed file raises `DatasetError` (a `ValueError`) that names the file and the offending value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memsearch.ingest.readers import (
    Conversation,
    DatasetError,
    iter_longmemeval,
    json_list,
    locomo_conversation,
    need,
    parse_longmemeval_date,
    unique,
)

EVIDENCE_ID = re.compile(r"D\d+:\d+")


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
        """Has evidence and is no abstention. LoCoMo scores exactly these; LongMemEval's protocol
        scores every question but the abstentions (see `memsearch.eval.scoring.gold_keys`)."""
        return self.has_evidence and not self.is_abstention


# Conversations and their parts are read by memsearch.ingest; these names stay importable from here.
__all__ = [
    "EVIDENCE_ID", "Conversation", "DatasetError", "Question", "iter_longmemeval_questions", "load_locomo",
    "load_longmemeval", "locomo_evidence_ids", "parse_longmemeval_date",
]  # fmt: skip


def _answer_text(value: Any) -> str:
    # Some LoCoMo answers are JSON numbers (a year such as 2022); compare them as text.
    return value if isinstance(value, str) else json.dumps(value)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# -- LoCoMo ---------------------------------------------------------------------------------------


def locomo_evidence_ids(evidence: Iterable[str]) -> list[str]:
    """Every `D<session>:<turn>` id in the evidence strings ("D8:6; D9:17" yields both), in order."""
    return [found for item in evidence for found in EVIDENCE_ID.findall(str(item))]


def _locomo_question(
    raw: Any, index: int, conversation: Conversation, session_of: Mapping[str, str], where: str
) -> Question:
    evidence = need(raw, "evidence", list, where)
    # Ids naming no turn (typos such as "D10:19" in conv-42) are dropped; see Question.has_evidence.
    keys = unique(key for key in locomo_evidence_ids(evidence) if key in session_of)
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
        text=need(raw, "question", str, where),
        answer=answer,
        category=need(raw, "category", (int, str), where),
        evidence_keys=keys,
        evidence_session_ids=unique(session_of[key] for key in keys),
        adversarial_answer=None if adversarial is None else _answer_text(adversarial),
    )


def load_locomo(path: str | Path) -> list[tuple[Conversation, list[Question]]]:
    """LoCoMo (snap-research/LoCoMo data/locomo10.json layout): each conversation with its questions.

    Question ids are "<sample_id>:q<index into qa>". Category 5 (adversarial) questions have
    evidence and count in the retrieval protocol, so they are not abstentions here.
    """
    path = Path(path)
    loaded = []
    for number, sample in enumerate(json_list(_read(path), str(path), "conversations"), start=1):
        where = f"{path}: conversation {number}"
        conversation = locomo_conversation(sample, where)
        session_of = {turn.key: turn.session_id for turn in conversation.turns}
        questions = [
            _locomo_question(raw, index, conversation, session_of, f"{where}, question {index}")
            for index, raw in enumerate(need(sample, "qa", list, where))
        ]
        loaded.append((conversation, questions))
    return loaded


# -- LongMemEval ----------------------------------------------------------------------------------


def _longmemeval_item(raw: Any, conversation: Conversation, where: str) -> tuple[Conversation, list[Question]]:
    question_id = conversation.id
    where = f"{where} ({question_id})"
    question_date = raw.get("question_date")
    try:
        parsed_question_date = None if question_date is None else parse_longmemeval_date(question_date)
    except DatasetError as error:
        raise DatasetError(f"{where}, question_date: {error}") from None
    answer_sessions = need(raw, "answer_session_ids", list, where)
    question = Question(
        id=question_id,
        conversation_id=question_id,
        text=need(raw, "question", str, where),
        answer=_answer_text(need(raw, "answer", (str, int, float), where)),
        category=need(raw, "question_type", str, where),
        # Every has_answer turn, of either role. LongMemEval's turn-level run indexes user turns
        # only, so its gold set is the user ones; filter by speaker to reproduce that exactly.
        evidence_keys=tuple(turn.key for turn in conversation.turns if turn.has_answer),
        evidence_session_ids=unique(str(session_id) for session_id in answer_sessions),
        # LongMemEval's run_retrieval.py leaves out every question with `'_abs' in question_id`.
        is_abstention="_abs" in question_id,
        question_date=parsed_question_date,
    )
    return conversation, [question]


def iter_longmemeval_questions(path: str | Path) -> Iterator[tuple[Conversation, list[Question]]]:
    """LongMemEval (xiaowu0162/LongMemEval, e.g. longmemeval_s.json): its questions, each searched
    within its own haystack, which becomes a conversation whose id is the question id. The file is
    read as a stream, one question at a time (the `_m` file is 2.7 GB)."""
    path = Path(path)
    with path.open(encoding="utf-8") as stream:
        for number, (raw, conversation) in enumerate(iter_longmemeval(stream, str(path)), start=1):
            yield _longmemeval_item(raw, conversation, f"{path}: item {number}")


def load_longmemeval(path: str | Path) -> list[tuple[Conversation, list[Question]]]:
    """Every question of a LongMemEval file at once (see `iter_longmemeval_questions`)."""
    return list(iter_longmemeval_questions(path))
