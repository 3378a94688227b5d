"""Changing what is stored: deletes that leave no trace of a turn in its session, edits of a
memory's text that leave none of the old text, consolidation marks and re-embedding with the
current model (see `memsearch.api`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memsearch.embedding.registry import held_model, model_key
from memsearch.errors import InvalidInputError
from memsearch.ingest.embed import embed_memories, other_model_vectors, with_chunks
from memsearch.models import FACETS, LEXICAL_VIEWS, EmbeddingModelInfo, Memory, NewMemory
from memsearch.outcomes import Consolidation
from memsearch.store.base import Rewrite

if TYPE_CHECKING:
    from memsearch.embedding.base import Encoder, ModelSpec, Progress
    from memsearch.ingest import Library
    from memsearch.store.base import Store


def delete_memories(target: Library, memories: Sequence[Memory]) -> None:
    """Delete the memories, with their sessions rebuilt without the deleted turns (`rebuilt_sessions`),
    in one transaction."""
    store = target.store()
    rewrites, emptied = rebuilt_sessions(target, store, memories)
    store.delete([*(memory.id for memory in memories), *emptied], rewrites)


def edit_text(target: Library, memory: Memory, text: str) -> None:
    """Give a note or a turn a new text, in one transaction: its vector, full-text row and the
    views made from its text (a long note's chunks; a turn's session views and facets) are
    made anew, and for a turn so are what its session derives from it (its neighbours' views, the
    session chunk's text), as a delete rebuilds them. Nothing is written if the memory's text is
    no longer `memory.text` by then (EditConflictError)."""
    if memory.kind == "session":
        raise InvalidInputError("a session chunk's text is made from its turns: edit a turn instead")
    NewMemory(text, kind=memory.kind)  # the text's checks: not empty, valid Unicode, within MAX_TEXT_CHARS
    store = target.store()
    if memory.kind == "turn" and memory.session is not None:
        rewrites, _ = rebuilt_sessions(target, store, (), {memory.id: text})
    else:
        old, new = (with_chunks(NewMemory(each, kind=memory.kind)) for each in (memory.text, text))
        # the old chunks go, and the full-text views go back to their default: the text itself
        named: dict[str, str | None] = {view: None for view in (*old.views, *LEXICAL_VIEWS)} | dict(new.views)
        rewrites = _rewrites(target, store, [(replace(memory, text=text), new, named)])
    # Written only if the memory still has the text the edit was made from (EditConflictError).
    store.rewrite([replace(r, expected_text=memory.text) if r.id == memory.id else r for r in rewrites])


def rebuilt_sessions(
    target: Library, store: Store, deleted: Sequence[Memory], edited: Mapping[int, str] | None = None
) -> tuple[list[Rewrite], set[int]]:
    """The rewrites of what the sessions of deleted turns, or of turns given a new text (`edited`:
    id → text), derive from them (with the one builder an import uses, ingest.conversations), and
    the session chunks left with no turn."""
    from memsearch.ingest.conversations import SESSION_VIEWS, session_text, turn_views

    edited = edited or {}
    gone = {memory.id for memory in deleted}
    changed = [*deleted, *store.get_many(list(edited)).values()]
    sessions = {(m.conversation, m.session) for m in changed if m.kind == "turn" and m.session is not None}
    rebuilt: list[tuple[Memory, NewMemory, dict[str, str | None]]] = []
    emptied: set[int] = set()
    for conversation, session in sorted(sessions, key=str):
        assert session is not None
        turns = store.session_turns(conversation, session)
        kept = [turn for turn in turns if turn.id not in gone]
        before = [turn.text for turn in turns]
        after = [edited.get(turn.id, turn.text) for turn in kept]
        for i, turn in enumerate(kept):
            old, new = turn_views(before, turns.index(turn)), turn_views(after, i)
            if old != new or turn.id in edited:
                named: dict[str, str | None] = {view: new.get(view) for view in SESSION_VIEWS}
                rebuilt_turn = NewMemory(after[i], kind="turn", views=new)
                if turn.id in edited:  # its facets, if it has them, are found in its new text
                    rebuilt_turn = _with_new_facets(target, store, turn.id, rebuilt_turn, named)
                rebuilt.append((replace(turn, text=after[i]), rebuilt_turn, named))
        for parent in sorted({turn.parent_id for turn in turns if turn.parent_id is not None} - gone):
            chunk = store.get(parent)
            if not after:
                emptied.add(chunk.id)
                continue
            metadata = {**chunk.metadata, "turns": len(after)} if "turns" in chunk.metadata else chunk.metadata
            text = session_text(after)
            rebuilt.append(
                (replace(chunk, text=text, metadata=metadata), NewMemory(text, kind="session"),
                 {view: None for view in SESSION_VIEWS})
            )  # fmt: skip
    return _rewrites(target, store, rebuilt), emptied


def _with_new_facets(
    target: Library, store: Store, memory_id: int, turn: NewMemory, named: dict[str, str | None]
) -> NewMemory:
    """`turn` with the facet views of its new text when the stored turn had facets (`import
    --facets`); every facet is named in `named`, so the old ones go."""
    facets = [f"facet_{facet}" for facet in FACETS]
    if not set(facets) & set(store.view_names(memory_id)):
        return turn
    from memsearch.ingest.conversations import with_facets

    (turn,) = with_facets([turn], target.encoder())
    named |= {view: turn.views.get(view) for view in facets}
    return turn


def _rewrites(
    target: Library, store: Store, rebuilt: Sequence[tuple[Memory, NewMemory, dict[str, str | None]]]
) -> list[Rewrite]:
    """Each memory as rebuilt (its new text and metadata, and the views named: text, or None to
    remove), with the vectors of its text and views embedded by the store's model."""
    if not rebuilt:
        return []
    encoder = target.encoder()
    store.check_model(encoder.info)
    vectors, view_vectors = embed_memories(encoder, [new for _, new, _ in rebuilt])
    others = other_model_vectors(target, store, [memory.text for memory, _, _ in rebuilt])
    return [
        Rewrite(
            memory.id,
            memory.text,
            memory.metadata,
            vectors[i],
            {view: None if text is None else (text, view_vectors.get(i, {}).get(view)) for view, text in named.items()},
            {name: model_vectors[i] for name, model_vectors in others.items()},
        )
        for i, (memory, _, named) in enumerate(rebuilt)
    ]


def add_model(
    target: Library, spec: ModelSpec, own: EmbeddingModelInfo | None, progress: Progress | None
) -> EmbeddingModelInfo:
    """Embed every memory with the model of `spec` and record it among the store's other models,
    in one transaction (see `Memsearch.add_model`); `own` is the store's own model, refused here."""
    import numpy as np

    from memsearch.embedding import load_encoder

    if own is not None and EmbeddingModelInfo(spec.name, own.dim, spec.version).is_same_model(own):
        raise InvalidInputError(f"model {model_key(spec.name)} is this store's own model: its vectors are there")
    store = target.store(create=True)
    encoder = load_encoder(spec)
    rows = list(store.iter_texts())
    texts = [text for _, text in rows]
    vectors = encoder.encode(texts, progress=progress) if texts else np.zeros((0, encoder.info.dim), np.float32)
    store.add_model_vectors(encoder.info, [memory_id for memory_id, _ in rows], vectors)
    return encoder.info


def drop_model(store: Store, name: str) -> EmbeddingModelInfo:
    """Forget one of the store's other models with its vectors; the one it was."""
    model = held_model(store.extra_models(), name)
    if model is None:
        raise InvalidInputError(f"this store holds no vectors of {name}")
    store.drop_model_vectors(model_key(model.name))
    return model


def consolidate(store: Store, duplicate: float, related: float, dry_run: bool) -> Consolidation:
    """Mark (unless `dry_run`) the supersessions and groups `memsearch.consolidate.plan` finds,
    replacing every earlier mark."""
    ids, matrix = store.all_vectors()
    memories = sorted(store.list(), key=lambda m: (m.created_at, m.id))
    texts = {m.id: m.text for m in memories}
    from memsearch.consolidate import plan

    result = plan(ids, matrix, [m.id for m in memories], duplicate, related, texts)
    if not dry_run:
        store.set_consolidation(result.superseded, result.groups)
    shown = {*result.superseded, *result.superseded.values()}
    return Consolidation(result, dry_run, store.get_many(sorted(shown)))


def reembed(store: Store, encoder: Encoder, progress: Progress | None) -> int:
    """Embed every memory and vector view again with `encoder`, each distinct text once; returns how
    many memories. Those that wait for their vectors keep waiting (the next fill makes them with
    the store's model, which is now this one)."""
    waiting = set(store.pending_ids())  # embedded with their views by the next `index` (ingest.filling)
    rows = [(memory_id, text) for memory_id, text in store.iter_texts() if memory_id not in waiting]
    views: list[tuple[int, str, str]] = store.views_with_vectors()
    unique = list(dict.fromkeys([*(text for _, text in rows), *(text for _, _, text in views)]))
    encoded = encoder.encode(unique, progress=progress)
    position = {text: n for n, text in enumerate(unique)}
    store.replace_vectors(
        [memory_id for memory_id, _ in rows],
        encoded[[position[text] for _, text in rows]],
        encoder.info,
        view_vectors={(memory_id, view): encoded[position[text]] for memory_id, view, text in views},
    )
    return len(rows)
