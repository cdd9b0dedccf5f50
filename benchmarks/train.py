"""Pairs per second of crl's Trainer against a minimal plain-PyTorch loop doing the same work, in one run.

For each example config (configs/fashion_sscrl.toml, configs/fashion_scrl.toml), shortened to ``--steps`` steps
(``--scrl-steps`` for the SCRL config), both loops use the same pair source (Fashion-MNIST views), the same model
(crl.models via build_model), the same loss (crl.objectives.contrastive_loss), AdamW with the same schedule and
gradient clipping, and the same batch:

- ``crl``: ``Trainer(config).fit()`` with everything a real run does: progress bar, metrics.jsonl and
  TensorBoard every ``--log-every`` steps (one .item() each), run folder, and the final checkpoint;
- ``plain``: a bare loop: permutation, views, forward, (negatives), loss, backward, clip, step.

Two rates per loop: **steady** (steps after the first ``--log-every``, i.e. without start-up; for crl from the
intervals of metrics.jsonl, which include any checkpoint written in them) and **end-to-end** (from building the
model to the end, crl's final checkpoint included). The loops alternate ``--repeats`` times (plain first, then
crl first, ...) and the best rate of each is kept. Nothing is asserted: this prints a table.

Run: ``.venv/bin/python benchmarks/train.py [--steps 60] [--scrl-steps 20] [--repeats 3] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from itertools import pairwise
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from crl.data import PairSource
from crl.objectives import contrastive_loss
from crl.train.build import build_model, build_optimizer, build_schedule
from crl.train.config import TrainConfig, load_config, parse_config
from crl.train.data import build_source
from crl.train.streams import derive_generator
from crl.train.trainer import Trainer

CONFIGS = ("configs/fashion_sscrl.toml", "configs/fashion_scrl.toml")


def shortened(path: str, steps: int, log_every: int, out_dir: Path, threads: int) -> TrainConfig:
    """The example config cut to ``steps`` steps, logging every ``log_every``, no mid-run checkpoint."""
    data = load_config(path).model_dump()
    data["optim"].update(total_steps=steps, warmup_steps=min(data["optim"]["warmup_steps"], steps))
    data["run"].update(
        out_dir=str(out_dir), log_every=log_every, checkpoint_every=steps, num_threads=threads, progress=True
    )
    return parse_config(data)


def time_crl(config: TrainConfig, source: PairSource) -> tuple[float, float]:
    """(steady pairs/s, end-to-end pairs/s) of the Trainer."""
    shutil.rmtree(config.run_dir, ignore_errors=True)
    start = time.perf_counter()
    Trainer(config, source=source).fit()
    total = time.perf_counter() - start
    rows = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    pairs_per_row = [
        (row["step"] - previous["step"]) * config.data.batch_size for previous, row in pairwise(rows)
    ]
    seconds = [pairs / row["pairs_per_s"] for pairs, row in zip(pairs_per_row, rows[1:], strict=True)]
    return sum(pairs_per_row) / sum(seconds), config.optim.total_steps * config.data.batch_size / total


def time_plain(config: TrainConfig, source: PairSource) -> tuple[float, float]:
    """(steady pairs/s, end-to-end pairs/s) of a bare PyTorch loop doing the same work."""
    start = time.perf_counter()
    loss_config, b, seed = config.loss, config.data.batch_size, config.run.seed
    model = build_model(
        config.model, loss_config, source.anchor_shape, source.positive_shape, derive_generator(seed, "init")
    )
    optimizer = build_optimizer(model, config.optim)
    schedule = build_schedule(optimizer, config.optim)
    order, views, draws = (derive_generator(seed, name) for name in ("order", "views", "negatives"))
    permutation, position = torch.randperm(source.n_pairs, generator=order), 0
    steady_start, warm = start, config.run.log_every
    for step in range(config.optim.total_steps):
        if step == warm:
            steady_start = time.perf_counter()
        if position + b > source.n_pairs:
            permutation, position = torch.randperm(source.n_pairs, generator=order), 0
        x, y = source.pairs(permutation[position : position + b], views)
        position += b
        anchors, positives = model(x, y)
        if loss_config.negatives == "independent_pool":
            indices = torch.randint(source.n_pairs, (b * loss_config.n_negatives,), generator=draws)
            negatives = model.encode_positives(source.positives(indices, draws)).view(
                b, loss_config.n_negatives, -1
            )
            loss = contrastive_loss(
                anchors, positives, negatives, tau=model.tau(), form=loss_config.form, regime="independent"
            )
        else:
            loss = contrastive_loss(
                anchors,
                positives,
                None,
                tau=model.tau(),
                form=loss_config.form,
                symmetric=loss_config.symmetric,
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
        optimizer.step()
        schedule.step()
    float(loss)
    end = time.perf_counter()
    steady_pairs = (config.optim.total_steps - warm) * b
    return steady_pairs / (end - steady_start), config.optim.total_steps * b / (end - start)


def main() -> None:
    """Parse the arguments, time both loops for each config, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=60, help="steps per timed run of a shared-regime config")
    parser.add_argument("--log-every", type=int, default=10, help="crl logging interval (also the warm-up)")
    parser.add_argument("--scrl-steps", type=int, default=20, help="steps per timed run of an SCRL config")
    parser.add_argument("--scrl-log-every", type=int, default=5, help="logging interval of an SCRL config")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats; the best rate is kept")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out_dir = Path(tempfile.mkdtemp(prefix="crl-bench-"))
    table = Table(
        title=f"crl Trainer vs plain PyTorch loop ({args.threads} thread(s), best of {args.repeats})"
    )
    for column in ("config", "steps x batch", "rate", "plain pairs/s", "crl pairs/s", "crl overhead"):
        table.add_column(column, justify="left" if column in ("config", "rate") else "right")
    for path in args.configs:
        scrl = load_config(path).loss.regime == "independent"
        steps, log_every = (args.scrl_steps, args.scrl_log_every) if scrl else (args.steps, args.log_every)
        config = shortened(path, steps, log_every, out_dir, args.threads)
        source = build_source(config.data, seed=config.run.seed)
        crl_rates, plain_rates = [], []
        for repeat in range(args.repeats):  # alternate the order too, so neither loop always runs first
            if repeat % 2 == 0:
                plain_rates.append(time_plain(config, source))
            crl_rates.append(time_crl(config, source))
            if repeat % 2 == 1:
                plain_rates.append(time_plain(config, source))
        for index, rate in enumerate(("steady", "end-to-end")):
            plain = max(r[index] for r in plain_rates)
            ours = max(r[index] for r in crl_rates)
            table.add_row(
                Path(path).stem,
                f"{steps} x {config.data.batch_size}",
                rate,
                f"{plain:.1f}",
                f"{ours:.1f}",
                f"{100 * (plain / ours - 1):+.1f}%",
            )
    shutil.rmtree(out_dir, ignore_errors=True)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
