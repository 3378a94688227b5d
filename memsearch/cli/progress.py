"""A progress bar on stderr for the library's (done, total) callbacks."""

from __future__ import annotations

from typing import Any

from memsearch.cli.consoles import messages

LONG_JOB = 200  # items: a shorter job shows no bar


class ProgressBar:
    """Shown only for long jobs (LONG_JOB items or more) and only on a terminal; it starts at the
    first report. `description` may change between reports (eval names the run it measures)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
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
