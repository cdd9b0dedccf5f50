"""The registered validation of ``crl advise`` on fresh cells (docs/advisor.md, "Registered validation").

    .venv/bin/python -m studies.advisor_validation plan                  # points, cells, cost, power; runs nothing
    .venv/bin/python -m studies.advisor_validation pilot --data fashion  # the pilot cells (resumable, 1 worker)
    .venv/bin/python -m studies.advisor_validation predict --data fashion  # predictions.json and its SHA-256
    .venv/bin/python -m studies.advisor_validation truth --data fashion  # the truth cells (refused before predict)
    .venv/bin/python -m studies.advisor_validation score --data fashion  # the table against the targets

Per data set: the advisor's own cells (:func:`crl.advise.pilot.pilot_cells`, the recipe map at E = 10, the config's
batch 256 as its cap, SSCRL over a fixed pool, the whole locked test split scored) at the points (N, M) of
:func:`points` with seeds 5813..5816 (S = 4, the calibration's), stored in
``results/advisor_validation/DATA/advise.sqlite`` (the sweep store: a rerun computes only what is missing). A
truth cell that is also another point's pilot cell (the same (n, m) at N) is the same 4 runs, as in the
calibration; the others (all of 2N, and (N, 2M) above the pilot's m) run only after ``predict`` wrote the
predictions. Prediction at a point: D_hat with the interval D_hat +- q scale at the frozen q
(:data:`crl.advise.answer.Q`); truth: the measured D = mean err(2N, M) - mean err(N, 2M) with its Welch 95%
interval (decisive when it excludes 0).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from crl.advise.answer import Q
from crl.advise.heldout import EvalSizes, default_metric
from crl.advise.local import Cell, local_estimate, measured_difference, pilot_points, truth_points
from crl.advise.pilot import pilot_cells, run_pilot
from crl.advise.session import errors_of
from crl.sweep import SweepStore
from crl.train.config import TrainConfig, load_config
from crl.train.locked import train_shape
from studies.arguments import OneLineParser, json_object, rows_of

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "advisor_validation"
SEEDS = (5813, 5814, 5815, 5816)
EPOCHS = 10
LADDERS = (4, 12, 20)
"""The points' M: every b 2^k (k >= 0) with M <= N / 2, for b in LADDERS."""


@dataclass(frozen=True)
class DataSet:
    """One validation data set: its config (and overrides), N, and the time model's constants (seconds per step
    fixed and per negative, from the committed grids' wall times of the same features)."""

    config: str
    overrides: tuple[str, ...]
    n: int
    per_step: float
    per_negative: float


DATA: dict[str, DataSet] = {
    "fashion": DataSet("configs/advise_fashion_locked.toml", (), 16000, 5.2e-3, 1.13e-5),
    "wordnet": DataSet("configs/advise_wordnet_locked.toml", (), 16000, 4.6e-3, 1.35e-5),
    "cnn": DataSet(
        "configs/advise_fashion_locked.toml",
        ('data.backbone="cnn"', 'data.backbone_path="results/mstar_real/fashion_cnn/backbone"'),
        16000,
        4.0e-3,
        1.0e-5,
    ),
    "bible": DataSet("configs/advise_bible_locked.toml", (), 8000, 4.6e-3, 1.35e-5),
}
TARGET = 0.8
MIN_DECISIVE = 15


def points(n: int) -> tuple[int, ...]:
    """The points' M at N = n: b 2^k <= n / 2 for b in :data:`LADDERS`, increasing."""
    found = {base << k for base in LADDERS for k in range(32) if base << k <= n // 2}
    return tuple(sorted(found))


def cells(n: int) -> tuple[tuple[Cell, ...], tuple[Cell, ...]]:
    """(pilot cells, truth cells that are not pilot cells) of every point, each sorted."""
    pilot = {cell for m in points(n) for cell in pilot_points(n, m)}
    truth = {cell for m in points(n) for cell in truth_points(n, m)} - pilot
    return tuple(sorted(pilot)), tuple(sorted(truth))


def config_of(name: str) -> TrainConfig:
    """The data set's config with its overrides."""
    data = DATA[name]
    return load_config(ROOT / data.config, list(data.overrides))


def estimated_hours(name: str, chosen: Sequence[Cell]) -> float:
    """CPU-hours of ``chosen`` x 4 seeds: 2 s + steps (per_step + per_negative m) per run."""
    data = DATA[name]
    seconds = sum(
        2.0 + train_shape(n, EPOCHS, 256).steps * (data.per_step + data.per_negative * m) for n, m in chosen
    )
    return len(SEEDS) * seconds / 3600


def power(points_count: int, decisive: int, true_rate: float = 0.9) -> tuple[float, float]:
    """P(coverage >= 80% of the points) and P(agreement >= 80% of ``decisive`` cells) at a true rate, binomial."""

    def passing(total: int) -> float:
        needed = -(-int(TARGET * total * 1000) // 1000)
        return float(stats.binom.sf(needed - 1, total, true_rate))

    return passing(points_count), passing(decisive)


def _store(name: str) -> SweepStore:
    return SweepStore(OUT / name / "advise.sqlite")


def run(name: str, chosen: Sequence[Cell]) -> None:
    """Run the chosen cells the store lacks, one worker, a line per finished cell."""
    config = config_of(name)
    metric = default_metric(config)
    todo = pilot_cells(config, chosen, SEEDS, EPOCHS, metric, EvalSizes(queries=0))
    with _store(name) as store:
        run_pilot(
            store, todo, workers=1, progress=lambda done, total: print(f"{name}: {done}/{total}", flush=True)
        )


def _errors(name: str) -> dict[Cell, list[float]]:
    with _store(name) as store:
        return errors_of(store.records("advise"))


def predict(name: str) -> str:
    """Write the predictions of every point from the pilot cells; return the file's SHA-256.

    Raises:
        RuntimeError: if a pilot cell lacks a seed (run ``pilot`` first).
    """
    n = DATA[name].n
    errors = _errors(name)
    pilot, _ = cells(n)
    short = [cell for cell in pilot if len(errors.get(cell, ())) < len(SEEDS)]
    if short:
        raise RuntimeError(
            f"{name}: {len(short)} pilot cells lack runs, e.g. {short[0]}; run `pilot --data {name}`"
        )
    rows = []
    for m in points(n):
        estimate = local_estimate(errors, n, m)
        low, high = estimate.interval(Q)
        rows.append(
            {
                "n": n,
                "m": m,
                "d_hat": estimate.d_hat,
                "d_back": estimate.d_back,
                "drift": estimate.drift,
                "se_a": estimate.se_a,
                "se_b": estimate.se_b,
                "low": low,
                "high": high,
                "double": "m" if estimate.d_hat > 0 else "n",
            }
        )
    path = OUT / name / "predictions.json"
    document = {"data": name, "q": Q, "seeds": list(SEEDS), "epochs": EPOCHS, "points": rows}
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return hashlib.sha256(path.read_bytes()).hexdigest()


PREDICTION_FIELDS = ("n", "m", "d_hat", "low", "high")
"""The numbers :func:`score` reads of each point of predictions.json."""


def predictions(name: str) -> list[dict]:
    """The points of the data set's predictions.json, each holding :data:`PREDICTION_FIELDS` as numbers.

    Raises:
        ValueError: naming the file (and the point and field) when it is missing or malformed, and the step that
            writes it.
    """
    path = OUT / name / "predictions.json"
    made_by = f"python -m studies.advisor_validation predict --data {name}"
    return rows_of(json_object(path, made_by), "points", PREDICTION_FIELDS, path, made_by)


def score(name: str) -> dict[str, object]:
    """Coverage, direction agreement and the constants over the points whose truth cells are all run.

    Raises:
        ValueError: when predictions.json is missing or malformed (:func:`predictions`).
    """
    points = predictions(name)
    errors = _errors(name)
    rows = []
    for row in points:
        n, m = row["n"], row["m"]
        if any(len(errors.get(cell, ())) < len(SEEDS) for cell in truth_points(n, m)):
            continue
        truth = measured_difference(errors, n, m)
        rows.append(
            {
                **row,
                "measured": truth.value,
                "measured_low": truth.low,
                "measured_high": truth.high,
                "decisive": truth.decisive,
                "covered": row["low"] <= truth.value <= row["high"],
            }
        )
    decisive = [r for r in rows if r["decisive"]]
    agree = sum((r["d_hat"] > 0) == (r["measured"] > 0) for r in decisive)
    always_m = sum(r["measured"] > 0 for r in decisive)
    return {
        "data": name,
        "points_scored": len(rows),
        "points": len(points),
        "covered": sum(r["covered"] for r in rows),
        "decisive": len(decisive),
        "agree": agree,
        "always_m": always_m,
        "always_n": len(decisive) - always_m,
        "rows": rows,
    }


def _plan() -> None:
    print("| data | N | points | pilot cells | truth cells after predict | CPU-h pilot | CPU-h truth |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = 0.0
    for name, data in DATA.items():
        pilot, truth = cells(data.n)
        hours = estimated_hours(name, pilot), estimated_hours(name, truth)
        total += sum(hours)
        print(
            f"| {name} | {data.n:,} | {len(points(data.n))} | {len(pilot)} x 4 | {len(truth)} x 4 | "
            f"{hours[0]:.2f} | {hours[1]:.2f} |"
        )
    print(f"total {total:.1f} CPU-h")
    for count in (27, 30):
        for decisive in (15, 20, 25):
            cover, direction = power(count, decisive)
            print(
                f"power at a true 90%: {count} points -> {cover:.3f}; {decisive} decisive -> {direction:.3f}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m studies.advisor_validation", description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("plan", "pilot", "predict", "truth", "score"))
    parser.add_argument("--data", choices=tuple(DATA), default=None)
    args = parser.parse_args(argv)
    if args.step == "plan":
        _plan()
        return
    if args.data is None:
        parser.error(f"{args.step} needs --data (one of {', '.join(DATA)})")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Deferred: torch loads only for the steps that train.
    import torch

    torch.set_num_threads(1)
    pilot, truth = cells(DATA[args.data].n)
    if args.step == "pilot":
        run(args.data, pilot)
    elif args.step == "predict":
        print(f"{OUT / args.data / 'predictions.json'} sha256 {predict(args.data)}")
    elif args.step == "truth":
        if not (OUT / args.data / "predictions.json").exists():
            parser.error(
                f"no predictions for {args.data}: run `predict --data {args.data}` and commit them first"
            )
        run(args.data, sorted(truth, key=lambda cell: (cell[1], cell[0])))
    else:
        try:
            result = score(args.data)
        except ValueError as error:
            parser.error(str(error))
        (OUT / args.data / "score.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print({key: value for key, value in result.items() if key != "rows"})


if __name__ == "__main__":
    main()
