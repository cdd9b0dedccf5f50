"""What both arms of the text study share: the batch sequence and its hash, the matched losses (crl's and
sentence-transformers' MNRL at scale 1/tau), the extras' config overrides and the held-out task; the
:class:`Plan` file both arms read."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crl.data.text import RetrievalTask, TextPair
from crl.train.build import Streams
from crl.train.config import TextData, TrainConfig, load_config
from crl.train.cursor import DataCursor
from crl.train.data import HeldOutSplit, text_task

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


def heldout_task(data: TextData, plan: Plan) -> RetrievalTask:
    """The held-out split as a retrieval task: ``queries`` of its queries (0: all, else the hashed sample of
    :meth:`RetrievalTask.subset`) against ``corpus`` of its documents (0: all; every relevant one kept)."""
    return text_task(data, plan.split).subset(plan.queries).limit_corpus(plan.corpus)
