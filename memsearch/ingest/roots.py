"""The remembered roots of the notes index (`memsearch index --roots`, `--forget`, `--prune`):
each listed with what it holds and whether it is there; one forgotten with its memories; the
missing ones pruned.

A root that is missing (moved, unmounted) is only reported by an index run, and what was indexed
from it is kept (`indexing._roots`): forgetting or pruning is the user's word that it is gone.
A root that a plain `index` run would refuse as another user's to write (`note_files.refusal`) is
listed `refused` with the reason; it is not pruned, and forgetting it (it is named) reads nothing.
A file under a root being forgotten that another remembered root also covers stays indexed: that
root's next run decides about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import NotARootError
from memsearch.ingest import Library
from memsearch.ingest.indexing import IndexState, Root, existing_store
from memsearch.ingest.note_files import is_under, refusal

if TYPE_CHECKING:
    from memsearch.store.base import Store

ROOT_STATES = ("ok", "missing", "refused")


@dataclass(frozen=True)
class RootInfo:
    """A remembered root: its patterns, whether it is there, and what the store holds from it."""

    path: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    state: str  # one of ROOT_STATES
    files: int  # files indexed from under it
    memories: int  # their sections
    reason: str | None = None  # why it is refused

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "include": list(self.include), "exclude": list(self.exclude), "state": self.state,
            "reason": self.reason, "files": self.files, "memories": self.memories,
        }  # fmt: skip


@dataclass(frozen=True)
class Forgotten:
    """What forgetting roots removed: the roots (as they were listed) and their memories."""

    roots: tuple[RootInfo, ...]
    memories_removed: int
    files_removed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "forgotten": [root.to_dict() for root in self.roots],
            "memories_removed": self.memories_removed,
            "files_removed": self.files_removed,
        }


def root_info(state: IndexState, root: Root) -> RootInfo:
    held = [record for path, record in state.files.items() if is_under(path, [root.path])]
    there = Path(root.path).exists()
    reason = refusal(root.path) if there else None
    return RootInfo(
        root.path,
        root.include,
        root.exclude,
        "missing" if not there else "ok" if reason is None else "refused",
        len(held),
        sum(len(record.chunks) for record in held),
        reason,
    )


def list_roots(ms: Library) -> list[RootInfo]:
    """Every remembered root, by path (none before the first index)."""
    store = existing_store(ms)
    state = IndexState.load(store.index_state() if store is not None else None)
    return [root_info(state, root) for _, root in sorted(state.roots.items())]


def forget_roots(ms: Library, paths: Sequence[str]) -> Forgotten:
    """Forget the remembered roots named (NotARootError for one that is not, before anything
    changes) and delete the memories of the files under them that no other remembered root covers."""
    store = existing_store(ms)
    state = IndexState.load(store.index_state() if store is not None else None)
    chosen = list(dict.fromkeys(_remembered(state, path) for path in paths))
    assert store is not None or not chosen  # a root is remembered only in a store
    return _forget(store, state, chosen) if store is not None else Forgotten((), 0, 0)


def prune_roots(ms: Library) -> Forgotten:
    """Forget every remembered root that is missing, with its memories (see `forget_roots`)."""
    store = existing_store(ms)
    state = IndexState.load(store.index_state() if store is not None else None)
    missing = [path for path in sorted(state.roots) if not Path(path).exists()]
    return _forget(store, state, missing) if store is not None and missing else Forgotten((), 0, 0)


def _remembered(state: IndexState, path: str) -> str:
    """The remembered root a path names: as given (made absolute) or with its links resolved."""
    given = Path(path).expanduser()
    for candidate in (str(given.absolute()), str(given.resolve())):
        if candidate in state.roots:
            return candidate
    raise NotARootError(str(given))


def _forget(store: Store, state: IndexState, chosen: Sequence[str]) -> Forgotten:
    infos = tuple(root_info(state, state.roots[path]) for path in chosen)
    roots = {path: root for path, root in state.roots.items() if path not in chosen}
    gone = [path for path in state.files if is_under(path, chosen) and not is_under(path, list(roots))]
    keys = [key for path in gone for key in state.files[path].chunks]
    ids = [memory_id for key in keys if (memory_id := store.id_for_key(key)) is not None]
    if ids:  # the memories first: a run that stops before the state is saved leaves the roots to forget again
        store.delete(ids)
    files = {path: record for path, record in state.files.items() if path not in set(gone)}
    store.save_index_state(IndexState(roots, files).dump())
    return Forgotten(infos, len(ids), len(gone))
