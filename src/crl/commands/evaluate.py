"""``crl eval CHECKPOINT``: held-out retrieval and classification figures of a trained checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from crl.commands._console import output_console
from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from crl.metrics.class_report import ClassRow, PairedDifference
    from crl.serving.evaluate import EvalResult


def evaluate(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the JSON (default: RUN_DIR/eval.json).")
    ] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
) -> None:
    """Held-out retrieval (accuracy@k, MRR, nDCG@10, MAP, AUC), class retrieval and kNN / probe accuracy."""
    raise typer.Exit(eval_command(checkpoint, out=out, device=device))


def eval_command(checkpoint: Path, *, out: Path | None = None, device: str = "auto") -> int:
    """Run ``crl eval``: print the table and write the JSON (default: the run folder's eval.json)."""

    def body() -> int:
        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.serving.evaluate import evaluate_checkpoint

        result = evaluate_checkpoint(checkpoint, device=device)
        target = out if out is not None else result.checkpoint.parent.parent / "eval.json"
        target.write_text(json.dumps(result.as_dict(), indent=1), encoding="utf-8")
        console = output_console()
        console.print(result_table(result))
        for note in result.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        console.print(f"checkpoint: {result.checkpoint}", markup=False, highlight=False)
        console.print(f"written to {target}", markup=False, highlight=False)
        return EXIT_OK

    return run_reporting_errors(body)


def result_table(result: EvalResult) -> Table:
    """The figures of an evaluation as a rich table (mean ± standard error where there is one; class accuracies
    with their 95% interval, and in a third column their paired difference from the raw-pixel baseline with its
    95% interval and what that interval says: above, below, or no difference resolved)."""
    table = Table(title=f"crl eval (step {result.step})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if result.classes and any(row.vs_pixels is not None for row in result.classes):
        table.add_column("vs pixels: paired difference [95% CI]")
    report = result.retrieval
    table.add_row("queries / gallery", f"{report.n_queries} / {report.gallery_size}")
    rows = [(f"accuracy@{k}", e) for k, e in report.accuracy_at_k.items()] + [("MRR", report.mrr)]
    rows += [(f"nDCG@{k}", e) for k, e in report.ndcg_at_k.items()]
    rows += [("MAP", report.mean_average_precision), ("AUC E(s)", report.auc)]
    for name, estimate in rows:
        table.add_row(name, f"{estimate.mean:.4f} ± {estimate.se:.4f}")
    for name, value in (result.class_retrieval or {}).items():
        table.add_row(f"class retrieval {name}", f"{value:.4f}")
    if result.classes:
        for row in result.classes:
            table.add_row(*_class_row_cells(row))
        return table
    if result.knn_accuracy is not None:
        table.add_row("kNN accuracy", f"{result.knn_accuracy:.4f}")
    if result.probe_accuracy is not None:
        table.add_row("linear-probe accuracy", f"{result.probe_accuracy:.4f}")
    return table


def _class_row_cells(row: ClassRow) -> tuple[str, str, str]:
    """('kNN accuracy, backbone', '0.8712 [0.8646, 0.8776]', '+0.0107 [+0.0052, +0.0162]: above pixels')."""
    method = "kNN accuracy" if row.method == "knn" else "linear-probe accuracy"
    interval = row.interval
    value = f"{interval.accuracy:.4f} [{interval.low:.4f}, {interval.high:.4f}]"
    delta = row.vs_pixels
    if delta is None:
        return f"{method}, {row.features}", value, ""
    compared = f"{delta.difference:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}]: {paired_verdict(delta)}"
    return f"{method}, {row.features}", value, compared


def paired_verdict(delta: PairedDifference) -> str:
    """What the paired difference's interval says: "above pixels" when it lies above 0, "below pixels" when
    below, else "no difference resolved" (it holds 0)."""
    if delta.low > 0:
        return "above pixels"
    if delta.high < 0:
        return "below pixels"
    return "no difference resolved"
