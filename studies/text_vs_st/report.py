"""The study's result: both arms run, their figures put together with the paired bootstrap differences crl - st,
the registered criterion, and the Markdown table."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from crl.data.text import item_ids
from crl.metrics.ir import IRReport
from crl.metrics.text_retrieval import Difference, compare_reports
from crl.models.minilm import resolve_model_path
from crl.train.config import load_config
from crl.train.data import text_pairs
from studies.text_vs_st.arms import fail, pick_device, run_arm
from studies.text_vs_st.plan import (
    ARMS,
    BATCHES,
    KS,
    MARGIN,
    MEMORY_MEASURE,
    MIB,
    NEGATIVES,
    RESULT,
    SPLITS,
    Plan,
    batch_sequence,
    check_matchable,
    extra_overrides,
    heldout_task,
    sequence_hash,
    shared_item_rows,
)


def report_of(figures: dict[str, Any]) -> IRReport:
    """The :class:`IRReport` of an arm's written figures (means and per-query values)."""
    values: dict[str, dict[int, float]] = {}
    per_query: dict[str, dict[int, np.ndarray]] = {}
    for key, items in figures["per_query"].items():
        name, k = key.split("@")
        values.setdefault(name, {})[int(k)] = figures["metrics"][key]
        per_query.setdefault(name, {})[int(k)] = np.asarray(items, dtype=np.float64)
    return IRReport(values, figures["n_queries"], figures["n_skipped"], per_query)


def versions() -> dict[str, str]:
    """The versions of the libraries the arms ran."""
    # Read from package metadata: importing sentence-transformers in the driver would cost seconds.
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "transformers", "sentence-transformers")}


def table(result: dict[str, Any]) -> str:
    """The arms' metrics, times and memory, then crl - st with its interval, as a Markdown table."""
    order = [f"{name}@{k}" for name, ks in KS.items() for k in ks]
    names = sorted(
        result["crl_minus_st"], key=lambda name: order.index(name) if name in order else len(order)
    )
    lines = [
        "| arm | "
        + " | ".join(names)
        + " | steps | s/step (median) | s/step (mean) | peak RSS growth (MiB) |",
        "|" + "---|" * (len(names) + 5),
    ]
    for arm in ARMS:
        figures = result["arms"][arm]
        seconds, memory = figures["seconds_per_step"], figures["memory"]
        lines.append(
            f"| {arm} | "
            + " | ".join(f"{figures['metrics'][name]:.4f}" for name in names)
            + f" | {figures['steps']} | {seconds['median']:.3f} | {seconds['mean']:.3f} | "
            f"{memory['peak_rss_growth_bytes'] / MIB:.0f} |"
        )
    cells = [result["crl_minus_st"][name] for name in names]
    lines.append(
        "| crl - st [95% CI] | "
        + " | ".join(f"{d['delta']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]" for d in cells)
        + " |  |  |  |  |"
    )
    return "\n".join(lines)


def compare(args: argparse.Namespace, command: str) -> tuple[Path, dict[str, Any]]:
    """Plan the batches, run both arms, and put their figures and the paired differences together: the folder
    written to and the result."""
    overrides = [*extra_overrides(args.extra, args.negatives, args.chunk), *args.set]
    if args.steps is not None:
        overrides.append(f"optim.total_steps={args.steps}")
    config = load_config(args.config, overrides)
    data = check_matchable(config)
    folder = args.out if args.out is not None else Path("runs/text_vs_st") / f"{config.run.name}-{args.extra}"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (NEGATIVES, RESULT, *(f"arm-{name}.json" for name in ARMS)):
        (folder / stale).unlink(missing_ok=True)
    pairs = text_pairs(data, "train")
    batches = batch_sequence(len(pairs), data.batch_size, config.optim.total_steps, config.run.seed)
    np.save(folder / BATCHES, batches)
    plan = Plan(
        str(args.config),
        tuple(overrides),
        SPLITS[args.split],
        args.queries,
        args.corpus,
        args.minutes or 0.0,
        args.prefill,
        str(folder),
    )
    plan_path = plan.save()
    for name in ARMS:
        run_arm(name, plan_path)
    arms = {name: json.loads(plan.path(f"arm-{name}.json").read_text()) for name in ARMS}
    steps = arms["crl"]["steps"]
    planned = sequence_hash(batches[:steps])
    for name, figures in arms.items():
        if figures["batches_sha256"] != planned:
            fail(f"the {name} arm trained on other batches than the planned {BATCHES}")
    differences: dict[str, Difference] = compare_reports(report_of(arms["st"]), report_of(arms["crl"]))
    shared = shared_item_rows(item_ids(pairs).numpy(), batches[:steps])
    return folder, {
        "command": command,
        "config": str(args.config),
        "overrides": overrides,
        "extra": args.extra,
        "split": args.split,
        "n_queries": arms["crl"]["n_queries"],
        "n_documents": len(heldout_task(data, plan).corpus),
        "steps": steps,
        "batch_size": data.batch_size,
        "batch_sequence_sha256": planned,
        "batches_with_shared_items": int((shared > 0).sum()),
        "rows_with_shared_items": int(shared.sum()),
        "matched": {
            "initial_weights": str(resolve_model_path(getattr(config.model, "path", ""))),
            "optim": config.optim.model_dump(),
            "tau": config.loss.tau,
            "scale": 1.0 / config.loss.tau,
            "symmetric": config.loss.symmetric,
            "seed": config.run.seed,
            "max_seq_length": data.max_seq_length,
            "num_threads": config.run.num_threads,
            "device": str(pick_device(config)),
            "precision": config.run.precision,
        },
        "memory_measure": MEMORY_MEASURE,
        "versions": versions(),
        "arms": arms,
        "crl_minus_st": {name: asdict(difference) for name, difference in differences.items()},
        "criterion": criterion(differences),
    }


def criterion(differences: dict[str, Difference]) -> dict[str, Any]:
    """Issue 29's test of crl against ST: is the lower end of the 95% interval of crl - st in nDCG@10 above
    -:data:`MARGIN`? (``met`` is None when the corpus is too small for nDCG@10.)"""
    found = differences.get("ndcg@10")
    return {
        "statement": f"lower end of the 95% CI of crl - st in nDCG@10 > -{MARGIN}",
        "lower": None if found is None else found.low,
        "met": None if found is None else found.low > -MARGIN,
    }
