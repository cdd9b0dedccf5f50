"""The fixed pool's cliff against the head's width d (docs/mstar_real.md, "The fixed pool's cliff").

    .venv/bin/python -m studies.fixed_pool_cliff                     # prints the table
    .venv/bin/python -m studies.fixed_pool_cliff --out-md results/mstar_real/cliff/cliff.md \
        --out-json results/mstar_real/cliff/cliff.json

Reads the truth folders ``results/mstar_real/cliff/d_D`` of ``crl advise --mstar-truth 4000`` at
``model.embedding_dim = D`` (read-only, through :func:`crl.advise.mstar_score.load_truth`; no cell trained). Per d,
the seed-mean error e(m) over the grid's m; m_cliff is the right end of the largest drop e(m_i) - e(m_{i+1})
between consecutive grid m. The three registered predictions: (1) 2d <= m_cliff <= 8d at every d; (2)
m_cliff(d_max) / m_cliff(d_min) >= 4; (3) at every d but the largest, e(the grid m just below m_cliff) > e(1).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl.advise.mstar_score import load_truth
from studies.arguments import report_main

ROOT = Path(__file__).resolve().parents[1]
FOLDER = Path("results/mstar_real/cliff")
WIDTHS = (32, 64, 128, 256)
N = 4000
GROWTH = 4.0
HEADER = (
    "# The fixed pool's cliff against the head's width, scored",
    "",
    "Written by `python -m studies.fixed_pool_cliff --out-md results/mstar_real/cliff/cliff.md --out-json "
    "results/mstar_real/cliff/cliff.json` from the truth folders `results/mstar_real/cliff/d_D` (read-only); the "
    'registration is docs/mstar_real.md, "The fixed pool\'s cliff". Exploratory: the pattern was seen before.',
    "",
)


@dataclass(frozen=True)
class Cliff:
    """One width's curve: the seed-mean error per m, the cliff's right end, its depth, the peak before it."""

    width: int
    curve: dict[int, float]
    m_cliff: int
    depth: float
    before: float
    at_one: float

    @property
    def in_band(self) -> bool:
        """Prediction 1: 2d <= m_cliff <= 8d."""
        return 2 * self.width <= self.m_cliff <= 8 * self.width

    @property
    def rises(self) -> bool:
        """Prediction 3's part at this d: the error just below the cliff is above the error at m = 1."""
        return self.before > self.at_one


def cliff_of(width: int, curve: Mapping[int, float]) -> Cliff:
    """m_cliff and its depth from the seed-mean curve m -> e(m) (at least two m).

    Raises:
        ValueError: naming the width when the curve has fewer than two m.
    """
    ms = sorted(curve)
    if len(ms) < 2:
        raise ValueError(f"d = {width}: the curve has {len(ms)} grid m; a drop needs at least 2")
    drops = [curve[a] - curve[b] for a, b in itertools.pairwise(ms)]
    where = int(np.argmax(drops))
    return Cliff(width, dict(curve), ms[where + 1], drops[where], curve[ms[where]], curve[ms[0]])


def curve_at(folder: Path, n: int = N) -> dict[int, float]:
    """The seed-mean error at n per m of a truth folder's store."""
    truth = load_truth(folder)
    return {m: float(np.mean(list(seeds.values()))) for (at, m), seeds in truth.errors.items() if at == n}


@dataclass(frozen=True)
class Verdicts:
    """The three predictions over the widths."""

    band: bool
    growth: float
    rise: bool

    @property
    def growth_met(self) -> bool:
        """Prediction 2: m_cliff(d_max) / m_cliff(d_min) >= 4."""
        return self.growth >= GROWTH


def verdicts(cliffs: Sequence[Cliff]) -> Verdicts:
    """Predictions 1-3 over ``cliffs`` (in order of width)."""
    ordered = sorted(cliffs, key=lambda c: c.width)
    return Verdicts(
        all(c.in_band for c in ordered),
        ordered[-1].m_cliff / ordered[0].m_cliff,
        all(c.rises for c in ordered[:-1]),
    )


def _met(value: bool) -> str:
    return "met" if value else "**FAILED**"


def report(root: Path = ROOT, widths: Sequence[int] = WIDTHS) -> tuple[list[str], dict[str, Any]]:
    """The Markdown lines and the JSON document."""
    cliffs = [cliff_of(d, curve_at(root / FOLDER / f"d_{d}")) for d in widths]
    ms = sorted(cliffs[0].curve)
    lines = [
        f"Seed-mean held-out error (1 - nDCG@10) at n = {N:,}, 3 seeds, per head width d and m:",
        "",
        "| d | " + " | ".join(f"{m:,}" for m in ms) + " | m_cliff | depth | 2d-8d |",
        "|---:|" + "---:|" * len(ms) + "---:|---:|---|",
    ]
    for c in cliffs:
        cells = " | ".join(f"{c.curve[m]:.3f}" if m in c.curve else "-" for m in ms)
        lines.append(
            f"| {c.width} | {cells} | {c.m_cliff:,} | {c.depth:.3f} | "
            f"{2 * c.width:,}-{8 * c.width:,} {'yes' if c.in_band else 'no'} |"
        )
    v = verdicts(cliffs)
    lines += [
        "",
        f"1. m_cliff in [2d, 8d] at every d: {_met(v.band)}.",
        f"2. m_cliff({widths[-1]}) / m_cliff({widths[0]}) = {v.growth:g} (>= {GROWTH:g}): {_met(v.growth_met)}.",
        f"3. the error just below the cliff above the error at m = 1 at d < {widths[-1]}: {_met(v.rise)}.",
    ]
    document = {
        "n": N,
        "cliffs": [asdict(c) | {"in_band": c.in_band, "rises": c.rises} for c in cliffs],
        "verdicts": asdict(v) | {"growth_met": v.growth_met},
    }
    return lines, document


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tables; write them where asked."""
    report_main("python -m studies.fixed_pool_cliff", __doc__.split("\n")[0], HEADER, report, argv)


if __name__ == "__main__":
    main()
