"""What one CPU text fine-tuning step costs, and whether it uses every core: crl's step beside
sentence-transformers' own loss, at the same batch and torch thread count.

Arms, each in a fresh subprocess (its own torch thread pool):

- ``crl``: crl's :class:`crl.train.loop.TrainingLoop` on ``configs/wordnet_minilm.toml`` (MiniLM, symmetric in-batch
  InfoNCE, tau 0.05) with ``data.batch_size = --batch`` and ``run.num_threads = T``;
- ``st``: sentence-transformers' MultipleNegativesRankingLoss (scale 1/tau, both directions, as
  ``studies.text_vs_st`` matches it) on a SentenceTransformer of the same weights and max_seq_length, in a plain torch
  loop (AdamW, the config's schedule), on the same batches: the pair indices of crl's data cursor, drawn from the
  same seeded stream. ``SentenceTransformer.fit`` itself needs the ``datasets`` package, which crl does not
  install; its trainer calls this same loss.

Per arm: one untimed step (AdamW allocates its state), then ``--steps`` timed steps: the median s/step, pairs/s =
batch / median, the CPU seconds a step used (what it costs, less sensitive to other jobs than the wall time), and
the CPU time the process used per second of wall time over the timed steps (about T when T threads are busy: the
check that a step uses both cores of a 2-core machine), beside ``torch.get_num_threads()`` inside the step. Nothing
is asserted: this prints. The machine's load average is printed with the table, as a shared machine inflates the
times.

Run: ``.venv/bin/python benchmarks/text_cores.py [--batch 32] [--steps 3] [--threads 1 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "wordnet_minilm.toml"


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    times = os.times()
    return times.user + times.system


def _timed(step: Callable[[], object], steps: int) -> dict[str, float]:
    """One untimed step, then ``steps`` timed ones: median wall seconds, CPU seconds per step (the mean) and CPU
    seconds per wall second."""
    step()
    walls, cpu_before, wall_before = [], _cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        started = time.perf_counter()
        step()
        walls.append(time.perf_counter() - started)
    cpu = _cpu_seconds() - cpu_before
    wall = time.perf_counter() - wall_before
    return {"s_per_step": statistics.median(walls), "cpu_per_step": cpu / steps, "cpu_per_wall": cpu / wall}


def crl_arm(batch: int, threads: int, steps: int) -> dict[str, float]:
    """crl's training step on the WordNet config at ``batch`` pairs and ``threads`` torch threads."""
    # Deferred: each arm runs in its own process, which imports only its own library.
    import torch

    from crl.train.build import Streams
    from crl.train.config import load_config
    from crl.train.data import build_source
    from crl.train.loop import TrainingLoop

    overrides = [f"data.batch_size={batch}", f"run.num_threads={threads}", "run.eval_every=0"]
    config = load_config(CONFIG, overrides)
    torch.set_num_threads(threads)
    source = build_source(config.data, seed=config.run.seed, split="train")
    loop = TrainingLoop(config, source, Streams.derive(config.run.seed, rank=0, regime=config.loss.regime))
    seen: list[int] = []

    def step() -> None:
        loop.train_step()
        seen.append(torch.get_num_threads())

    return _timed(step, steps) | {"threads_in_step": float(seen[-1]), "n_pairs": float(source.n_pairs)}


def st_arm(batch: int, threads: int, steps: int) -> dict[str, float]:
    """sentence-transformers' MNRL step on the same model, pairs, batch and threads, in a plain torch loop."""
    # Deferred: each arm runs in its own process, which imports only its own library.
    import torch
    from sentence_transformers import SentenceTransformer

    from crl.models.minilm import resolve_model_path
    from crl.train.build import Streams, build_optimizer, build_schedule
    from crl.train.config import TextData, load_config
    from crl.train.cursor import DataCursor
    from crl.train.data import text_pairs
    from studies.text_vs_st.plan import st_loss

    config = load_config(CONFIG, [f"data.batch_size={batch}"])
    data = config.data
    assert isinstance(data, TextData)
    torch.set_num_threads(threads)
    pairs = text_pairs(data, "train")
    model = SentenceTransformer(str(resolve_model_path("")), device="cpu")
    model.max_seq_length = data.max_seq_length
    model.train()
    loss_fn = st_loss(config, model)
    optimizer = build_optimizer(model, config.optim)
    schedule = build_schedule(optimizer, config.optim)
    streams = Streams.derive(config.run.seed, rank=0, regime=config.loss.regime)
    cursor, seen = DataCursor(len(pairs), batch, streams.order), []

    def step() -> None:
        rows = [pairs[int(i)] for i in cursor.next_batch()]
        features = [model.preprocess([p.query for p in rows]), model.preprocess([p.positive for p in rows])]
        loss = loss_fn(features, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
        optimizer.step()
        schedule.step()
        seen.append(torch.get_num_threads())

    return _timed(step, steps) | {"threads_in_step": float(seen[-1]), "n_pairs": float(len(pairs))}


ARMS = {"crl": crl_arm, "st": st_arm}


def _run_arm(arm: str, batch: int, threads: int, steps: int) -> dict[str, float]:
    """One arm in a fresh interpreter; its JSON result."""
    command = [sys.executable, __file__, "--arm", arm, "--batch", str(batch), "--steps", str(steps)]
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    environment = os.environ | {"PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [*command, "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=environment,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Every arm at every thread count, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--arm", choices=sorted(ARMS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm is not None:
        print(json.dumps(ARMS[args.arm](args.batch, args.threads[0], args.steps)))
        return
    load = os.getloadavg()
    print(
        f"batch {args.batch}, {args.steps} timed steps per arm, {os.cpu_count()} CPUs, load {load[0]:.2f} at start"
    )
    print(
        "arm | threads | s/step (median) | pairs/s | CPU s/step | CPU s per wall s | torch threads in the step"
    )
    for threads in args.threads:
        rows = {arm: _run_arm(arm, args.batch, threads, args.steps) for arm in ARMS}
        if len({row["n_pairs"] for row in rows.values()}) != 1:
            raise SystemExit(f"the arms read different training splits: {rows}; their batches would differ")
        for arm, row in rows.items():
            pairs = args.batch / row["s_per_step"]
            print(
                f"{arm} | {threads} | {row['s_per_step']:.2f} | {pairs:.1f} | {row['cpu_per_step']:.2f} | "
                f"{row['cpu_per_wall']:.2f} | "
                f"{int(row['threads_in_step'])}"
            )
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
