"""``[optim]``, ``[run]`` and ``[eval]``: the optimiser and schedule, the run folder and its logging, and the
held-out evaluation."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from crl.train.config.base import FolderName, Section


class OptimConfig(Section):
    """``[optim]``: AdamW with linear warm-up then cosine decay, and gradient-norm clipping."""

    lr: float = Field(default=1e-3, gt=0, description="Peak learning rate, reached at the end of warm-up.")
    weight_decay: float = Field(
        default=1e-4, ge=0, description="AdamW decoupled weight decay (weights only, not biases/tau)."
    )
    beta1: float = Field(default=0.9, ge=0, lt=1, description="AdamW first-moment decay.")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="AdamW second-moment decay.")
    warmup_steps: int = Field(
        default=100, ge=0, description="Steps of linear warm-up from lr/warmup_steps to lr."
    )
    total_steps: int = Field(
        default=1000, ge=1, description="Total optimiser steps; the cosine reaches min_lr_ratio*lr here."
    )
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="Final learning rate as a fraction of lr."
    )
    grad_clip: float = Field(
        default=1.0, ge=0, description="Clip the global gradient L2 norm to this value (0: off)."
    )
    chunk_size: int = Field(
        default=0,
        ge=0,
        description="GradCache: embed the batch this many inputs at a time without a graph, take the exact "
        "loss, then backpropagate chunk by chunk (memory of one chunk, same gradients; 0: off, one graph).",
    )

    @model_validator(mode="after")
    def _warmup_fits(self) -> OptimConfig:
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps = {self.warmup_steps} exceeds total_steps = {self.total_steps}; "
                "shorten the warm-up or train longer"
            )
        return self


class RunConfig(Section):
    """``[run]``: where the run lives and how it logs, checkpoints and uses the machine."""

    name: FolderName = Field(
        default="run", min_length=1, description="Run name, one folder name; the run folder is out_dir/name."
    )
    out_dir: str = Field(default="runs", description="Parent folder of run folders.")
    seed: int = Field(
        default=0,
        ge=0,
        description="Seed of every generator (initial weights, data order, views, negatives).",
    )
    checkpoint_every: int = Field(
        default=500, ge=1, description="Write a checkpoint every this many steps (and at the end)."
    )
    keep_checkpoints: int = Field(
        default=3, ge=1, description="Keep this many newest checkpoints; older ones are deleted."
    )
    log_every: int = Field(
        default=50,
        ge=1,
        description="Log loss, lr and tau to metrics.jsonl/TensorBoard every this many steps.",
    )
    eval_every: int = Field(
        default=0,
        ge=0,
        description="Every this many steps log held-out accuracy@1 and MRR on the first eval_pairs held-out "
        "pairs (text runs: nDCG@10 and recall@10 on eval_pairs validation queries) under heldout/ in "
        "metrics.jsonl and TensorBoard (0: off).",
    )
    eval_pairs: int = Field(
        default=1000,
        ge=2,
        description="Held-out pairs of the periodic held-out metric (eval_every); text runs: validation queries, "
        "and documents (beyond their relevant ones).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto': CUDA when available, else CPU."
    )
    num_threads: int = Field(
        default=0, ge=0, description="torch CPU threads per process (0: leave torch's default)."
    )
    init_from: str = Field(
        default="",
        description="Checkpoint whose encoder weights start this new run (crl train --init-from; '': the "
        "weights are drawn from seed).",
    )
    precision: Literal["fp32", "bf16"] = Field(
        default="fp32",
        description="bf16: the forward pass and the loss run under torch.autocast(bfloat16) (GEMMs in bf16, the "
        "loss's log-sum-exps and accumulators in float32; on a CPU without AVX-512 BF16 or AMX they are emulated "
        "and much slower, and the trainer warns); fp32: no autocast.",
    )
    progress: bool = Field(default=True, description="Show a rich progress bar on rank 0.")
    tensorboard: bool = Field(default=True, description="Write TensorBoard event files into the run folder.")


class EvalConfig(Section):
    """``[eval]``: held-out evaluation by ``crl eval``."""

    seed: int = Field(
        default=1234, ge=0, description="Seed of the fixed generator that makes the held-out views."
    )
    ks: list[int] = Field(
        default_factory=lambda: [1, 5, 10], min_length=1, description="Cut-offs k of recall@k/nDCG@k."
    )
    knn_k: int = Field(default=20, ge=1, description="Neighbours of the weighted kNN classifier (cosine).")
    knn_temperature: float = Field(
        default=0.07, gt=0, description="Vote weight exp(s/T) of the kNN classifier (InstDisc)."
    )
    linear_probe: bool = Field(
        default=True, description="Fit a logistic-regression probe on frozen train embeddings."
    )
    probe_max_iter: int = Field(default=200, ge=1, description="Iterations of the logistic-regression probe.")
    batch_size: int = Field(
        default=1024,
        ge=1,
        description="Inputs per forward pass when embedding (texts: about 128 is fastest on a CPU thread).",
    )
