"""`memsearch index --watch`: the roots kept in step with their files while it runs.

The first update is a whole index run over the roots; the watcher is started after it, and a
second (incremental) run catches what changed meanwhile, so the first outcome is yielded only
once the watcher is live and no change falls between the two. Then watchfiles (a Rust watcher:
inotify, FSEvents, ReadDirectoryChangesW, polling where none works) reports changes, gathered
until none came for `debounce_ms`, and each batch re-runs the index over the remembered roots that
hold the changed paths: the same incremental path as `memsearch index`, which reads only files
whose size or mtime moved and writes nothing when nothing did. The store's own files and the
folders every walk skips (`.git`) are not watched, so writing the store wakes nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from memsearch.embedding.base import Progress
from memsearch.ingest import Library
from memsearch.ingest.indexing import IndexOutcome, index_notes
from memsearch.ingest.progress import OnProgress

DEBOUNCE_MS = 400  # an editor's save (write, rename, chmod) is one update; a person waits no longer
WAKE_MS = 500  # the watcher answers at least this often: the first answer says it is live


def watch_notes(
    ms: Library,
    paths: Iterable[str | os.PathLike[str]] = (),
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    progress: Progress | None = None,
    debounce_ms: int = DEBOUNCE_MS,
    stop: threading.Event | None = None,
    store_files: Sequence[str] = (),
    on_progress: OnProgress | None = None,
) -> Iterator[IndexOutcome]:
    """The outcome of a first index run (as `index_notes`), then of one run per batch of changes,
    until `stop` is set (or KeyboardInterrupt). The roots given are named in every update, as in
    the first (walked whoever owns them); with none, each update checks the remembered roots as
    `index` does. `store_files` are left unwatched."""
    from watchfiles import DefaultFilter, watch

    paths = list(paths)
    first = index_notes(ms, paths, include=include, exclude=exclude, progress=progress, on_progress=on_progress)
    roots = [root.path for root in first.roots]
    named = roots if paths else []  # the folders given stay named in every update; remembered ones are checked
    if not roots:
        yield first
        return
    ignored = [path for name in store_files for path in (name, f"{name}-wal", f"{name}-shm", f"{name}-journal")]
    batches = watch(
        *roots, watch_filter=DefaultFilter(ignore_paths=ignored), debounce=debounce_ms, stop_event=stop,
        rust_timeout=WAKE_MS, yield_on_timeout=True,
    )  # fmt: skip
    next(batches, None)  # the watcher is live once it has answered (a timeout at the latest)
    # what changed before it was
    caught_up = index_notes(ms, progress=progress, on_progress=on_progress, within=roots, named=named)
    yield first
    if caught_up.files:
        yield caught_up
    for changes in batches:
        changed = sorted({path for _, path in changes if not Path(path).name.startswith(".")})
        if changed:
            yield index_notes(ms, progress=progress, on_progress=on_progress, within=changed, named=named)
