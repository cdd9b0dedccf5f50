"""The advisor checked against the m*(n) experiment (docs/advisor.md section 6): its sessions on locked features
against the measured in-sample grid of the same recipe.

For one ``crl advise`` session (its output folder) and the experiment's records: the measured errors of the
in-sample arm in the session's regime, error = 1 - the data set's primary metric per finished seed
(:func:`measured_errors`); the held-out cells are those with n above the pilot's largest n; coverage and
direction by :mod:`crl.advise.validate`. :func:`advisor_section` renders it for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crl.advise.validate import direction_agreement, heldout_coverage, load_session
from crl.experiments.mstar.design import DataName
from crl.experiments.mstar.summary import METRICS
from crl.sweep import CellRecord

__all__ = ["advisor_check", "advisor_section", "measured_errors"]


def measured_errors(
    records: Sequence[CellRecord], data: DataName, regime: str
) -> dict[tuple[int, int], list[float]]:
    """(n, m) -> 1 - the primary metric of each finished seed of the in-sample arm in ``regime``."""
    metric = METRICS[data][0]
    cells: dict[tuple[int, int], list[float]] = {}
    for record in records:
        params = record.cell.params
        if params.get("arm") != "in_sample" or params.get("regime") != regime:
            continue
        if record.result.get("status") != "ok":
            continue
        key = (int(params["n"]), int(params["m"]))
        cells.setdefault(key, []).append(1.0 - float(record.result[metric]))
    return cells


def advisor_check(records: Sequence[CellRecord], data: DataName, session_dir: str | Path) -> dict[str, Any]:
    """Coverage on the held-out cells (n above the pilot's) and the direction agreement, for one session.

    Raises:
        ValueError: if the grid holds no cell beyond the pilot's largest n (nothing held out yet).
    """
    session = load_session(session_dir)
    measured = measured_errors(records, data, session.regime)
    pilot_n_max = session.reach["pilot_n_max"]
    held_out = {key: values for key, values in measured.items() if key[0] > pilot_n_max}
    if not held_out:
        raise ValueError(
            f"the m*(n) store holds no in-sample {session.regime} cell above the pilot's n = {pilot_n_max}; run "
            "the full grid first"
        )
    coverage = heldout_coverage(session.fit, held_out)
    direction = direction_agreement(session, measured)
    advice = session.document["advice"]
    return {
        "session": str(session_dir),
        "regime": session.regime,
        "pilot_n_max": pilot_n_max,
        "coverage": coverage.as_dict(),
        "direction": direction.as_dict(),
        "local_supported": advice.get("local_supported"),
        "local_answer": advice.get("local_answer"),
        "recommendation": advice.get("recommendation"),
        "model": advice.get("model"),
    }


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def advisor_section(checks: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown lines: per session, coverage and direction against their targets (>= 80% each), with the
    constant-answer controls, and the session's answers."""
    lines = [
        "## The advisor against this grid (docs/advisor.md section 6)",
        "",
        "| session | regime | held-out cells | coverage of 90% intervals | median \\|pred/meas - 1\\| | "
        "direction cells (decisive) | agreement | always m | always n |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for check in checks:
        coverage, direction = check["coverage"], check["direction"]
        lines.append(
            f"| {check['session']} | {check['regime']} | {len(coverage['cells'])} | {_share(coverage['coverage'])} | "
            f"{100 * coverage['median_abs_relative_error']:.1f}% | {direction['cells']} ({direction['decisive']}) | "
            f"{_share(direction['agreement'])} | {_share(direction['always_m'])} | {_share(direction['always_n'])} |"
        )
    lines.append("")
    for check in checks:
        lines += [f"- {check['session']}: {check['local_answer']} {check['recommendation']}", ""]
    return lines
