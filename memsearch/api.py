"""The library's front door. The CLI is a thin layer over this class."""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
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
    check_request,
    check_scope,
    check_threshold,
    check_whole,
)
from memsearch.choices import IMPORT_FORMATS
from memsearch.embedding import Encoder, Progress, load_encoder, resolve_model
from memsearch.errors import DuplicateKeyError, ImportLineError, InvalidInputError, MemsearchError, StoreNotFoundError
from memsearch.ingest.embed import embed_memories, near_duplicates, with_chunks
from memsearch.models import Memory, NewMemory, check_changes, check_text, shown
from memsearch.paths import resolve_db_path, shown_location
from memsearch.store import EVERYTHING, Scope, Store, open_store
from memsearch.store.base import Rewrite
from memsearch.timeutil import utc_now

if TYPE_CHECKING:  # imported by the use cases that need them: a search loads no reader or doctor, and
    # starts loading its encoder before it imports numpy, the pipeline and the profiles (see `search_many`)
    from concurrent.futures import Future

    from memsearch.consolidate import ConsolidationPlan
    from memsearch.doctor import DoctorReport, Finding, ModelState
    from memsearch.ingest.indexing import IndexOutcome
    from memsearch.llm import LLM
    from memsearch.profiles import Profile
    from memsearch.retrieval.pipeline import SearchOutcome, SearchRequest

__all__ = [
    "IMPORT_FORMATS", "AddOutcome", "Consolidation", "ImportOutcome", "Memsearch", "ProfileInfo", "Timeline",
    "embed_memories", "near_duplicates",
]  # fmt: skip


@dataclass(frozen=True)
class AddOutcome:
    """What became of one memory given to `add`: stored under `id`, or not stored because it is a
    near-duplicate of memory `duplicate_of` (then `id` is that memory's) at cosine `similarity`,
    which reached the profile's ingest dedup `threshold`."""

    id: int
    stored: bool = True
    duplicate_of: int | None = None
    similarity: float | None = None
    threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "stored": self.stored,
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
            "threshold": self.threshold,
        }


KIND_NAMES = {"note": ("memory", "memories"), "turn": ("turn", "turns"), "session": ("session", "sessions")}


@dataclass(frozen=True)
class ImportOutcome:
    """What an import stored: `counts` by kind, and the near-duplicates it did not store, each with
    its line number (JSONL records) or item number (the memories made from conversations)."""

    source: str
    counts: dict[str, int]
    duplicates: list[tuple[int, AddOutcome]] = field(default_factory=list)
    numbered_by: str = "line"  # "line" or "item"

    @property
    def summary(self) -> str:
        """ "3 memories", "2 sessions, 9 turns": the stored memories by kind."""
        parts = [f"{n} {KIND_NAMES[kind][n != 1]}" for kind, n in self.counts.items() if n]
        return ", ".join(parts) or "0 memories"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "counts": dict(self.counts),
            "duplicates": [{self.numbered_by: number, **outcome.to_dict()} for number, outcome in self.duplicates],
        }


@dataclass(frozen=True)
class Timeline:
    """A memory with its neighbours in order (see `Store.around`); `current` is the one asked for."""

    memories: list[Memory]
    current: int

    def to_dict(self) -> dict[str, Any]:
        """`{current, memories}`: the id asked for, and every memory marked whether it is that one."""
        return {
            "current": self.current,
            "memories": [{**memory.to_dict(), "current": memory.id == self.current} for memory in self.memories],
        }


@dataclass(frozen=True)
class Consolidation:
    """What `consolidate` marked (or would mark, on a dry run), with the texts of the memories on
    both sides of each supersession."""

    plan: ConsolidationPlan
    dry_run: bool
    memories: dict[int, Memory]  # the superseded memories and the ones superseding them, by id

    @property
    def superseded(self) -> dict[int, int]:
        return self.plan.superseded

    @property
    def texts(self) -> dict[int, str]:
        return {memory_id: memory.text for memory_id, memory in self.memories.items()}

    @property
    def groups(self) -> dict[int, list[int]]:
        """Group id → its memories' ids, in order."""
        groups: dict[int, list[int]] = {}
        for memory_id, group in sorted(self.plan.groups.items()):
            groups.setdefault(group, []).append(memory_id)
        return groups

    def to_dict(self) -> dict[str, Any]:
        texts = self.texts
        return {
            "dry_run": self.dry_run,
            "superseded": [
                {"id": old, "superseded_by": new, "text": texts.get(old), "superseded_by_text": texts.get(new)}
                for old, new in sorted(self.superseded.items())
            ],
            "groups": [{"group_id": group, "ids": ids} for group, ids in self.groups.items()],
        }


@dataclass(frozen=True)
class ProfileInfo:
    """A ranking profile as listed: its parameters and the file it comes from; a profile whose
    file cannot be used has no parameters and says why in `error`."""

    name: str
    path: Path
    profile: Profile | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.profile.summary if self.profile else "",
            "seed": self.profile.seed if self.profile else "",
            "path": str(self.path),
            "error": self.error,
        }


class Memsearch:
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
        self._encoder = encoder
        self._encoder_factory = encoder_factory
        self._opened: Store | None = None
        self._llm = llm
        self._loading: Future[Encoder] | None = None

    def llm(self) -> LLM | None:
        """The LLM the searches use, or None (no endpoint configured)."""
        if self._llm is Memsearch._UNSET:
            from memsearch.llm import configured_llm

            self._llm = configured_llm()
        return self._llm

    # -- plumbing (for tests and benchmarks; front ends use the use cases below) ---------------

    def store(self, *, create: bool = False) -> Store:
        if self._opened is None:
            self._opened = open_store(self.path, create=create)
        return self._opened

    def encoder(self) -> Encoder:
        if self._encoder is None:
            loading, self._loading = self._loading, None  # a load that failed is tried afresh next time
            self._encoder = loading.result() if loading else self._load_encoder()
        return self._encoder

    def _load_encoder(self) -> Encoder:
        return self._encoder_factory() if self._encoder_factory else load_encoder(resolve_model(self._model))

    def _load_encoder_meanwhile(self) -> None:
        """Start loading the encoder in a thread, for a search that will embed: onnxruntime builds
        its session (a fifth of a second) without holding the GIL, while this thread imports the
        pipeline, opens the store and runs the lexical legs. `encoder()` waits for it, and raises
        what the load raised."""
        if self._encoder is None and self._loading is None:
            from concurrent.futures import ThreadPoolExecutor

            # Its thread is joined at exit: an interpreter that ends waits for the load rather than
            # stop it inside onnxruntime.
            loader = ThreadPoolExecutor(1, thread_name_prefix="memsearch-encoder-load")
            self._loading = loader.submit(self._load_encoder)
            loader.shutdown(wait=False)

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None
        if (close := getattr(self._llm, "close", None)) is not None:
            close()

    def __enter__(self) -> Memsearch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        keys = [m.key for m in memories if m.key is not None]
        if len(keys) != len(set(keys)):
            duplicate = next(key for key in keys if keys.count(key) > 1)
            raise InvalidInputError(f"key {duplicate!r} is given twice")
        dedup = _ingest_dedup(profile)
        store = self.store(create=True)
        if not replace:
            for key in keys:
                existing = store.id_for_key(key)
                if existing is not None:
                    raise DuplicateKeyError(f"a memory with key {key!r} exists already (id {existing})")
        encoder = self.encoder()
        store.check_model(encoder.info)  # before the slow part, not after it
        memories = [with_chunks(memory) for memory in memories]
        vectors, view_vectors = embed_memories(encoder, memories, progress)
        duplicates = near_duplicates(store, memories, vectors, dedup) if dedup is not None else {}
        kept = [i for i in range(len(memories)) if i not in duplicates]
        batch_position = {old: new for new, old in enumerate(kept)}
        kept_view_vectors = {batch_position[i]: views for i, views in view_vectors.items() if i in batch_position}
        stored = store.insert(
            [memories[i] for i in kept],
            vectors[kept],
            encoder.info,
            utc_now(),
            replace=replace,
            view_vectors=kept_view_vectors,
        )
        new_ids = dict(zip(kept, stored, strict=True))
        outcomes = []
        for position in range(len(memories)):
            if position in duplicates:
                (in_batch, ref), similarity = duplicates[position]
                target = new_ids[ref] if in_batch else ref
                outcomes.append(
                    AddOutcome(target, stored=False, duplicate_of=target, similarity=similarity, threshold=dedup)
                )
            else:
                outcomes.append(AddOutcome(new_ids[position]))
        return outcomes

    def import_text(
        self,
        content: str,
        *,
        source: str,
        fmt: str = "jsonl",
        sessions: bool = True,
        facets: bool = False,
        replace: bool = False,
        profile: Profile | str | None = None,
        conversation: str | None = None,
        progress: Progress | None = None,
    ) -> ImportOutcome:
        """Import memories (`jsonl`, one a line) or conversations (`chat` JSONL, `locomo`,
        `longmemeval`) from a text read from `source` (a display name for messages): every one is
        stored, or none is. A chat's conversation is `conversation`, else the source's file stem.
        Conversations become a session chunk per session (with `sessions`) and a memory per turn,
        with facet views if `facets`. Bad lines and existing keys fail before anything is embedded."""
        from memsearch.ingest.conversations import with_facets
        from memsearch.ingest.records import parse_memories

        check_text("content", content)
        check_name("source", source, optional=False)
        for name, flag in (("sessions", sessions), ("facets", facets), ("replace", replace)):
            check_flag(name, flag)
        check_name("conversation", conversation)
        check_profile(profile)
        check_progress(progress)
        if not isinstance(fmt, str) or fmt not in IMPORT_FORMATS:
            raise InvalidInputError(
                f"unknown import format {fmt!r} (choose from {', '.join(IMPORT_FORMATS)})", field="fmt"
            )
        if conversation is not None and fmt != "chat":
            raise InvalidInputError("names a chat's conversation; other formats name their own", field="conversation")
        if fmt == "jsonl":
            lines, memories = parse_memories(content, source)
            self._check_parents(memories, lines, source)
        else:
            lines, memories = [], self._conversation_memories(content, source, fmt, sessions, conversation)
        if not memories:
            return ImportOutcome(source, {kind: 0 for kind in KIND_NAMES})
        if not replace and (store := self._existing_store()) is not None:
            self._check_new_keys(store, memories, lines, source)
        if facets:
            memories = with_facets(memories, self.encoder())
        outcomes = self.add_many(memories, replace=replace, profile=profile, progress=progress)
        numbers = lines or list(range(1, len(memories) + 1))
        stored = [m for m, o in zip(memories, outcomes, strict=True) if o.stored]
        return ImportOutcome(
            source,
            {kind: sum(m.kind == kind for m in stored) for kind in KIND_NAMES},
            [(number, o) for number, o in zip(numbers, outcomes, strict=True) if not o.stored],
            "line" if lines else "item",
        )

    @staticmethod
    def _conversation_memories(
        content: str, source: str, fmt: str, sessions: bool, conversation: str | None
    ) -> builtins.list[NewMemory]:
        from memsearch.ingest.conversations import conversation_memories
        from memsearch.ingest.readers import read_chat, read_locomo, read_longmemeval

        if fmt == "chat":
            conversations = [read_chat(content, source, conversation or PurePath(source).stem or source)]
        else:
            conversations = (read_locomo if fmt == "locomo" else read_longmemeval)(content, source)
        return [m for c in conversations for m in conversation_memories(c, sessions=sessions)]

    def _check_parents(self, memories: Sequence[NewMemory], lines: Sequence[int], source: str) -> None:
        """A `parent_key` must name a memory earlier in the file or already stored."""
        earlier: set[str] = set()
        for memory, line in zip(memories, lines, strict=True):
            parent = memory.parent_key
            if parent is not None and parent not in earlier and not self._stored_key(parent):
                raise ImportLineError(
                    source, line, f"parent_key {parent!r} names no memory stored or on an earlier line"
                )
            if memory.key is not None:
                earlier.add(memory.key)

    def _existing_store(self) -> Store | None:
        """The store if there is one yet: checks before a first import must not create it (and a new
        PostgreSQL database has no schema until the import writes)."""
        if isinstance(self.path, Path) and not self.path.exists():
            return None
        try:
            return self.store()
        except StoreNotFoundError:
            return None

    def _stored_key(self, key: str) -> bool:
        store = self._existing_store()
        return store is not None and store.id_for_key(key) is not None

    @staticmethod
    def _check_new_keys(store: Store, memories: Sequence[NewMemory], lines: Sequence[int], source: str) -> None:
        """A key of the import that a stored memory has already fails with its line (or item) number."""
        for position, memory in enumerate(memories):
            existing = store.id_for_key(memory.key) if memory.key is not None else None
            if existing is not None:
                where = f"line {lines[position]}" if lines else f"item {position + 1}"
                raise DuplicateKeyError(
                    f"{source}, {where}: a memory with key {memory.key!r} exists already (id {existing}); "
                    "nothing from this file was stored"
                )

    def delete(self, refs: Sequence[int | str]) -> builtins.list[int]:
        """Delete memories by id (an int) or key (a str): all, or none if any is not found; returns their ids.

        A deleted turn leaves no trace search can reach: its session's other turns get their views
        rebuilt without it, and its session chunk its text (the chunk goes when no turn is left),
        in the same transaction as the delete."""
        memories = {memory.id: memory for memory in (self.get(ref) for ref in check_refs(refs))}
        ids = builtins.list(memories)
        store = self.store()
        rewrites, emptied = self._rebuilt_sessions(store, builtins.list(memories.values()))
        store.delete([*ids, *emptied], rewrites)
        return ids

    def _rebuilt_sessions(self, store: Store, deleted: Sequence[Memory]) -> tuple[builtins.list[Rewrite], set[int]]:
        """The rewrites of what the deleted turns' sessions derive from them (with the one builder
        an import uses, ingest.conversations), and the session chunks left with no turn."""
        from memsearch.ingest.conversations import SESSION_VIEWS, session_text, turn_views

        gone = {memory.id for memory in deleted}
        sessions = {(m.conversation, m.session) for m in deleted if m.kind == "turn" and m.session is not None}
        rebuilt: builtins.list[tuple[Memory, NewMemory, dict[str, str | None]]] = []
        emptied: set[int] = set()
        for conversation, session in sorted(sessions, key=str):
            assert session is not None
            turns = store.session_turns(conversation, session)
            kept = [turn for turn in turns if turn.id not in gone]
            before = [turn.text for turn in turns]
            after = [turn.text for turn in kept]
            for i, turn in enumerate(kept):
                old, new = turn_views(before, turns.index(turn)), turn_views(after, i)
                if old != new:
                    named: dict[str, str | None] = {view: new.get(view) for view in SESSION_VIEWS}
                    rebuilt.append((turn, NewMemory(turn.text, kind="turn", views=new), named))
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
        if not rebuilt:
            return [], emptied
        encoder = self.encoder()
        store.check_model(encoder.info)
        vectors, view_vectors = embed_memories(encoder, [new for _, new, _ in rebuilt])
        rewrites = [
            Rewrite(
                memory.id,
                memory.text,
                memory.metadata,
                vectors[i],
                {
                    view: None if text is None else (text, view_vectors.get(i, {}).get(view))
                    for view, text in named.items()
                },
            )
            for i, (memory, _, named) in enumerate(rebuilt)
        ]
        return rewrites, emptied

    def reindex(self, progress: Progress | None = None) -> int:
        """Re-embed every memory with the current model; returns how many."""
        check_progress(progress)
        store = self.store()
        encoder = self.encoder()
        rows = builtins.list(store.iter_texts())
        views: builtins.list[tuple[int, str, str]] = store.views_with_vectors()
        unique = builtins.list(dict.fromkeys([*(text for _, text in rows), *(text for _, _, text in views)]))
        encoded = encoder.encode(unique, progress=progress)
        position = {text: n for n, text in enumerate(unique)}
        store.replace_vectors(
            [memory_id for memory_id, _ in rows],
            encoded[[position[text] for _, text in rows]],
            encoder.info,
            view_vectors={(memory_id, view): encoded[position[text]] for memory_id, view, text in views},
        )
        return len(rows)

    # -- reads ----------------------------------------------------------------------------

    @staticmethod
    def resolve(ref: str, *, by_key: bool = False) -> int | str:
        """A reference as typed: ASCII digits are an id unless `by_key`; anything else is a key."""
        from memsearch.operations import parse_ref

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
        from memsearch.ingest.records import export_record

        check_scope(scope)
        return self._export(scope, export_record)

    def _export(self, scope: Scope, export_record: Callable[..., dict[str, Any]]) -> Iterator[dict[str, Any]]:
        store = self.store()
        keys: dict[int, str | None] = {}  # parent id → its key (session chunks precede their turns)
        for exported in store.export():
            memory = exported.memory
            if memory.kind == "session":
                keys[memory.id] = memory.key
            if not scope.admits(memory):
                continue
            parent = memory.parent_id
            if parent is not None and parent not in keys:
                keys[parent] = store.get(parent).key
            yield export_record(exported, keys[parent] if parent is not None else None)

    def stats(self) -> dict[str, Any]:
        """What the store holds; a store file that does not exist yet is reported as such
        (`exists` false, no memories) and is not created."""
        if isinstance(self.path, Path) and not self.path.exists():
            return {"path": str(self.path), "exists": False, "memories": 0}
        stats = self.store().stats()
        return {"path": stats.pop("path"), "exists": True, **stats}

    def doctor(self) -> DoctorReport:
        """The store's shape, counts and consistency, the model's state, and what would make search
        fail or slow (see memsearch.doctor). Reads only: a missing store is reported, not created."""
        from memsearch.doctor import PROBLEM, DoctorReport, Finding, model_findings, store_findings

        findings: builtins.list[Finding] = []
        model = self._model_state(findings)
        if model is not None:
            findings += model_findings(model)
        location = self._location()
        if isinstance(self.path, Path) and not self.path.exists():
            findings.insert(0, Finding("store", "ok", f"no store yet at {location}; the first add creates it"))
            return DoctorReport(location, False, None, model, findings)
        try:
            health = self.store().health()
        except MemsearchError as error:
            findings.insert(0, Finding("store", PROBLEM, str(error)))
            return DoctorReport(location, True, None, model, findings)
        except Exception as error:  # a store's own error: a damaged file, a lost connection
            from memsearch.store import describe_store_error

            known = describe_store_error(error)
            detail = str(known or f"{type(error).__name__}: {error}").strip().splitlines() or [""]
            findings.insert(0, Finding("store", PROBLEM, detail[0]))
            return DoctorReport(location, True, None, model, findings)
        return DoctorReport(self.store().location, True, health, model, store_findings(health, model) + findings)

    def _location(self) -> str:
        return shown_location(self.path)

    def _model_state(self, findings: builtins.list[Finding]) -> ModelState | None:
        """The model searches would use, resolved without loading it; a bad one is a finding."""
        import json

        from memsearch.doctor import PROBLEM, Finding, ModelState
        from memsearch.embedding.onnx import export_dir

        try:
            spec = resolve_model(self._model)
        except MemsearchError as error:
            findings.append(Finding("model", PROBLEM, str(error)))
            return None
        folder = export_dir(spec)
        manifest = folder / "manifest.json"
        dim = json.loads(manifest.read_text(encoding="utf-8"))["dim"] if manifest.is_file() else None
        return ModelState(spec.name, dim, str(folder), manifest.is_file())

    def timeline(self, ref: int | str, *, before: int = 5, after: int = 5) -> Timeline:
        """The turns around a memory in order (for a note: the memories around it in time)."""
        from memsearch.operations import MAX_TIMELINE

        before = check_whole("before", before, 0, MAX_TIMELINE) or 0
        after = check_whole("after", after, 0, MAX_TIMELINE) or 0
        memory = self.get(ref)
        return Timeline(self.store().around(memory, before, after), memory.id)

    @staticmethod
    def profiles() -> builtins.list[ProfileInfo]:
        """Every ranking profile found, by name; one that cannot be loaded is listed with its error."""
        from memsearch.profiles import available, load_profile

        infos = []
        for name, path in available().items():
            try:
                infos.append(ProfileInfo(name, path, load_profile(name)))
            except InvalidInputError as error:
                infos.append(ProfileInfo(name, path, None, str(error)))
        return infos

    @staticmethod
    def profile(name: str) -> ProfileInfo:
        """One ranking profile with its resolved parameters."""
        from memsearch.profiles import available, load_profile

        profile = load_profile(str(check_name("name", name, optional=False)))
        return ProfileInfo(profile.name, available()[profile.name], profile)

    def search(self, request: SearchRequest) -> SearchOutcome:
        return self.search_many([request])[0]

    def search_many(self, requests: Iterable[SearchRequest]) -> builtins.list[SearchOutcome]:
        """Run several searches in this process, loading the encoder at most once (each with its
        request's profile and time-decay constant).

        Each search records the access on the memories it returns (last_accessed_at,
        access_count) unless the request has `as_of` or `touch=False`.
        """
        requests = [check_request(request) for request in check_iterable("requests", requests)]
        if any(request.mode != "lexical" for request in requests):
            self._load_encoder_meanwhile()
        from memsearch.profiles import with_environment
        from memsearch.retrieval.pipeline import encoder_query_vector, llm_stages, resolve_profile, run_search, with_tau

        store = self.store()
        embed = encoder_query_vector(self.encoder, store)
        profiles: dict[tuple[int, float | None], Profile] = {}
        outcomes = []
        for request in requests:
            chosen_key = (id(request.profile), request.tau_days)  # requests of a batch share their profile
            chosen = profiles.get(chosen_key)
            if chosen is None:
                chosen = with_environment(with_tau(resolve_profile(request.profile), request.tau_days))
                profiles[chosen_key] = chosen
            llm = self.llm() if llm_stages(request, chosen) else None
            outcome = run_search(store, request, embed, chosen, llm)
            if request.records_access:
                store.touch([c.id for c in outcome.results], utc_now())
            outcomes.append(outcome)
        return outcomes

    @staticmethod
    def parse_queries(content: str, *, source: str, **defaults: Any) -> builtins.list[SearchRequest]:
        """Search requests from a JSONL text of {"query", optional "k" and "mode"} objects (the
        CLI's `--queries`); `defaults` gives every other SearchRequest field. All lines are checked
        first; a bad one raises ImportLineError with its line number."""
        from memsearch.ingest.records import parse_queries

        check_text("content", content)
        return parse_queries(content, str(check_name("source", source, optional=False)), defaults)

    # -- curation ---------------------------------------------------------------------------

    def update(self, ref: int | str, **changes: object) -> Memory:
        """Change importance, priority, pinned, project, namespace, memory_score or tags of a memory."""
        checked = check_changes(changes)
        memory = self.get(ref)
        return self.store().update(memory.id, checked)

    def set_pinned(self, refs: Sequence[int | str], pinned: bool) -> builtins.list[int]:
        """Pin or unpin memories by id (an int) or key (a str): all of them, or none if any is not found."""
        check_flag("pinned", pinned)
        ids = builtins.list(dict.fromkeys(self.get(ref).id for ref in check_refs(refs)))
        store = self.store()
        for memory_id in ids:
            store.update(memory_id, {"pinned": pinned})
        return ids

    def copy_to(self, destination: str | os.PathLike[str]) -> int:
        """Copy every memory of this store (views, vectors, access counts, consolidation marks, ids)
        into the empty or new store at `destination`, without re-embedding; all or nothing."""
        from memsearch.store.copy import copy_between

        return copy_between(self.path, check_location("destination", destination))

    def consolidate(self, *, duplicate: float = 0.95, related: float = 0.80, dry_run: bool = False) -> Consolidation:
        """Mark older near-duplicates (cosine ≥ duplicate, and no exact token such as an identifier,
        number, path or name in one but not the other) superseded by the newest one and group related
        memories (cosine ≥ related); every earlier mark is replaced."""
        check_threshold("duplicate", duplicate)
        check_threshold("related", related)
        check_flag("dry_run", dry_run)
        store = self.store()
        ids, matrix = store.all_vectors()
        memories = sorted(store.list(), key=lambda m: (m.created_at, m.id))
        texts = {m.id: m.text for m in memories}
        from memsearch.consolidate import plan

        result = plan(ids, matrix, [m.id for m in memories], duplicate, related, texts)
        if not dry_run:
            store.set_consolidation(result.superseded, result.groups)
        shown = {*result.superseded, *result.superseded.values()}
        return Consolidation(result, dry_run, store.get_many(sorted(shown)))

    # -- folders of notes ---------------------------------------------------------------------

    def index(
        self,
        paths: Iterable[str | os.PathLike[str]] = (),
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> IndexOutcome:
        """Keep folders of notes in the store, a memory per chunk (see memsearch.ingest.indexing):
        the `paths` given are remembered with their patterns (gitignore syntax; `include` defaults
        to markdown and text files); with none, every remembered one is brought up to date. Only new
        and changed chunks are embedded; `dry_run` says what would change and writes nothing."""
        from memsearch.ingest.indexing import index_notes

        return index_notes(self, paths, include=include, exclude=exclude, dry_run=dry_run, progress=progress)


def _ingest_dedup(profile: Profile | str | None) -> float | None:
    if profile is None:
        return None
    from memsearch.retrieval.pipeline import resolve_profile

    threshold = resolve_profile(profile).ingest_dedup
    if threshold is not None:
        check_threshold("dedup", threshold)
    return threshold
