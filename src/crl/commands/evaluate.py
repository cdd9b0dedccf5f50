"""``crl eval CHECKPOINT``: held-out retrieval and classification figures of a trained checkpoint; for a text run,
retrieval with qrels beside the model it started from, and a TREC run of its ranking."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from crl.commands._console import output_console
from crl.commands._errors import EXIT_OK, run_reporting_errors
from crl.commands._progress import announce_import, stages_on_stderr
from crl.commands.embed import VECTORS_HELP
from crl.metrics.trec import write_run

PIXELS = "pixels"
"""The raw baseline's name in the JSON and the class rows (:data:`crl.metrics.class_report.PIXELS`)."""

if TYPE_CHECKING:
    from crl.data.text import RetrievalTask
    from crl.metrics.baselines import BaselineComparison
    from crl.metrics.class_report import ClassRow
    from crl.serving.evaluate import EvalResult
    from crl.serving.text_evaluate import TextEvalResult


def evaluate(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the JSON (default: RUN_DIR/eval.json).")
    ] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
    queries: Annotated[
        Path | None,
        typer.Option(
            help='Text runs: your queries, .jsonl ({"_id", "text"}) or .tsv (id<TAB>text), BEIR\'s layout.'
        ),
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option(help='Text runs: your corpus, .jsonl ({"_id", "title", "text"}) or .tsv (id<TAB>text).'),
    ] = None,
    qrels: Annotated[
        Path | None,
        typer.Option(
            help="Text runs: relevance of --corpus ids to --queries ids, TREC qrels or BEIR's qrels TSV."
        ),
    ] = None,
    trec_run: Annotated[
        Path | None,
        typer.Option(
            help="Text runs: where to write the fine-tuned model's ranking as a TREC run (default: "
            "RUN_DIR/eval.trec)."
        ),
    ] = None,
    vectors: Annotated[str | None, typer.Option(help=VECTORS_HELP)] = None,
) -> None:
    """Held-out retrieval (accuracy@k, MRR, nDCG@10, MAP, AUC), class retrieval and kNN / probe accuracy beside the
    raw pixels and their PCA; for a text run, retrieval on its test split (or --queries/--corpus/--qrels) beside
    its zero-shot starting model."""
    files = TaskFiles(queries, corpus, qrels)
    raise typer.Exit(
        eval_command(checkpoint, out=out, device=device, files=files, trec_run=trec_run, vectors=vectors)
    )


@dataclass(frozen=True)
class TaskFiles:
    """The ``--queries``, ``--corpus`` and ``--qrels`` of ``crl eval``: all three, or none."""

    queries: Path | None = None
    corpus: Path | None = None
    qrels: Path | None = None

    def given(self) -> list[str]:
        """The options given, e.g. ``["--queries", "--qrels"]``."""
        return [f"--{name}" for name, path in vars(self).items() if path is not None]

    def name(self) -> str:
        """``--queries Q --corpus C --qrels R``, the task's name in the table and the JSON."""
        return " ".join(f"--{name} {path}" for name, path in vars(self).items())

    def task(self) -> RetrievalTask | None:
        """The task of the three files (``None`` when none is given).

        Raises:
            ValueError: if only some are given (naming the missing ones), or a file is bad (naming it).
        """
        if not self.given():
            return None
        if self.queries is None or self.corpus is None or self.qrels is None:
            missing = [f"--{name}" for name, path in vars(self).items() if path is None]
            raise ValueError(
                f"{' and '.join(missing)} missing: a task of your own is --queries, --corpus and --qrels together "
                "(or none of them for the run's test split)"
            )
        # Deferred: it imports the text data sources (torch), which `crl --help` does not need.
        from crl.metrics.task_files import read_task

        return read_task(self.queries, self.corpus, self.qrels)


def eval_command(
    checkpoint: Path,
    *,
    out: Path | None = None,
    device: str = "auto",
    files: TaskFiles | None = None,
    trec_run: Path | None = None,
    vectors: str | None = None,
) -> int:
    """Run ``crl eval`` with ``vectors`` ('h', 'z', or None for the run's choice): print the tables and write the
    JSON (default: the run folder's eval.json) and, for a text run, the TREC run (default: the run folder's
    eval.trec)."""
    chosen = files if files is not None else TaskFiles()

    def body() -> int:
        with stages_on_stderr():
            announce_import(f"crl eval {checkpoint}: importing torch (a few seconds)")
            # Deferred: it loads torch and faiss, which `crl --help` does not need.
            from crl.serving.evaluate import evaluate_checkpoint

            # Deferred: it loads torch, which `crl --help` does not need.
            from crl.serving.text_evaluate import TextEvalResult

            text_only = chosen.given() + (["--trec-run"] if trec_run is not None else [])
            task = chosen.task()
            result = evaluate_checkpoint(
                checkpoint,
                device=device,
                task=task,
                task_name=chosen.name(),
                text_only=text_only,
                vectors=vectors,
            )
        run_dir = result.checkpoint.parent.parent
        target = out if out is not None else run_dir / "eval.json"
        console = output_console()
        if isinstance(result, TextEvalResult):
            ranking = trec_run if trec_run is not None else run_dir / "eval.trec"
            _write_text_result(result, target, ranking)
            console.print(text_result_table(result))
            console.print(f"TREC run: {ranking}", markup=False, highlight=False)
        else:
            target.write_text(json.dumps(result.as_dict(), indent=1), encoding="utf-8")
            if result.vectors is not None:
                console.print(result.vectors.describe(), markup=False, highlight=False)
            console.print(result_table(result))
            if result.baselines is not None:
                console.print(baselines_table(result.baselines, result.raw_inputs))
            for note in result.notes:
                console.print(f"note: {note}", markup=False, highlight=False)
        console.print(f"checkpoint: {result.checkpoint}", markup=False, highlight=False)
        console.print(f"written to {target}", markup=False, highlight=False)
        return EXIT_OK

    return run_reporting_errors(body)


def _write_text_result(result: TextEvalResult, target: Path, ranking: Path) -> None:
    """The JSON of a text evaluation, and the fine-tuned model's TREC run tagged with its step."""
    target.write_text(json.dumps(result.as_dict(), indent=1), encoding="utf-8")
    write_run(ranking, result.trec_run(), tag=f"crl-step-{result.step}")


def text_result_table(result: TextEvalResult) -> Table:
    """Each metric of the fine-tuned and the zero-shot model on the same queries, and their paired difference
    (fine-tuned minus zero-shot) with its bootstrap interval and what that interval says."""
    task = result.task
    table = Table(
        title=escape(
            f"crl eval (step {result.step}): {len(task.queries)} queries, {len(task.corpus)} documents, "
            f"{result.task_name}"
        )
    )
    for column in ("metric", "fine-tuned", "zero-shot"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    table.add_column("fine-tuned - zero-shot [95% CI]")
    table.caption = result.fine_tuned.report.definitions_note()
    fine_tuned, zero_shot = result.fine_tuned.report.as_flat_dict(), result.zero_shot.report.as_flat_dict()
    for name, difference in result.differences.items():
        verdict = paired_verdict(difference.low, difference.high, "zero-shot")
        compared = f"{difference.delta:+.4f} [{difference.low:+.4f}, {difference.high:+.4f}]: {verdict}"
        table.add_row(name, f"{fine_tuned[name]:.4f}", f"{zero_shot[name]:.4f}", compared)
    return table


def result_table(result: EvalResult) -> Table:
    """The figures of an evaluation as a rich table (mean ± standard error where there is one; class accuracies
    with their 95% interval, and in a third column their paired difference from the raw baseline (the pixels, or
    the raw inputs of other arrays) with its 95% interval and what that interval says: above, below, or no
    difference resolved)."""
    table = Table(title=f"crl eval (step {result.step})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if result.classes and any(row.vs_pixels is not None for row in result.classes):
        table.add_column(f"vs {result.raw_inputs}: paired difference [95% CI]")
    report = result.retrieval
    table.add_row("queries / gallery", f"{report.n_queries} / {report.gallery_size}")
    rows = [(f"accuracy@{k}", e) for k, e in report.accuracy_at_k.items()] + [("MRR", report.mrr)]
    rows += [(f"nDCG@{k}", e) for k, e in report.ndcg_at_k.items()]
    rows += [("MAP", report.mean_average_precision), ("AUC E(s)", report.auc)]
    for name, estimate in rows:
        table.add_row(name, f"{estimate.mean:.4f} ± {estimate.se:.4f}")
    for name, value in (result.class_retrieval or {}).items():
        if not name.startswith("recall@"):
            table.add_row(f"class retrieval {name}", f"{value:.4f}")
    if result.classes:
        for row in result.classes:
            table.add_row(*_class_row_cells(row, result.raw_inputs))
        return table
    if result.knn_accuracy is not None:
        table.add_row("kNN accuracy", f"{result.knn_accuracy:.4f}")
    if result.probe_accuracy is not None:
        table.add_row("linear-probe accuracy", f"{result.probe_accuracy:.4f}")
    return table


def baselines_table(comparison: BaselineComparison, raw: str) -> Table:
    """The learned vectors beside the pixels (called ``raw``: "raw inputs" for arrays that are not images) and
    their PCA on the test queries searching the training items: each figure, and learned minus each baseline with
    its paired bootstrap interval and what that interval says."""
    learned = comparison.learned
    table = Table(
        title=f"test queries searching the training items: vectors {learned.name} ({learned.dimension}-d) against "
        "their input"
    )
    table.add_column("figure")
    table.add_column(f"{learned.name}", justify="right")
    shown = {baseline.name: _raw_named(baseline.name, raw) for baseline in comparison.baselines}
    for baseline in comparison.baselines:
        table.add_column(f"{shown[baseline.name]} ({baseline.dimension}-d)", justify="right")
        table.add_column(f"{learned.name} - {shown[baseline.name]} [{comparison.level:.0%} CI]")
    means = {baseline.name: baseline.means() for baseline in comparison.baselines}
    for figure, value in learned.means().items():
        cells = [figure, f"{value:.4f}"]
        for baseline in comparison.baselines:
            difference = comparison.differences[baseline.name][figure]
            verdict = paired_verdict(difference.low, difference.high, shown[baseline.name])
            cells += [
                f"{means[baseline.name][figure]:.4f}",
                f"{difference.delta:+.4f} [{difference.low:+.4f}, {difference.high:+.4f}]: {verdict}",
            ]
        table.add_row(*cells)
    return table


def _class_row_cells(row: ClassRow, raw: str) -> tuple[str, str, str]:
    """('kNN accuracy, backbone', '0.8712 [0.8646, 0.8776]', '+0.0107 [+0.0052, +0.0162]: above pixels'), the
    raw baseline called ``raw``."""
    method = "kNN accuracy" if row.method == "knn" else "linear-probe accuracy"
    interval = row.interval
    value = f"{interval.accuracy:.4f} [{interval.low:.4f}, {interval.high:.4f}]"
    features = _raw_named(row.features, raw)
    delta = row.vs_pixels
    if delta is None:
        return f"{method}, {features}", value, ""
    verdict = paired_verdict(delta.low, delta.high, raw)
    compared = f"{delta.difference:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}]: {verdict}"
    return f"{method}, {features}", value, compared


def _raw_named(features: str, raw: str) -> str:
    """``features`` as the tables show it: the raw baseline (``"pixels"``) called ``raw``."""
    return raw if features == PIXELS else features


def paired_verdict(low: float, high: float, baseline: str) -> str:
    """What a paired difference's interval [low, high] says: "above BASELINE" when it lies above 0, "below
    BASELINE" when below, else "no difference resolved" (it holds 0)."""
    if low > 0:
        return f"above {baseline}"
    if high < 0:
        return f"below {baseline}"
    return "no difference resolved"
