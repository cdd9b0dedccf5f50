"""The two arms, each run in a fresh Python process (its memory its own): crl's training loop (:func:`crl_arm`) and
sentence-transformers' loss in a plain torch loop (:func:`st_arm`), on the planned batches; each writes its figures."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from benchmarks._rss import peak_rss_bytes, rss_bytes
from torch import Tensor

from crl.data.text import RetrievalTask
from crl.metrics.ir import IRReport
from crl.metrics.text_retrieval import evaluate_retrieval
from crl.models import DualEncoder
from crl.models.minilm import MiniLM, resolve_model_path
from crl.negatives import Draw, EmbeddedBatch, Sampler
from crl.train.build import Streams, build_model, build_optimizer, build_sampler, build_schedule
from crl.train.config import MiniLMModel, TextData, TrainConfig
from crl.train.cursor import DataCursor
from crl.train.data import text_pairs, text_source, text_tokenize
from crl.train.heldout_monitor import text_embedders
from crl.train.loop import TrainingLoop
from studies.text_vs_st.plan import (
    BATCHES,
    KS,
    NEGATIVES,
    Plan,
    batch_columns,
    check_matchable,
    describe_crl_loss,
    describe_st_loss,
    heldout_task,
    sequence_hash,
    st_loss,
)


class RecordingCursor(DataCursor):
    """crl's data cursor, keeping every batch it hands out."""

    def __init__(self, n_pairs: int, global_batch: int, generator: torch.Generator) -> None:
        super().__init__(n_pairs, global_batch, generator)
        self.batches: list[Tensor] = []

    def next_batch(self) -> Tensor:
        """The cursor's next batch, recorded."""
        batch = super().next_batch()
        self.batches.append(batch.clone())
        return batch


class RecordingSampler(Sampler):
    """A sampler that draws as ``inner`` does and keeps each step's (b, m) negative pool indices."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        self.regime = inner.regime
        self.drawn: list[Tensor] = []

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """``inner``'s draw; pool indices are recorded."""
        drawn = self.inner.draw(batch, rng)
        if drawn.kind == "indices" and drawn.y is not None:
            self.drawn.append(drawn.y.detach().cpu().clone())
        return drawn

    def update(self, batch: EmbeddedBatch) -> None:
        """``inner``'s update."""
        self.inner.update(batch)

    def state_dict(self) -> dict[str, Tensor]:
        """``inner``'s state."""
        return self.inner.state_dict()

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """``inner``'s restore."""
        self.inner.load_state_dict(state)


def pick_device(config: TrainConfig) -> torch.device:
    """``[run] device``: CUDA for "cuda" or ("auto" and CUDA available), else the CPU."""
    wanted = config.run.device
    return torch.device(
        "cuda" if wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available()) else "cpu"
    )


class Meter:
    """Seconds of each step, and the memory of training (:data:`MEMORY_MEASURE`; call :meth:`memory` before
    evaluating)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: list[float] = []
        self.values: list[float] = []
        self.rss_before = rss_bytes()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def time(self, step: Callable[[], float]) -> None:
        """Run one step and record its seconds (the device synchronised) and the loss it returns."""
        started = time.perf_counter()
        value = step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.seconds.append(time.perf_counter() - started)
        self.values.append(value)

    def memory(self) -> dict[str, int]:
        """The memory figures of the class docstring."""
        peak = peak_rss_bytes()
        figures = {"peak_rss_bytes": peak, "peak_rss_growth_bytes": peak - self.rss_before}
        if self.device.type == "cuda":
            figures["cuda_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(self.device))
        return figures


def evaluate(model: DualEncoder, config: TrainConfig, task: RetrievalTask, device: torch.device) -> IRReport:
    """:data:`KS` of ``model`` on ``task`` in eval mode, embedded as ``crl eval`` embeds (longest texts first,
    ``[eval] batch_size`` at a time)."""
    assert isinstance(config.data, TextData)
    model.eval()
    embedders = text_embedders(
        model, text_tokenize(config.data), batch_size=config.eval.batch_size, device=device
    )
    return evaluate_retrieval(task, *embedders, ks=KS).report


def arm_figures(
    loss: str, batches: np.ndarray, meter: Meter, memory: dict[str, int], report: IRReport
) -> dict[str, Any]:
    """What an arm writes: its loss, steps, the hash of the batches it trained on, step times, memory, metrics
    and per-query values (for the paired bootstrap)."""
    return {
        "loss": loss,
        "steps": len(meter.seconds),
        "batches_sha256": sequence_hash(batches),
        "seconds_per_step": {
            "median": statistics.median(meter.seconds),
            "mean": statistics.fmean(meter.seconds),
        },
        "step_seconds": meter.seconds,
        "losses": meter.values,
        "memory": memory,
        "n_queries": report.n_queries,
        "n_skipped": report.n_skipped,
        "metrics": report.as_flat_dict(),
        "per_query": {
            f"{name}@{k}": values.tolist()
            for name, by_k in report.per_query.items()
            for k, values in by_k.items()
        },
    }


def crl_arm(plan: Plan) -> dict[str, Any]:
    """Train with crl's loop on its own cursor (recorded) until ``[optim] total_steps`` or ``minutes``; score."""
    config = plan.train_config()
    data = check_matchable(config)
    device = pick_device(config)
    torch.set_num_threads(config.run.num_threads)
    source = text_source(data, "train")
    streams = Streams.derive(config.run.seed, regime=config.loss.regime)
    sampler = RecordingSampler(build_sampler(config, source))
    loop = TrainingLoop(config, source, streams, device=device, sampler=sampler)
    cursor = RecordingCursor(source.n_pairs, data.batch_size, streams.order)
    loop.cursor = cursor
    if plan.prefill:
        # The text retrieval study holds the bank prefill and loads its own models: only --prefill needs it.
        from studies.text_retrieval import prefill_bank

        prefill_bank(loop)
    torch.manual_seed(config.run.seed)
    meter = Meter(device)
    deadline = time.perf_counter() + 60 * plan.minutes if plan.minutes > 0 else math.inf
    while not loop.done and (not meter.seconds or time.perf_counter() < deadline):
        meter.time(lambda: float(loop.train_step()))
        progress("crl", loop.step, config, meter)
    memory = meter.memory()
    if sampler.drawn:
        np.save(plan.path(NEGATIVES), torch.stack(sampler.drawn).numpy())
    report = evaluate(loop.model, config, heldout_task(data, plan), device)
    batches = torch.stack(cursor.batches).numpy()
    return arm_figures(describe_crl_loss(config), batches, meter, memory, report)


def progress(arm: str, step: int, config: TrainConfig, meter: Meter) -> None:
    """A line every ``[run] log_every`` steps and at the last."""
    if step % config.run.log_every == 0 or step == config.optim.total_steps:
        print(f"{arm}: step {step}, loss {meter.values[-1]:.4f}, {meter.seconds[-1]:.2f} s", flush=True)


def to_device(features: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """ST's features with every tensor moved to ``device``."""
    return {key: value.to(device) if isinstance(value, Tensor) else value for key, value in features.items()}


def st_arm(plan: Plan) -> dict[str, Any]:
    """Train a SentenceTransformer with :func:`st_loss` on the crl arm's steps of the planned batches (and its
    recorded negatives); score its weights with crl's evaluation."""
    # sentence-transformers is imported here: the crl arm and the driver never load it.
    from sentence_transformers import SentenceTransformer

    config = plan.train_config()
    data = check_matchable(config)
    assert isinstance(config.model, MiniLMModel)
    device = pick_device(config)
    torch.set_num_threads(config.run.num_threads)
    steps = json.loads(plan.path("arm-crl.json").read_text())["steps"]
    batches = np.load(plan.path(BATCHES))[:steps]
    negatives = np.load(plan.path(NEGATIVES))[:steps] if config.loss.negatives != "in_batch" else None
    pairs = text_pairs(data, "train")
    model = SentenceTransformer(str(resolve_model_path(config.model.path)), device=str(device))
    model.max_seq_length = data.max_seq_length
    model.train()
    loss_fn = st_loss(config, model)
    optimizer = build_optimizer(model, config.optim)
    schedule = build_schedule(optimizer, config.optim)
    bf16 = config.run.precision == "bf16"

    def step(columns: list[list[str]]) -> float:
        features = [to_device(model.preprocess(texts), device) for texts in columns]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(features, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
        optimizer.step()
        schedule.step()
        return float(loss.detach())

    torch.manual_seed(config.run.seed)
    meter = Meter(device)
    for t, rows in enumerate(batches):
        columns = batch_columns(pairs, rows, None if negatives is None else negatives[t])
        meter.time(partial(step, columns))
        progress("st", t + 1, config, meter)
    memory = meter.memory()
    report = evaluate(crl_model_with(model, config, data, device), config, heldout_task(data, plan), device)
    return arm_figures(describe_st_loss(config), batches, meter, memory, report)


def crl_model_with(st_model: Any, config: TrainConfig, data: TextData, device: torch.device) -> DualEncoder:
    """crl's model of ``config`` holding the transformer weights of a SentenceTransformer (same architecture),
    so both arms are scored by the same code."""
    shape = (data.max_seq_length,)
    model = build_model(config.model, config.loss, shape, shape, Streams.derive(config.run.seed).init)
    backbone = model.anchor_encoder.backbone
    assert isinstance(backbone, MiniLM)
    backbone.transformer.load_state_dict(st_model[0].auto_model.state_dict())
    return model.to(device)


def fail(message: str) -> NoReturn:
    """Exit with status 2 and one line on stderr, as the crl commands do."""
    print(f"studies.text_vs_st: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def study_environment() -> dict[str, str]:
    """This process's environment with the repository's root first on PYTHONPATH, so that an arm's own process
    imports ``studies`` from any working folder (relative paths of the plan keep their meaning)."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_arm(arm: str, plan_path: Path) -> None:
    """One arm in a fresh Python process (its memory its own).

    Raises:
        SystemExit: naming the arm when its process fails (its output is above).
    """
    command = [sys.executable, "-m", "studies.text_vs_st", "--arm", arm, "--plan", str(plan_path)]
    done = subprocess.run(command, check=False, env=study_environment())
    if done.returncode != 0:
        fail(f"the {arm} arm failed (exit {done.returncode}); see its output above")
