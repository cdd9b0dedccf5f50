"""The fixed pool's cliff against the head's width d (docs/mstar_real.md, "The fixed pool's cliff").

    .venv/bin/python -m studies.fixed_pool_cliff                     # prints the table
    .venv/bin/python -m studies.fixed_pool_cliff --out-md results/mstar_real/cliff/cliff.md \
        --out-json results/mstar_real/cliff/cliff.json

Reads the truth folders ``results/mstar_real/cliff/d_D`` of ``crl advise --mstar-truth 4000`` at
``model.embedding_dim = D`` (read-only, through :func:`crl.advise.mstar_score.load_truth`; no cell trained). Per d,
the seed-mean error e(m) over the grid's m; m_cliff is the right end of the largest drop e(m_i) - e(m_{i+1})
between consecutive grid m. The three registered predictions: (1) 2d <= m_cliff <= 8d at every d; (2)
m_cliff(d_max) / m_cliff(d_min) >= 4; (3) at every d but the largest, e(the grid m just below m_cliff) > e(1).
The batch follow-up (``results/mstar_real/cliff/b_B``, ``data.batch_size = B``): (4) b <= m_cliff <= 4b at each b
measured, b = 256 read from the d = 128 folder; (5) m_cliff(128) < 512.
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
BATCHES = (128, 64)
"""The batch follow-up's b (``--set data.batch_size=B``, head width the config's 128), in the order they run."""
CONFIG_BATCH = 256
"""The configs' batch, which the width grid trained at n = 4,000 (its d = 128 folder is the batch grid's b = 256)."""
MOVED_BELOW = 512
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


def _table_head(varied: str, ms: Sequence[int], band: str) -> list[str]:
    """The header of a curve table: the varied value, one column per grid m, m_cliff, depth and the band."""
    return [
        f"| {varied} | " + " | ".join(f"{m:,}" for m in ms) + f" | m_cliff | depth | {band} |",
        "|---:|" + "---:|" * len(ms) + "---:|---:|---|",
    ]


def _table_row(value: int, cliff: Cliff, ms: Sequence[int], band: str) -> str:
    """One curve's row: its seed-mean error at each grid m ("-" where not run), m_cliff, depth and ``band``."""
    cells = " | ".join(f"{cliff.curve[m]:.3f}" if m in cliff.curve else "-" for m in ms)
    return f"| {value} | {cells} | {cliff.m_cliff:,} | {cliff.depth:.3f} | {band} |"


def in_batch_band(cliff: Cliff, batch: int) -> bool:
    """Prediction 4 at batch b: b <= m_cliff <= 4b."""
    return batch <= cliff.m_cliff <= 4 * batch


def batch_cliffs(root: Path = ROOT) -> dict[int, Cliff | None]:
    """b -> the cliff of the batch grid at b (None: its folder has no truth yet), b = 256 from the width grid."""
    found: dict[int, Cliff | None] = {}
    for batch in BATCHES:
        folder = root / FOLDER / f"b_{batch}"
        found[batch] = cliff_of(batch, curve_at(folder)) if (folder / "truth.json").is_file() else None
    found[CONFIG_BATCH] = cliff_of(CONFIG_BATCH, curve_at(root / FOLDER / "d_128"))
    return found


def batch_lines(cliffs: dict[int, Cliff | None], ms: Sequence[int]) -> tuple[list[str], dict[str, Any]]:
    """The batch follow-up's table and predictions 4 and 5 (docs/mstar_real.md)."""
    lines = [
        "",
        f"The batch follow-up: d = 128, n = {N:,}, 3 seeds, per batch b and m (b = {CONFIG_BATCH}: the d = 128 row):",
        "",
        *_table_head("b", ms, "b-4b"),
    ]
    for batch, cliff in sorted(cliffs.items()):
        if cliff is None:
            lines.append(f"| {batch} | " + " | ".join("-" for _ in ms) + " | not measured | - | - |")
            continue
        band = "yes" if in_batch_band(cliff, batch) else "no"
        lines.append(_table_row(batch, cliff, ms, f"{batch:,}-{4 * batch:,} {band}"))
    measured = {b: c for b, c in cliffs.items() if c is not None}
    band_met = all(in_batch_band(c, b) for b, c in measured.items())
    moved = cliffs.get(BATCHES[0])
    lines += [
        "",
        f"4. m_cliff in [b, 4b] at each b measured ({', '.join(map(str, sorted(measured)))}): {_met(band_met)}.",
        f"5. m_cliff({BATCHES[0]}) < {MOVED_BELOW}: "
        + ("not measured." if moved is None else f"{moved.m_cliff:,}, {_met(moved.m_cliff < MOVED_BELOW)}."),
    ]
    document = {
        "batches": {str(b): None if c is None else asdict(c) for b, c in cliffs.items()},
        "band_met": band_met,
        "moved": None if moved is None else moved.m_cliff < MOVED_BELOW,
    }
    return lines, document


def report(root: Path = ROOT, widths: Sequence[int] = WIDTHS) -> tuple[list[str], dict[str, Any]]:
    """The Markdown lines and the JSON document."""
    cliffs = [cliff_of(d, curve_at(root / FOLDER / f"d_{d}")) for d in widths]
    ms = sorted(cliffs[0].curve)
    lines = [
        f"Seed-mean held-out error (1 - nDCG@10) at n = {N:,}, 3 seeds, per head width d and m:",
        "",
        *_table_head("d", ms, "2d-8d"),
    ]
    for c in cliffs:
        band = f"{2 * c.width:,}-{8 * c.width:,} {'yes' if c.in_band else 'no'}"
        lines.append(_table_row(c.width, c, ms, band))
    v = verdicts(cliffs)
    lines += [
        "",
        f"1. m_cliff in [2d, 8d] at every d: {_met(v.band)}.",
        f"2. m_cliff({widths[-1]}) / m_cliff({widths[0]}) = {v.growth:g} (>= {GROWTH:g}): {_met(v.growth_met)}.",
        f"3. the error just below the cliff above the error at m = 1 at d < {widths[-1]}: {_met(v.rise)}.",
    ]
    more, batch_document = batch_lines(batch_cliffs(root), ms)
    document = {
        "n": N,
        "cliffs": [asdict(c) | {"in_band": c.in_band, "rises": c.rises} for c in cliffs],
        "verdicts": asdict(v) | {"growth_met": v.growth_met},
        "batch": batch_document,
    }
    return [*lines, *more], document


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tables; write them where asked."""
    report_main("python -m studies.fixed_pool_cliff", __doc__.split("\n")[0], HEADER, report, argv)


if __name__ == "__main__":
    main()
