"""`memsearch eval`: retrieval measured on a benchmark. The only CLI module that imports
memsearch.eval (the product's commands never do)."""

from pathlib import Path
from typing import Annotated

import typer

from memsearch.choices import GRANULARITIES
from memsearch.cli.consoles import messages
from memsearch.cli.options import (
    DatasetFormat,
    Granularity,
    Mode,
    ModelOption,
    ReportFormat,
)
from memsearch.cli.progress import ProgressBar
from memsearch.errors import InvalidInputError


def eval_(
    dataset: Annotated[Path, typer.Argument(help="A LoCoMo or LongMemEval JSON file.", dir_okay=False)],
    dataset_format: Annotated[
        DatasetFormat, typer.Option("--dataset-format", "-d", help="The dataset's format: locomo or longmemeval.")
    ],
    profile: Annotated[
        list[str] | None, typer.Option("--profile", "-p", help="A profile to measure (repeatable). Default: all.")
    ] = None,
    mode: Annotated[list[Mode] | None, typer.Option("--mode", "-m", help="A mode (repeatable). Default: auto.")] = None,
    granularity: Annotated[
        list[Granularity] | None,
        typer.Option("--granularity", "-g", help="turn and/or session (repeatable). Default: both."),
    ] = None,
    # One flag, not --baseline/--no-baseline: a pair takes a help column of its own, which at 80
    # columns leaves the help text too narrow for its longer words.
    no_baseline: Annotated[bool, typer.Option("--no-baseline", help="Skip the plain BM25 baseline.")] = False,
    strata: Annotated[
        bool,
        typer.Option(
            "--strata",
            help="Also R@5/R@10 by category and stratum: whether the evidence dates something "
            "(dated/undated) and the question's shape (when, how long, how many, which date).",
        ),
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Only the first N conversations (or questions).", min=1)
    ] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="table, or json for machines.")] = "table",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the report to this file instead of stdout.", dir_okay=False),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw the recall@k curves and the per-category bars to this .svg or .png file "
            '(needs pip install "memsearch[plot]").',
            dir_okay=False,
        ),
    ] = None,
    model: ModelOption = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Measure on this postgresql:// store (empty; emptied after each conversation)."),
    ] = None,
) -> None:
    """Measure retrieval on a benchmark: Recall@k and NDCG@k per category, latency, side by side."""
    from memsearch.eval.report import REPORT_FORMATS, check_target, render_report, write_report
    from memsearch.eval.runner import run_eval
    from memsearch.profiles import available

    if not dataset.is_file():
        raise InvalidInputError(f"cannot read {dataset}: no such file")
    if output is not None:  # -o once meant --format: `-o json` now asks for the format by its name
        if output.name in REPORT_FORMATS:
            name = output.name
            raise InvalidInputError(f"-o/--output names the report's file; for the {name} format use -f {name}")
        check_target(output)
    if plot is not None:
        from memsearch.eval.plot import check_plot_target

        check_plot_target(plot)  # a missing matplotlib or a bad name fails now, not after the run
    names = profile or list(available())
    with ProgressBar("eval") as bar:

        def progress(label: str, done: int, total: int) -> None:
            bar.description = f"eval {label}"
            bar(done, total)

        report = run_eval(
            dataset,
            fmt=str(dataset_format),
            profiles=names,
            modes=[str(m) for m in mode or ["auto"]],
            granularities=[str(g) for g in granularity or GRANULARITIES],
            baselines=not no_baseline,
            limit=limit,
            model=model,
            progress=progress,
            db=db,
        )
    if output is None:
        render_report(report, str(fmt), strata=strata)
    else:
        with output.open("w", encoding="utf-8") as file:
            write_report(report, str(fmt), file, strata=strata)
        messages().print(f"wrote the report to {output}", markup=False)
    if plot is not None:
        from memsearch.eval.plot import plot_report

        plot_report(report, plot)
        messages().print(f"wrote the plot to {plot}", markup=False)
