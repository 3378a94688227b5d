"""Conversations as memories: one session chunk per session and one turn memory per turn.

A turn is searchable through its own text and through views built from its session: `context`
(the turn with up to two turns either side), `prev` (the previous turn and it), `next` (the
following turn, Memsense's next-turn route) and, optionally, facets. Keys are
`<conversation>/<source id>` so several conversations share one store.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from memsearch.embedding.base import Encoder
from memsearch.ingest.readers import Conversation, Turn, turn_text
from memsearch.models import FACETS, NewMemory

CONTEXT_TURNS = 2  # turns either side in the `context` view

# What each facet route looks for, as short example sentences: a sentence joins a facet when its
# cosine with one of the facet's examples reaches FACET_THRESHOLD. (MiniLM's similarity to one
# long description separates the facets poorly; the nearest example separates them well.)
FACET_EXAMPLES = {
    "personal_info": (
        "My name is Sam.", "I am 34 years old.", "I work as a nurse.", "I live in Boston.",
        "I grew up in a small town.", "My sister and my parents are my family.",
        "My husband and I have two kids.", "I studied psychology at university.",
    ),
    "preferences": (
        "I love hiking.", "My favourite food is sushi.", "I really enjoy painting.", "I prefer tea to coffee.",
        "I hate crowded places.", "I'm a big fan of jazz.", "I don't like horror movies.",
    ),
    "events": (
        "We went to a concert last Friday.", "I visited my grandmother last week.", "We had a party for my birthday.",
        "I got a new job in May.", "We took a trip to Paris.", "I ran a marathon yesterday.",
        "Last weekend we went camping.",
    ),
}  # fmt: skip
FACET_THRESHOLD = 0.4
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def session_text(texts: Sequence[str]) -> str:
    """A session chunk's text: its turns' texts, one a line."""
    return "\n".join(texts)


def turn_views(texts: Sequence[str], i: int) -> dict[str, str]:
    """The views of turn `i` of a session whose turns' texts are `texts`."""
    views = {
        "context": "\n".join(texts[max(0, i - CONTEXT_TURNS) : i + CONTEXT_TURNS + 1]),
        "prev": "\n".join(texts[max(0, i - 1) : i + 1]),
    }
    if i + 1 < len(texts):
        views["next"] = texts[i + 1]
    return views


SESSION_VIEWS = ("context", "prev", "next")  # the views turn_views builds (facets are the turn's own)


def conversation_memories(
    conversation: Conversation,
    *,
    text_of: Callable[[Turn], str] = turn_text,
    sessions: bool = True,
    keep: Callable[[Turn], bool] | None = None,
    namespace: str | None = None,
) -> list[NewMemory]:
    """The session chunks (if `sessions`) and turns of a conversation, with their views.

    `keep` selects the turns that become memories (LongMemEval's protocol indexes user turns only);
    views are built from the kept turns of each session.
    """
    memories: list[NewMemory] = []
    for session in conversation.sessions:
        turns = [t for t in session.turns if keep is None or keep(t)]
        texts = [text_of(t) for t in turns]
        if not turns:
            continue
        session_key = f"{conversation.id}/{session.id}"
        if sessions:
            memories.append(
                NewMemory(
                    text=session_text(texts),
                    key=session_key,
                    kind="session",
                    conversation=conversation.id,
                    session=session.id,
                    namespace=namespace,
                    created_at=session.date,
                    metadata={"source_id": session.id, "turns": len(turns)},
                )
            )
        for i, turn in enumerate(turns):
            views = turn_views(texts, i)
            metadata: dict[str, object] = {"source_id": turn.key}
            if turn.has_answer:
                metadata["has_answer"] = True
            memories.append(
                NewMemory(
                    text=texts[i],
                    key=f"{conversation.id}/{turn.key}",
                    kind="turn",
                    conversation=conversation.id,
                    session=session.id,
                    role=turn.speaker,
                    position=turn.position,
                    namespace=namespace,
                    created_at=turn.timestamp,
                    parent_key=session_key if sessions else None,
                    views=views,
                    metadata=metadata,
                )
            )
    return memories


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(text) if part.strip()]


def with_facets(memories: Sequence[NewMemory], encoder: Encoder, threshold: float = FACET_THRESHOLD) -> list[NewMemory]:
    """Add facet views to turns, offline with the bundled model: each sentence of a turn joins
    the facets it is similar to (see FACET_EXAMPLES); a facet view is the turn's sentences of
    that facet. Facets already supplied are kept."""
    turn_sentences = [sentences(m.text) if m.kind == "turn" else [] for m in memories]
    flat = list(dict.fromkeys(s for group in turn_sentences for s in group))
    if not flat:
        return list(memories)
    vectors = encoder.encode(flat)
    best = {name: (vectors @ encoder.encode(list(FACET_EXAMPLES[name])).T).max(axis=1) for name in FACETS}
    row = {sentence: n for n, sentence in enumerate(flat)}
    out = []
    for memory, group in zip(memories, turn_sentences, strict=True):
        views = dict(memory.views)
        for name in FACETS:
            chosen = [s for s in group if float(best[name][row[s]]) >= threshold]
            if chosen and f"facet_{name}" not in views:
                views[f"facet_{name}"] = " ".join(chosen)
        out.append(replace(memory, views=views) if views != memory.views else memory)
    return out
