"""crl's text fine-tuning step beside sentence-transformers' MultipleNegativesRankingLoss: one batch sequence, two arms.

    python benchmarks/text_vs_st.py configs/wordnet_minilm.toml --out runs/text_vs_st/wordnet
    python benchmarks/text_vs_st.py configs/wordnet_minilm.toml --extra gradcache --chunk 32 \\
        --set data.batch_size=512 --out runs/text_vs_st/wordnet-gradcache
    python benchmarks/text_vs_st.py configs/wordnet_minilm.toml --extra hard-negatives --negatives 3 --prefill

What it measures. Two copies of the same pretrained MiniLM ([model] path; '' is the packaged all-MiniLM-L6-v2)
are fine-tuned on the same batches and scored on the same held-out split:

- **crl**: crl's own step, as ``crl train`` takes it for the config (:class:`crl.train.loop.TrainingLoop`: the
  config's loss, negatives, false-negative mask, GradCache, AdamW, schedule and clipping);
- **st**: sentence-transformers' loss (:func:`st_loss`) on a ``SentenceTransformer`` of the same folder, called
  from a plain torch loop (ST's Trainer needs ``accelerate`` and ``datasets``, which the project does not install).

Reported for each arm: nDCG@10, recall@10 and MRR@10 of the held-out split (``--split validation``, the default;
the test split only with ``--allow-test``), ranked and scored by ``crl eval``'s code (both arms' final weights go
into crl's encoder, :func:`crl.train.heldout_monitor.text_embedders` and
:func:`crl.metrics.text_retrieval.evaluate_retrieval`, formulas in :mod:`crl.metrics.ir`); the paired bootstrap
95% interval of crl - st for each metric (:func:`crl.metrics.text_retrieval.compare_reports`: delta = (1/Q)
sum_q (crl_q - st_q), 10,000 resamples of the Q queries); seconds per step (median and mean; a step includes
tokenising its batch, in both arms); memory. Each arm runs in a fresh subprocess (``--arm``), so that its
memory is its own: peak resident set size (VmHWM) and its growth over the resident set just before the first
step (AdamW state, gradients and activations; the model and data are loaded before); on CUDA also torch's peak
allocated bytes. The intervals resample queries for one training run of each arm, so they leave out run-to-run
variation (``--set run.seed=...`` repeats the comparison with other batches and dropout masks). The crl arm runs
first; the st arm takes exactly as many steps as the crl arm took (``--minutes`` stops the crl arm early; the
schedule is still that of ``--steps``).

Matched between the arms:

- the batches: ONE sequence B_1..B_T of ``[data] batch_size`` pair indices from crl's data pipeline (the
  :class:`crl.train.cursor.DataCursor` of ``[run] seed``'s "order" stream: a fresh permutation of the n training
  pairs each epoch, cut into consecutive batches, the incomplete last one dropped), written to ``batches.npy``.
  The st arm reads it; the crl arm draws its own and records them; the sha256 of each arm's batches must equal
  that of the file (:func:`sequence_hash`), or the run stops;
- optimiser and schedule: crl's :func:`crl.train.build.build_optimizer` (AdamW, weight decay on matrices only)
  and :class:`crl.train.build.WarmupCosine` (f(t) = (t + 1)/W for t < W, then a cosine to ``min_lr_ratio``) on
  each arm's parameters; the same lr, warm-up W, total steps T and gradient-norm clip;
- the loss: scale = 1/tau; s_ij = cos(f(x_i), f(y_j)) (one shared tower, unit-norm mean pooling);
  one-sided L = (1/n) sum_i [log sum_j exp(s_ij / tau) - s_ii / tau] is MNRL's default; ``[loss] symmetric =
  true`` (the shipped configs) is crl's (L_xy + L_yx) / 2, which MNRL computes with ``directions =
  ("query_to_doc", "doc_to_query")`` and ``partition_mode = "per_direction"`` (what the deprecated
  MultipleNegativesSymmetricRankingLoss is); ``tests/train/test_text_vs_st.py`` checks both equalities and
  their gradients on the same embeddings;
- dropout: ``torch.manual_seed([run] seed)`` just before the first step in each arm; threads, device, precision.

Not matched (each library's own behaviour, kept on purpose): crl leaves false negatives out of an anchor's
negatives (pairs linked by an identical query or positive text share an item id), MNRL scores them as negatives
(the result counts the batches where this happens); ST embeds the two columns in one forward pass padded to the
longer one, crl in two.

Extras (``--extra``; the config is changed by ``--set`` strings, printed and saved):

- ``gradcache``: crl with ``[optim] chunk_size = --chunk`` against ST's CachedMultipleNegativesRankingLoss with
  ``mini_batch_size = --chunk`` (choose a large ``--set data.batch_size``);
- ``hard-negatives``: crl's mined hard negatives (``[loss] negatives = "mined"``, m = ``--negatives`` per anchor,
  one-sided, false negatives masked; ``--prefill`` starts the memory bank from the zero-shot embeddings of the pool
  as benchmarks/text_retrieval.py does, otherwise it fills during training as in ``crl train``). ST's own miner,
  ``sentence_transformers.util.mine_hard_negatives``, needs the ``datasets`` package (it takes and returns a
  ``datasets.Dataset`` and raises ImportError without it), which the project does not install, so it is not run
  here: the st arm gets the very negatives crl's sampler drew at each step (recorded), as the extra columns of an
  (anchor, positive, negative_1..m) n-tuple, the way an ST user passes mined negatives to MNRL;
- ``scrl``: crl's SCRL negatives (``[loss] negatives = "independent_pool"``: m = ``--negatives`` uniform pool
  draws per anchor, one-sided) against MNRL given the same drawn negatives as n-tuple columns. ST has no
  per-anchor regime: MNRL scores every anchor against all positives and all negatives of the batch, while crl's
  SCRL loss scores anchor i against its own m only.

Output: ``--out``/result.json (every figure, both arms' per-query values, the command line) beside the arms' own
files, and a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from torch import Tensor, nn

from _rss import peak_rss_bytes, rss_bytes
from crl.data.text import RetrievalTask, TextPair, item_ids
from crl.metrics.ir import IRReport
from crl.metrics.text_retrieval import Difference, compare_reports, evaluate_retrieval
from crl.models import DualEncoder
from crl.models.minilm import MiniLM, resolve_model_path
from crl.negatives import Draw, EmbeddedBatch, Sampler
from crl.train.build import Streams, build_model, build_optimizer, build_sampler, build_schedule
from crl.train.config import ConfigError, MiniLMModel, TextData, TrainConfig, load_config
from crl.train.cursor import DataCursor
from crl.train.data import HeldOutSplit, text_pairs, text_source, text_task, text_tokenize
from crl.train.heldout_monitor import text_embedders
from crl.train.loop import TrainingLoop

EXTRAS = ("none", "hard-negatives", "gradcache", "scrl")
"""The values of ``--extra``."""

SPLITS: dict[str, HeldOutSplit] = {"validation": "val", "test": "test"}
"""``--split`` -> the name crl's text splits use."""

KS: dict[str, tuple[int, ...]] = {"ndcg": (10,), "recall": (10,), "mrr": (10,)}
"""The metrics reported (lowered to the corpus size when it is smaller, as evaluate_retrieval lowers them)."""

ARMS = ("crl", "st")
MARGIN = 0.01
"""Issue 29's criterion: the lower end of the 95% interval of crl - st in nDCG@10 above -MARGIN (:func:`criterion`)."""

MEMORY_MEASURE = (
    "each arm in its own process, before its evaluation: peak_rss_bytes = VmHWM; peak_rss_growth_bytes = VmHWM "
    "- VmRSS just before the first step (optimiser state, gradients, activations; the model and data were loaded "
    "before); cuda_peak_allocated_bytes = torch.cuda.max_memory_allocated since then (CUDA only)"
)
"""What the memory figures are (written into the result)."""

BATCHES, NEGATIVES, PLAN, RESULT = "batches.npy", "negatives.npy", "plan.json", "result.json"
MIB = 1 << 20


@dataclass(frozen=True)
class Plan:
    """What both arms read: the config and its overrides, the held-out task, the crl arm's time limit and
    whether it prefills the mined bank, and the folder everything is written to."""

    config: str
    overrides: tuple[str, ...]
    split: HeldOutSplit
    queries: int
    corpus: int
    minutes: float
    prefill: bool
    folder: str

    def train_config(self) -> TrainConfig:
        """The config file with the overrides applied (the same validated config in both arms)."""
        return load_config(self.config, list(self.overrides))

    def path(self, name: str) -> Path:
        """A file of this comparison's folder."""
        return Path(self.folder) / name

    def save(self) -> Path:
        """Write the plan as JSON into its folder; its path."""
        path = self.path(PLAN)
        path.write_text(json.dumps(asdict(self), indent=1))
        return path

    @classmethod
    def load(cls, path: Path) -> Plan:
        """A plan written by :meth:`save`."""
        fields = json.loads(path.read_text())
        return cls(**{**fields, "overrides": tuple(fields["overrides"])})


def extra_overrides(extra: str, negatives: int, chunk: int) -> list[str]:
    """The ``--set`` strings an extra applies to the config (both arms read the one config)."""
    if extra == "gradcache":
        return [f"optim.chunk_size={chunk}"]
    if extra in ("hard-negatives", "scrl"):
        kind = "mined" if extra == "hard-negatives" else "independent_pool"
        return [f'loss.negatives="{kind}"', f"loss.n_negatives={negatives}", "loss.symmetric=false"]
    return []


def check_matchable(config: TrainConfig) -> TextData:
    """The text ``[data]`` of a config whose loss sentence-transformers can compute too.

    Raises:
        ValueError: naming every field without an MNRL counterpart, its value and the values that have one.
    """
    data, model, loss = config.data, config.model, config.loss
    if not isinstance(data, TextData):
        raise ValueError(f"[data] source = {data.source!r}; the comparison needs a text source")
    checks: list[tuple[str, object, tuple[object, ...]]] = [
        ("[model] encoder", model.encoder, ("minilm",)),
        ("[model] towers", model.towers, ("shared",)),
        ("[model] normalize", model.normalize, (True,)),
        ("[loss] form", loss.form, ("infonce",)),
        ("[loss] learnable_tau", loss.learnable_tau, (False,)),
        ("[loss] temperature", loss.temperature, ("global",)),
        ("[loss] estimator", loss.estimator, ("minibatch",)),
        ("[loss] negatives", loss.negatives, ("in_batch", "mined", "independent_pool")),
    ]
    wrong = [
        f"{name} = {value!r} (use {' or '.join(map(repr, ok))})"
        for name, value, ok in checks
        if value not in ok
    ]
    if wrong:
        raise ValueError("sentence-transformers' MNRL has no counterpart of " + "; ".join(wrong))
    return data


def batch_sequence(n_pairs: int, batch_size: int, steps: int, seed: int) -> np.ndarray:
    """B_1..B_T, the (T, b) int64 pair indices crl's loop draws for ``[run] seed``: the
    :class:`~crl.train.cursor.DataCursor` of the seed's "order" stream (:meth:`Streams.derive`).

    Raises:
        ValueError: if the batch is larger than the n training pairs.
    """
    cursor = DataCursor(n_pairs, batch_size, Streams.derive(seed).order)
    return torch.stack([cursor.next_batch() for _ in range(steps)]).numpy()


def sequence_hash(batches: np.ndarray) -> str:
    """sha256 of a batch sequence: its shape (T, b), then its int64 indices in order."""
    array = np.ascontiguousarray(batches, dtype=np.int64)
    digest = hashlib.sha256(repr(tuple(array.shape)).encode("ascii"))
    digest.update(array.tobytes())
    return digest.hexdigest()


def shared_item_rows(ids: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """(T,) for each batch, the rows i with an item id that another row j != i of the batch shares: crl leaves
    such a pair out of the other's negatives, MNRL scores it as a negative."""
    counts = []
    for rows in batches:
        _, inverse, sizes = np.unique(ids[rows], return_inverse=True, return_counts=True)
        counts.append(int((sizes[inverse] > 1).sum()))
    return np.asarray(counts, dtype=np.int64)


def batch_columns(
    pairs: Sequence[TextPair], rows: np.ndarray, negatives: np.ndarray | None
) -> list[list[str]]:
    """ST's input columns of one batch: [queries, positives] of pairs ``rows``, then, with (b, m) negative pair
    indices, m columns of the negatives' positive texts (an (anchor, positive, negative_1..m) n-tuple)."""
    columns = [[pairs[int(i)].query for i in rows], [pairs[int(i)].positive for i in rows]]
    if negatives is not None:
        columns += [[pairs[int(i)].positive for i in column] for column in negatives.T]
    return columns


def st_directions(symmetric: bool) -> tuple[str, ...]:
    """MNRL's ``directions`` for crl's ``[loss] symmetric``."""
    return ("query_to_doc", "doc_to_query") if symmetric else ("query_to_doc",)


def st_loss(config: TrainConfig, model: Any) -> nn.Module:
    """sentence-transformers' loss for ``config``: MultipleNegativesRankingLoss with scale = 1/tau and
    :func:`st_directions` (partitions per direction: the mean of the two directions' losses, crl's symmetric
    form), or CachedMultipleNegativesRankingLoss with ``mini_batch_size = [optim] chunk_size`` when GradCache
    is on. ``model`` is the SentenceTransformer it embeds with (None to score embeddings only)."""
    # sentence-transformers is imported here: only the st arm and the loss tests need it.
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    options: dict[str, Any] = {
        "scale": 1.0 / config.loss.tau,
        "directions": st_directions(config.loss.symmetric),
        "partition_mode": "per_direction",
    }
    if config.optim.chunk_size:
        return CachedMultipleNegativesRankingLoss(model, mini_batch_size=config.optim.chunk_size, **options)
    return MultipleNegativesRankingLoss(model, **options)


def describe_crl_loss(config: TrainConfig) -> str:
    """crl's loss of ``config`` in words."""
    loss = config.loss
    side = "symmetric (L_xy + L_yx)/2" if loss.symmetric else "one-sided"
    negatives = loss.negatives + (
        f", m = {loss.n_negatives} per anchor" if loss.negatives != "in_batch" else ""
    )
    cache = f", GradCache chunk {config.optim.chunk_size}" if config.optim.chunk_size else ""
    return (
        f"crl.objectives.contrastive_loss infonce, tau = {loss.tau}, {side}, negatives {negatives}, "
        f"false negatives masked by item ids{cache}"
    )


def describe_st_loss(config: TrainConfig) -> str:
    """ST's loss of :func:`st_loss` in words."""
    name = "CachedMultipleNegativesRankingLoss" if config.optim.chunk_size else "MultipleNegativesRankingLoss"
    chunk = f", mini_batch_size={config.optim.chunk_size}" if config.optim.chunk_size else ""
    extra = (
        ""
        if config.loss.negatives == "in_batch"
        else f", {config.loss.n_negatives} negative columns from crl's draws"
    )
    return (
        f"{name}(scale={1.0 / config.loss.tau:g}, directions={st_directions(config.loss.symmetric)}, "
        f"partition_mode='per_direction'{chunk}){extra}"
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


def heldout_task(data: TextData, plan: Plan) -> RetrievalTask:
    """The held-out split as a retrieval task: ``queries`` of its queries (0: all, else the hashed sample of
    :meth:`RetrievalTask.subset`) against ``corpus`` of its documents (0: all; every relevant one kept)."""
    return text_task(data, plan.split).subset(plan.queries).limit_corpus(plan.corpus)


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
        # benchmarks/text_retrieval.py (beside this file) holds the bank prefill; only --prefill needs it.
        from text_retrieval import prefill_bank

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
    print(f"text_vs_st.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def run_arm(arm: str, plan_path: Path) -> None:
    """One arm in a fresh Python process (its memory its own).

    Raises:
        SystemExit: naming the arm when its process fails (its output is above).
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--arm", arm, "--plan", str(plan_path)]
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        fail(f"the {arm} arm failed (exit {done.returncode}); see its output above")


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


class OneLineParser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; bad input exits with one line naming the argument."""
    parser = OneLineParser(
        prog="text_vs_st.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "config", type=Path, nargs="?", help="A text config, e.g. configs/wordnet_minilm.toml."
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A config override, as crl train --set.",
    )
    parser.add_argument("--steps", type=_at_least(1), help="Optimiser steps T (default [optim] total_steps).")
    parser.add_argument("--minutes", type=_positive_float, help="Stop the crl arm after this wall time.")
    parser.add_argument(
        "--split", choices=tuple(SPLITS), default="validation", help="The held-out split scored."
    )
    parser.add_argument(
        "--allow-test", action="store_true", help="Needed with --split test (once per final recipe)."
    )
    parser.add_argument("--extra", choices=EXTRAS, default="none", help="What the arms add to in-batch MNRL.")
    parser.add_argument(
        "--negatives", type=_at_least(1), default=3, help="m per anchor (hard-negatives, scrl)."
    )
    parser.add_argument("--chunk", type=_at_least(1), default=32, help="Inputs per forward pass (gradcache).")
    parser.add_argument("--prefill", action="store_true", help="hard-negatives: prefill the mined bank.")
    parser.add_argument("--queries", type=_at_least(0), default=0, help="Held-out queries scored (0: all).")
    parser.add_argument(
        "--corpus", type=_at_least(0), default=0, help="Held-out documents searched (0: all)."
    )
    parser.add_argument("--out", type=Path, help="Folder of the result (default runs/text_vs_st/NAME-EXTRA).")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.arm is not None:
        if args.plan is None:
            parser.error("--arm needs --plan")
        return args
    if args.config is None:
        parser.error("the following arguments are required: config")
    if not args.config.is_file():
        parser.error(f"argument config: no file {args.config}")
    if args.split == "test" and not args.allow_test:
        parser.error("argument --split: test is scored once per final recipe; add --allow-test to confirm")
    if args.prefill and args.extra != "hard-negatives":
        parser.error("argument --prefill: only --extra hard-negatives has a mined bank to prefill")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(arguments)
    if args.arm is not None:
        plan = Plan.load(args.plan)
        figures = crl_arm(plan) if args.arm == "crl" else st_arm(plan)
        plan.path(f"arm-{args.arm}.json").write_text(json.dumps(figures))
        return
    command = shlex.join(["python", "benchmarks/text_vs_st.py", *arguments])
    try:
        folder, result = compare(args, command)
    except (ConfigError, ValueError) as error:
        fail(str(error))
    path = folder / RESULT
    path.write_text(json.dumps(result, indent=1))
    print(table(result))
    print(f"batch sequence sha256 {result['batch_sequence_sha256']} ({result['steps']} steps, both arms)")
    print(f"{result['criterion']['statement']}: {result['criterion']['met']}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
