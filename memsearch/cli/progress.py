"""Progress on stderr: a bar for the library's (done, total) callbacks, and an index run's
events (`IndexReporter`) as a bar, plain lines or JSON lines."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from memsearch.cli.consoles import messages
from memsearch.ingest.progress import IndexProgress

LONG_JOB = 200  # items: a shorter job shows no bar


class ProgressBar:
    """Shown only for long jobs (LONG_JOB items or more) and only on a terminal; it starts at the
    first report. `description` may change between reports (eval names the run it measures); with
    `then`, a report that starts over after a finished count is a second step of that name (an
    import's search index, made after its embedding)."""

    def __init__(self, description: str, then: str | None = None) -> None:
        self.description = description
        self.then = then
        self.bar: Any = None
        self.task: Any = None
        self.last = (0, -1)

    def __call__(self, done: int, total: int) -> None:
        if self.then is not None and self.last[0] >= self.last[1] >= 0 and done < total:
            self.description, self.then = self.then, None
        self.last = (done, total)
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=messages(),
                transient=True,
                disable=total < LONG_JOB,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=total)
        self.bar.update(self.task, completed=done, total=total, description=self.description)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.stop()


PLAIN_SECONDS = 5.0  # plain progress: a line this often once a run has lasted this long (and at each phase's start)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "time left unknown"
    seconds = round(seconds)
    if seconds < 60:
        return f"about {seconds} s left"
    minutes, seconds = divmod(seconds, 60)
    return (
        f"about {minutes} min {seconds:02d} s left"
        if minutes < 60
        else f"about {minutes // 60} h {minutes % 60} min left"
    )


def progress_line(event: IndexProgress) -> str:
    """`index: storing 120/550 files, 1,203 chunks; vectors 0/1,203; 40.1 files/s, about 11 s left`."""
    if event.phase == "search index":
        line = f"index: building the search index, {event.indexed:,}/{event.index_total:,} vectors"
        rate = event.rate
        return line + (f"; {rate:,.0f} vectors/s, {_duration(event.remaining)}" if rate is not None else "")
    doing = "storing" if event.phase == "store" else "embedding" if event.phase == "vectors" else "done"
    line = (
        f"index: {doing} {event.files_done:,}/{event.files_total:,} files, {event.chunks_stored:,} chunks; "
        f"vectors {event.vectors_done:,}/{event.vectors_total:,}"
    )
    if event.phase != "done":
        rate = event.rate
        line += f"; {rate:,.1f} {event.unit}/s, {_duration(event.remaining)}" if rate is not None else ""
    return line


class IndexReporter:
    """Renders an index run's progress events on stderr (`--progress`): a Rich bar (`bar`), a plain
    line every PLAIN_SECONDS once the run has lasted that long, and at each phase's start after
    (`plain`), every event as a JSON line (`json`), or nothing (`none`); `auto` is a bar on a
    terminal, plain lines elsewhere. It keeps the last event: what an interrupted run kept (`kept`)."""

    def __init__(self, style: str) -> None:
        if style == "auto":
            style = "bar" if messages().is_terminal else "plain"
        self.style = style
        self.last: IndexProgress | None = None
        self.printed_at = float("-inf")
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, event: IndexProgress) -> None:
        phase_changed = self.last is None or self.last.phase != event.phase
        self.last = event
        if self.style == "json":
            sys.stderr.write(json.dumps({"event": "progress", **event.to_dict()}) + "\n")
            sys.stderr.flush()
        elif self.style == "plain":  # quiet for a run of a few seconds; then a line every PLAIN_SECONDS
            now = time.monotonic()
            long_run = event.elapsed >= PLAIN_SECONDS
            due = now - self.printed_at >= PLAIN_SECONDS or (phase_changed and self.printed_at > float("-inf"))
            if event.phase != "done" and long_run and due:
                self.printed_at = now
                messages().print(progress_line(event), markup=False)
        elif self.style == "bar":
            self._bar(event, phase_changed)

    def _bar(self, event: IndexProgress, phase_changed: bool) -> None:
        if event.phase == "done":
            self.close()
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                console=messages(), transient=True,
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("")
        if event.phase == "store":
            description, done, total = (
                f"storing files ({event.chunks_stored:,} chunks)",
                event.files_done,
                event.files_total,
            )
        elif event.phase == "search index":
            description, done, total = "building the search index", event.indexed, event.index_total
        else:
            description, done, total = "embedding", event.vectors_done, event.vectors_total
        if phase_changed:
            self.bar.reset(self.task)
        self.bar.update(self.task, completed=done, total=max(total, 1), description=description)

    def kept(self) -> str:
        """What an interrupted run kept, by the last commit it reported."""
        if self.last is None:
            return "nothing was stored yet"
        return self.last.kept

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self) -> IndexReporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
