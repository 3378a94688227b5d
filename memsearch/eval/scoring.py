"""The pure part of a run, per question: a search's results as a ranking of turn keys or session
ids, the metrics of a ranking against its gold, what counts as gold at each granularity, the
question's strata and a conversation's "now" (see memsearch.eval.runner for the protocol)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from memsearch.eval.datasets import Question
from memsearch.eval.metrics import (
    KS_OF_FORMAT,
    METRICS,
    METRICS_OF_FORMAT,
    first_occurrences,
    longmemeval_scores,
    turn_to_session_scores,
)
from memsearch.eval.strata import question_strata
from memsearch.ingest.readers import Conversation
from memsearch.retrieval.candidates import Candidate


def turn_ranking(results: Iterable[Candidate], conversation_id: str) -> list[str]:
    """The turn keys of the results, `<conversation>/` stripped, best first; other kinds skipped."""
    prefix = f"{conversation_id}/"
    return first_occurrences(
        c.memory.key.removeprefix(prefix) for c in results if c.memory.kind == "turn" and c.memory.key is not None
    )


def session_ranking(results: Iterable[Candidate]) -> list[str]:
    """The session ids of the results (session chunks, or the sessions of turns), first occurrences."""
    return first_occurrences(
        c.memory.session for c in results if c.memory.kind in ("session", "turn") and c.memory.session is not None
    )


def score(
    ranked: Sequence[str], gold: Iterable[str], fmt: str, ks: Sequence[int] | None = None, *, turns: bool = False
) -> dict[str, float]:
    """The format's metrics at every k (its protocol's ks unless given), named like "recall@10";
    for LongMemEval turn rankings (`turns`) also the official turn→session ones."""
    gold_set = set(gold)
    cutoffs = KS_OF_FORMAT[fmt] if ks is None else ks
    if fmt == "longmemeval":
        scores: dict[str, float] = {}
        for k in cutoffs:
            scores |= longmemeval_scores(ranked, gold_set, k)
        if turns:
            for k in cutoffs:
                scores |= turn_to_session_scores(ranked, gold_set, k)
        return scores
    return {f"{name}@{k}": METRICS[name](ranked, gold_set, k) for k in cutoffs for name in METRICS_OF_FORMAT[fmt]}


def gold_keys(question: Question, conversation: Conversation, fmt: str, granularity: str) -> tuple[str, ...] | None:
    """What counts as found at this granularity; None when the question is not scored there.

    LongMemEval (run_retrieval.py): gold turns are the user turns with has_answer in the answer
    sessions (its corpus is the user turns); gold sessions are the answer sessions with at least one
    such turn. Either may be empty, and the question is still scored (see `score`)."""
    if fmt != "longmemeval":
        if not question.is_scored:
            return None
        return question.evidence_session_ids if granularity == "session" else question.evidence_keys
    if question.is_abstention:
        return None
    answer_sessions = set(question.evidence_session_ids)
    gold_turns = tuple(
        turn.key
        for turn in conversation.turns
        if turn.has_answer and turn.speaker == "user" and turn.session_id in answer_sessions
    )
    if granularity == "turn":
        return gold_turns
    with_user_evidence = {
        conversation_turn.session_id for conversation_turn in conversation.turns if conversation_turn.key in gold_turns
    }
    return tuple(session for session in question.evidence_session_ids if session in with_user_evidence)


def strata_of(question: Question, conversation: Conversation) -> dict[str, str]:
    """The question's strata (memsearch.eval.strata), read from its text and its evidence turns' as
    the dataset annotates them (LoCoMo: the evidence ids; LongMemEval: the has_answer turns)."""
    evidence = set(question.evidence_keys)
    return question_strata(question.text, [turn.text for turn in conversation.turns if turn.key in evidence])


def last_date(conversation: Conversation) -> datetime:
    """The conversation's "now": its latest session date."""
    return max(session.date for session in conversation.sessions)
