"""The facade's use cases over folders of notes (`index`, `watch`, the remembered roots): a part of
`memsearch.api.Memsearch`, whose methods they are; the work is memsearch.ingest's (indexing,
watching, roots)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.arguments import check_flag, check_on_progress, check_paths, check_patterns, check_progress
from memsearch.errors import InvalidInputError

if TYPE_CHECKING:
    import threading

    from memsearch.embedding import Progress
    from memsearch.ingest import Library as _Facade  # what Memsearch provides: its store, encoders and path
    from memsearch.ingest.indexing import IndexOutcome
    from memsearch.ingest.progress import OnProgress
    from memsearch.ingest.roots import Forgotten, RootInfo
else:
    _Facade = object


class NoteFolders(_Facade):
    """Memsearch's use cases over folders of notes (it is a NoteFolders: one facade)."""

    def index(
        self,
        paths: Iterable[str | os.PathLike[str]] = (),
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        dry_run: bool = False,
        progress: Progress | None = None,
        on_progress: OnProgress | None = None,
        vectors: bool = True,
    ) -> IndexOutcome:
        """Keep folders of notes in the store, a memory per chunk (see memsearch.ingest.indexing):
        the `paths` given are remembered with their patterns (gitignore syntax; `include` defaults
        to markdown and text files) and read whoever owns them; with none, every remembered one is
        brought up to date, less what another user could have written (skipped, its notes kept).
        Only new and changed chunks are embedded; `dry_run` says what would change and writes nothing.
        Each file's chunks are stored first (searchable by their words at once, a few files per
        transaction), then every memory that waits for its vectors is embedded (with `vectors`
        False they keep waiting, for a later run); an interrupted run keeps what it committed.
        `progress` gets (vectors made, vectors to make); `on_progress` an IndexProgress
        (memsearch.ingest.progress) after each commit."""
        from memsearch.ingest.indexing import index_notes

        return index_notes(
            self,
            check_paths(paths),
            include=check_patterns("include", include),
            exclude=check_patterns("exclude", exclude),
            dry_run=check_flag("dry_run", dry_run),
            progress=check_progress(progress),
            on_progress=check_on_progress(on_progress),
            vectors=check_flag("vectors", vectors),
        )

    def index_changed(
        self,
        paths: Iterable[str | os.PathLike[str]],
        progress: Progress | None = None,
        on_progress: OnProgress | None = None,
    ) -> IndexOutcome:
        """Bring up to date the remembered roots that hold these paths (files or folders, changed or
        gone), as a plain `index` run does for them: after an edit of a note file (`edit`). A path
        under no remembered root is an InvalidInputError."""
        from memsearch.ingest.indexing import index_notes

        within = check_paths(paths)
        if not within:
            raise InvalidInputError("are missing: give the changed files or folders", field="paths")
        return index_notes(
            self, progress=check_progress(progress), within=within, on_progress=check_on_progress(on_progress)
        )

    def watch(
        self,
        paths: Iterable[str | os.PathLike[str]] = (),
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        on_progress: OnProgress | None = None,
    ) -> Iterator[IndexOutcome]:
        """Index as `index` does, then keep the roots in step with their files: one outcome for the
        first run, then one per batch of changes (see memsearch.ingest.watching), until `stop` is
        set or the caller is interrupted. The `paths` given stay named roots (read whoever owns
        them) in every update; with none, every remembered root is checked as `index` checks it."""
        from memsearch.ingest.watching import watch_notes

        store_files = [str(self.path)] if isinstance(self.path, Path) else []
        return watch_notes(
            self,
            check_paths(paths),
            include=check_patterns("include", include),
            exclude=check_patterns("exclude", exclude),
            progress=check_progress(progress),
            stop=stop,
            on_progress=check_on_progress(on_progress),
            store_files=store_files,
        )

    def roots(self) -> list[RootInfo]:
        """The remembered roots of the notes index, by path, each with its patterns, its `state` (ok;
        missing; refused, with the `reason`, when a plain `index` would pass it over as another
        user's to write) and how many files and memories the store holds from it."""
        from memsearch.ingest.roots import list_roots

        return list_roots(self)

    def forget_roots(self, paths: Iterable[str | os.PathLike[str]]) -> Forgotten:
        """Forget remembered roots and delete the memories of their files (those another remembered
        root also covers stay). A path that is not a remembered root: NotARootError, nothing changed.
        The roots are named: one another user could write is forgotten too (nothing is read)."""
        from memsearch.ingest.roots import forget_roots

        return forget_roots(self, check_paths(paths))

    def prune_roots(self) -> Forgotten:
        """Forget every remembered root that is missing (moved, unmounted), with its memories."""
        from memsearch.ingest.roots import prune_roots

        return prune_roots(self)
