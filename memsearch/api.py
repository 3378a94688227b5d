"""The library's front door: `Memsearch` holds every use case the CLI, HTTP API and MCP tools offer,
each checking its arguments (memsearch.arguments) and handing the work to where it is done:
ingest.importing (add, import), ingest.records (export), ingest.indexing (index), curation (update,
delete, consolidate, reindex), retrieval (search), doctor. What they return is in memsearch.outcomes.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.arguments import (
    MAX_ROWS,
    check_flag,
    check_iterable,
    check_location,
    check_name,
    check_profile,
    check_progress,
    check_ref,
    check_refs,
    check_scope,
    check_threshold,
    check_whole,
)
from memsearch.checks import check_text, shown
from memsearch.choices import IMPORT_FORMATS
from memsearch.encoder_loading import EncoderLoader
from memsearch.errors import (
    EditConflictError,
    EmbeddingError,
    InvalidInputError,
    MixedDeleteTargetsError,
    NoDeleteTargetError,
    NoteSectionError,
    StoreNotFoundError,
)
from memsearch.fields import AFTER, BEFORE, FACETS, IMPORT_FORMAT, REPLACE, SESSIONS, Field, parse_ref
from memsearch.models import EmbeddingModelInfo, Memory, NewMemory, check_changes
from memsearch.note_folders import NoteFolders
from memsearch.paths import resolve_db_path, shown_location
from memsearch.store import EVERYTHING, Scope, Store, open_store

if TYPE_CHECKING:  # imported by the use cases that need them: a search loads no reader or doctor, and
    # starts loading its encoder before it imports numpy, the pipeline and the profiles (see `search_many`);
    # a search that does not embed imports no encoder, registry or model loading

    from memsearch.doctor import DoctorReport
    from memsearch.embedding import Encoder, Progress
    from memsearch.ingest.embed import embed_memories as embed_memories
    from memsearch.ingest.embed import near_duplicates as near_duplicates
    from memsearch.llm import LLM
    from memsearch.outcomes import KIND_NAMES as KIND_NAMES
    from memsearch.outcomes import AddOutcome as AddOutcome
    from memsearch.outcomes import Consolidation as Consolidation
    from memsearch.outcomes import ImportOutcome as ImportOutcome
    from memsearch.outcomes import ProfileInfo as ProfileInfo
    from memsearch.outcomes import Timeline as Timeline
    from memsearch.profiles import Profile
    from memsearch.retrieval.pipeline import SearchOutcome, SearchRequest

__all__ = [
    "IMPORT_FORMATS", "KIND_NAMES", "AddOutcome", "Consolidation", "ImportOutcome", "Memsearch", "ProfileInfo",
    "Timeline", "embed_memories", "near_duplicates",
]  # fmt: skip

# Names this module offers whose modules only some use cases need (a search imports neither the
# ingestion nor the outcomes of writes): imported on first use.
_LAZY = {
    "KIND_NAMES": "memsearch.outcomes", "AddOutcome": "memsearch.outcomes", "Consolidation": "memsearch.outcomes",
    "ImportOutcome": "memsearch.outcomes", "ProfileInfo": "memsearch.outcomes", "Timeline": "memsearch.outcomes",
    "embed_memories": "memsearch.ingest.embed", "near_duplicates": "memsearch.ingest.embed",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Memsearch(NoteFolders):
    """A memsearch store with its encoder: every use case a front end offers is a method here.

    >>> ms = Memsearch("/tmp/notes.db")
    >>> ms.add(NewMemory("The deploy key lives in 1Password", tags=("ops",)))
    >>> ms.search(SearchRequest("where is the deploy key?", k=3)).results

    The store opens on first use (created by the first write); the encoder loads on the first
    call that embeds, so lexical searches and reads never load a model. `llm` runs the LLM stages
    of the profiles that have them; by default the endpoint configured (see `memsearch.llm`), read
    on the first search that wants one.
    """

    _UNSET: Any = object()
    # Whether this object's process lives on after a call (a server, a library user): a large
    # store's search may then ask for its full-text impact index to be made anew in a background
    # thread. The CLI (a process a command) sets it False: a command that wrote makes it at its end.
    background_work = True

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        model: str | None = None,
        encoder: Encoder | None = None,
        encoder_factory: Callable[[], Encoder] | None = None,
        llm: LLM | None = _UNSET,
    ) -> None:
        self.path: Path | str = resolve_db_path(None if db is None else check_location("db", db))
        self._model = check_name("model", model)
        self._encoder = EncoderLoader(encoder_factory or self._load_store_model, encoder)
        self._model_encoders: dict[str, Encoder] = {}  # the store's other models', by name, once loaded
        self._opened: Store | None = None
        self._llm = llm

    def llm(self) -> LLM | None:
        """The LLM the searches use, or None (no endpoint configured)."""
        if self._llm is Memsearch._UNSET:
            from memsearch.llm import configured_llm

            self._llm = configured_llm()
        return self._llm

    # -- the store and the encoder (for tests and benchmarks; front ends use the use cases below) ---

    def store(self, *, create: bool = False) -> Store:
        if self._opened is None:
            self._opened = open_store(self.path, create=create)
            if not self.background_work and hasattr(self._opened, "impact_background"):
                setattr(self._opened, "impact_background", False)  # noqa: B010 - a SQLite store's
        return self._opened

    def encoder(self) -> Encoder:
        return self._encoder.get()

    def _load_store_model(self) -> Encoder:
        """The model chosen (`model`, `MEMSEARCH_MODEL`), else the one the store recorded with its
        vectors, else (no store yet, or no vectors) the bundled one."""
        from memsearch.embedding import chosen_model, load_encoder, store_model

        recorded = None
        if not chosen_model(self._model):
            with contextlib.suppress(StoreNotFoundError):  # no store yet: the bundled model
                recorded = self.store().embedding_model()
        return load_encoder(store_model(self._model, recorded))

    def close(self) -> None:
        self._encoder.settle()  # the model's load may be reading the store's recorded model
        if self._opened is not None:
            self._opened.close()
            self._opened = None
        if (close := getattr(self._llm, "close", None)) is not None:
            close()

    def __enter__(self) -> Memsearch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def model_encoder(self, model: EmbeddingModelInfo) -> Encoder:
        """The encoder of one of the store's other models (see `add_model`), loaded on first use
        and kept; one whose files are no longer that model's is refused (EmbeddingError)."""
        from memsearch.embedding import load_encoder
        from memsearch.embedding.registry import model_key, recorded_spec
        from memsearch.store.sql import described

        key = model_key(model.name)
        if key not in self._model_encoders:
            encoder = load_encoder(recorded_spec(model))
            if not encoder.info.is_same_model(model):
                raise EmbeddingError(
                    f"this store's {key} vectors come from {described(model)} but the model found is "
                    f"{described(encoder.info)}; add the model again to re-embed them"
                )
            self._model_encoders[key] = encoder
        return self._model_encoders[key]

    def warm(self) -> None:
        """Make the first request as fast as the next (a server calls it before it listens): the
        store opened, created if need be; the encoder loaded and run once; with stored vectors,
        one hybrid search made, which reads the vector matrix (it records no access)."""
        from memsearch.retrieval.request import request_from_fields

        store = self.store(create=True)
        encoder = self.encoder()
        if store.vector_count():
            self.search(request_from_fields("warm up", k=1, mode="hybrid", touch=False))
        else:
            encoder.encode(["warm up"])

    @property
    def model_name(self) -> str:
        """The name of the encoder's model (loads it)."""
        return self.encoder().info.name

    # -- writes ---------------------------------------------------------------------------

    def add(self, memory: NewMemory, *, replace: bool = False, profile: Profile | str | None = None) -> AddOutcome:
        return self.add_many([memory], replace=replace, profile=profile)[0]

    def add_many(
        self,
        memories: Sequence[NewMemory],
        *,
        replace: bool = False,
        profile: Profile | str | None = None,
        progress: Progress | None = None,
    ) -> builtins.list[AddOutcome]:
        """Embed and store all memories in one transaction: all of them are stored, or none.

        With a `profile` that has an ingest dedup threshold, a memory whose cosine with a stored one
        (or an earlier one of the batch) reaches it is not stored and is reported as that memory's
        duplicate. A key that exists already (without `replace`) fails before anything is embedded.
        """
        memories = check_iterable("memories", memories)
        for memory in memories:
            if not isinstance(memory, NewMemory):
                raise InvalidInputError(f"must be NewMemory objects, not {shown(memory)}", field="memories")
        check_flag("replace", replace)
        check_profile(profile)
        check_progress(progress)
        if not memories:
            return []
        from memsearch.ingest import importing

        return importing.add_memories(self, memories, replace=replace, profile=profile, progress=progress)

    def import_text(
        self,
        content: str,
        *,
        source: str,
        fmt: str = IMPORT_FORMAT.default,
        sessions: bool = SESSIONS.default,
        facets: bool = FACETS.default,
        replace: bool = REPLACE.default,
        profile: Profile | str | None = None,
        conversation: str | None = None,
        progress: Progress | None = None,
    ) -> ImportOutcome:
        """Import memories (`jsonl`, one a line) or conversations (`chat` JSONL, `locomo`,
        `longmemeval`) from a text read from `source` (a display name for messages): every one is
        stored, or none is. A chat's conversation is `conversation`, else the source's file stem.
        Conversations become a session chunk per session (with `sessions`) and a memory per turn,
        with facet views if `facets`. Bad lines and existing keys fail before anything is embedded.
        JSONL may also be what `list`, `get`, `search` and `timeline` print (their lines or their
        JSON document): the fields an import cannot store (ids, use counts, scores) are left out and
        named in the outcome's `ignored`, and a memory given twice (same id and fields) is stored once."""
        check_text("content", content)
        check_name("source", source, optional=False)
        for name, flag in (("sessions", sessions), ("facets", facets), ("replace", replace)):
            check_flag(name, flag)
        check_name("conversation", conversation)
        check_profile(profile)
        check_progress(progress)
        from memsearch.ingest import importing

        outcome = importing.import_text(
            self, content, source=source, fmt=fmt, sessions=sessions, facets=facets, replace=replace,
            profile=profile, conversation=conversation, progress=progress,
        )  # fmt: skip
        if any(outcome.counts.values()):
            self._prepare_search_indexes(progress)
        return outcome

    def delete(self, refs: Sequence[int | str]) -> builtins.list[int]:
        """Delete memories by id (an int) or key (a str): all, or none if any is not found; returns their ids.

        A deleted turn leaves no trace search can reach: its session's other turns get their views
        rebuilt without it, and its session chunk its text (the chunk goes when no turn is left),
        in the same transaction as the delete."""
        from memsearch.curation import delete_memories

        memories = {memory.id: memory for memory in (self.get(ref) for ref in check_refs(refs))}
        _refuse_sections(memories.values(), "delete")
        delete_memories(self, builtins.list(memories.values()))
        return builtins.list(memories)

    def delete_matching(
        self,
        refs: Sequence[int | str] | None = None,
        scope: Scope | None = None,
        *,
        by_key: bool = False,
        everything: bool = False,
        dry_run: bool = False,
    ) -> builtins.list[Memory]:
        """The memories `refs` names (ids, or keys as `get_many` reads them; all, or none if any is
        not found), or every memory in `scope` (newest first, as `list` shows them), deleted as
        `delete` does; returns them. With `dry_run`, only returns them. Names both memories and a
        filter (or `everything`): MixedDeleteTargetsError; neither, and no `everything`:
        NoDeleteTargetError (a scope with no filter is every memory, only with `everything`)."""
        from memsearch.curation import delete_memories

        for name, flag in (("by_key", by_key), ("everything", everything), ("dry_run", dry_run)):
            check_flag(name, flag)
        if scope is not None:
            check_scope(scope)
        filtered = scope is not None and not scope.is_everything
        if refs is not None and (filtered or everything):
            raise MixedDeleteTargetsError()
        if refs is None and not filtered and not everything:
            raise NoDeleteTargetError()
        if refs is not None:
            memories = builtins.list({m.id: m for m in self.get_many(refs, by_key=by_key)}.values())
        else:
            memories = self.store().list(scope or EVERYTHING)
        if memories and not dry_run:
            _refuse_sections(memories, "delete")
            delete_memories(self, memories)
        return memories

    def reindex(self, progress: Progress | None = None) -> int:
        """Re-embed every memory with the current model; returns how many."""
        from memsearch.curation import reembed

        check_progress(progress)
        count = reembed(self.store(), self.encoder(), progress)
        self._prepare_search_indexes(progress)
        return count

    def _prepare_search_indexes(self, progress: Progress | None) -> None:
        """After a bulk write: what the next search would otherwise make on its first read (a large
        SQLite store's approximate vector index), made here; `progress` gets (vectors indexed, to
        index) while it is (a front end's bar goes on from the embedding's)."""
        self.store().prepare_search_indexes(progress)

    def add_model(self, name: str, progress: Progress | None = None) -> EmbeddingModelInfo:
        """Make the store hold the vectors of a second model (a registered name or a model folder,
        as `model` takes) beside its own: every memory's text is embedded with it and the model
        recorded, in one transaction (a failure leaves the store as it was; a model held already
        is embedded afresh). From then on every write embeds with it too, and the profile legs
        that name it (`vector(NAME)`) search its vectors. Returns the model recorded."""
        from memsearch.curation import add_model
        from memsearch.embedding import other_model, store_model

        spec = other_model(str(check_name("name", name, optional=False)))
        check_progress(progress)
        own = None
        with contextlib.suppress(StoreNotFoundError):  # no store yet: its model will be the chosen one
            own = self.store().embedding_model()
        if own is None:
            chosen = store_model(self._model, None)
            own = EmbeddingModelInfo(chosen.name, 0, chosen.version)
        return add_model(self, spec, own, progress)

    def drop_model(self, name: str) -> EmbeddingModelInfo:
        """Remove one of the store's other models (see `add_model`) with its vectors; returns it."""
        from memsearch.curation import drop_model

        return drop_model(self.store(), str(check_name("name", name, optional=False)))

    # -- reads ----------------------------------------------------------------------------

    @staticmethod
    def resolve(ref: str, *, by_key: bool = False) -> int | str:
        """A reference as typed: ASCII digits are an id unless `by_key`; anything else is a key."""
        if not isinstance(ref, str):
            raise InvalidInputError(f"must be the text of an id or key, not {shown(ref)}", field="ref")
        return check_ref(ref) if check_flag("by_key", by_key) else check_ref(parse_ref(ref))

    def get(self, ref: int | str) -> Memory:
        """A memory by id (an int) or key (a str): the type decides (see `resolve` for typed text)."""
        ref = check_ref(ref)
        store = self.store()
        return store.get(ref) if isinstance(ref, int) else store.get_by_key(ref)

    def get_many(self, refs: Iterable[int | str], *, by_key: bool = False) -> builtins.list[Memory]:
        """Memories by id or key, in the order given; a str is resolved as typed (see `resolve`)
        unless it is all digits and `by_key`. Any not found raises MemoryNotFoundError."""
        check_flag("by_key", by_key)
        refs = check_refs(refs)
        return [self.get(self.resolve(ref, by_key=by_key) if isinstance(ref, str) else ref) for ref in refs]

    def count(self, scope: Scope = EVERYTHING) -> int:
        """How many memories are in scope (what `list` would show without a limit)."""
        check_scope(scope)
        return self.store().count(scope)

    def tags(self, scope: Scope = EVERYTHING) -> dict[str, int]:
        """Each tag of the memories in scope → how many have it, most used first, then by name."""
        check_scope(scope)
        return dict(self.store().tags(scope))

    def list(self, scope: Scope = EVERYTHING, limit: int | None = None, offset: int = 0) -> builtins.list[Memory]:
        check_scope(scope)
        # A limit or offset past any store's size means "all" or "none": clamped, not refused.
        limit = check_whole("limit", limit, 0, None, optional=True)
        offset = check_whole("offset", offset, 0, None) or 0
        limit, offset = None if limit is not None and limit > MAX_ROWS else limit, min(offset, MAX_ROWS)
        return self.store().list(scope, limit=limit, offset=offset)

    def export(self, scope: Scope = EVERYTHING) -> Iterator[dict[str, Any]]:
        """Every memory in scope as a JSONL import record (see `export_record`), oldest id first:
        `import_text` of these lines into another store stores the same memories (new ids, vectors
        made by that store's model), and exporting that store gives the same lines."""
        from memsearch.ingest.records import export_records

        check_scope(scope)
        return export_records(self.store, scope)

    def stats(self) -> dict[str, Any]:
        """What the store holds; a store file that does not exist yet is reported as such
        (`exists` false, no memories) and is not created."""
        if isinstance(self.path, Path) and not self.path.exists():
            return {"path": str(self.path), "exists": False, "memories": 0}
        try:
            stats = self.store().stats()
        except StoreNotFoundError:  # a database without memsearch's tables yet
            return {"path": shown_location(self.path), "exists": False, "memories": 0}
        return {"path": stats.pop("path"), "exists": True, **stats}

    def doctor(self) -> DoctorReport:
        """The store's shape, counts and consistency, the model's state, and what would make search
        fail or slow (see memsearch.doctor). Reads only: a missing store is reported, not created."""
        from memsearch.doctor import diagnose

        return diagnose(self.path, self._model, self.store)

    def timeline(self, ref: int | str, *, before: int = BEFORE.default, after: int = AFTER.default) -> Timeline:
        """The turns around a memory in order (for a note: the memories around it in time)."""
        before, after = _given(BEFORE, before), _given(AFTER, after)
        memory = self.get(ref)
        from memsearch.outcomes import Timeline

        return Timeline(self.store().around(memory, before, after), memory.id)

    @staticmethod
    def profiles() -> builtins.list[ProfileInfo]:
        """Every ranking profile found, by name; one that cannot be loaded is listed with its error."""
        from memsearch.outcomes import ProfileInfo

        return ProfileInfo.every()

    @staticmethod
    def profile(name: str) -> ProfileInfo:
        """One ranking profile with its resolved parameters."""
        from memsearch.outcomes import ProfileInfo

        return ProfileInfo.named(str(check_name("name", name, optional=False)))

    def search(self, request: SearchRequest) -> SearchOutcome:
        return self.search_many([request])[0]

    def search_many(self, requests: Iterable[SearchRequest]) -> builtins.list[SearchOutcome]:
        """Run several searches in this process, loading the encoder at most once (each with its
        request's profile and time-decay constant).

        Each search records the access on the memories it returns (last_accessed_at,
        access_count) unless the request has `as_of` or `touch=False`.
        """
        from memsearch.retrieval.request import SearchRequest

        requests = check_iterable("requests", requests)
        for request in requests:  # a SearchRequest that exists is valid: its constructor checked it
            if not isinstance(request, SearchRequest):
                raise InvalidInputError(f"must be a SearchRequest, not {shown(request)}", field="request")
        store = self.store()  # a missing store is said at once, before any model is prepared
        if any(request.mode != "lexical" for request in requests):
            self._encoder.load_meanwhile()  # while the pipeline is imported and the lexical legs run
        from memsearch.retrieval.pipeline import run_searches

        return run_searches(store, requests, self.encoder, self.llm, self.model_encoder)

    @staticmethod
    def parse_queries(content: str, *, source: str, **defaults: Any) -> builtins.list[SearchRequest]:
        """Search requests from a JSONL text of {"query", optional "k" and "mode"} objects (the
        CLI's `--queries`); `defaults` gives every other SearchRequest field. All lines are checked
        first; a bad one raises ImportLineError with its line number."""
        from memsearch.retrieval.queries import parse_queries

        check_text("content", content)
        return parse_queries(content, str(check_name("source", source, optional=False)), defaults)

    # -- curation ---------------------------------------------------------------------------

    def update(self, ref: int | str, *, expected_text: str | None = None, **changes: object) -> Memory:
        """Change importance, priority, pinned, project, namespace, memory_score, tags or the text
        of a memory. A new text is embedded and indexed, and what is made from it rebuilt (a turn's
        views and its session's, see `curation.edit_text`); the text is written first. With
        `expected_text` (the text an edit started from), a new text is written only if the memory
        still has that text, checked in the write's transaction; else EditConflictError, and
        nothing changes. The text and tags of a section of an indexed note are its file's:
        NoteSectionError, nothing changed."""
        text = changes.pop("text", None)
        checked = check_changes(changes)
        if text is not None and not isinstance(text, str):
            raise InvalidInputError(f"must be a string, not {shown(text)}", field="text")
        if expected_text is not None:
            check_text("expected_text", expected_text)
        memory = self.get(ref)
        if (text is not None and text != memory.text) or checked.get("tags", memory.tags) != memory.tags:
            _refuse_sections([memory], "change")
        store = self.store()
        if text is not None and text != memory.text:
            from memsearch.curation import edit_text

            if expected_text is not None and memory.text != expected_text:
                raise EditConflictError(memory.id)
            edit_text(self, memory, check_text("text", text))
        return store.update(memory.id, checked) if checked else store.get(memory.id)

    def set_pinned(self, refs: Sequence[int | str], pinned: bool) -> builtins.list[int]:
        """Pin or unpin memories by id (an int) or key (a str): all of them, or none if any is not found."""
        check_flag("pinned", pinned)
        ids = builtins.list(dict.fromkeys(self.get(ref).id for ref in check_refs(refs)))
        store = self.store()
        for memory_id in ids:
            store.update(memory_id, {"pinned": pinned})
        return ids

    def copy_to(self, destination: str | os.PathLike[str], progress: Progress | None = None) -> int:
        """Copy every memory of this store (views, vectors, access counts, consolidation marks, ids)
        into the empty or new store at `destination`, without re-embedding; all or nothing. A
        destination large enough for an approximate vector index gets it made here (`progress`:
        (vectors indexed, to index))."""
        from memsearch.store.copy import copy_between

        return copy_between(self.path, check_location("destination", destination), check_progress(progress))

    def consolidate(self, *, duplicate: float = 0.95, related: float = 0.80, dry_run: bool = False) -> Consolidation:
        """Mark older near-duplicates (cosine ≥ duplicate, and no exact token such as an identifier,
        number, path or name in one but not the other) superseded by the newest one and group related
        memories (cosine ≥ related); every earlier mark is replaced."""
        from memsearch.curation import consolidate

        check_threshold("duplicate", duplicate)
        check_threshold("related", related)
        check_flag("dry_run", dry_run)
        return consolidate(self.store(), duplicate, related, dry_run)


def _given(field: Field, value: object) -> Any:
    """`value` checked by its field: given, not absent (None)."""
    if value is None:
        raise InvalidInputError("must be given, not None", field=field.name)
    return field.check(value)


def _refuse_sections(memories: Iterable[Memory], change: str) -> None:
    """NoteSectionError for the first memory that is the section of an indexed note file."""
    from memsearch.sections import section_of

    for memory in memories:
        if (section := section_of(memory)) is not None:
            raise NoteSectionError(memory.id, *section, change)
