"""Held-out retrieval of a trained text run, beside the model it started from: ``crl eval`` on a text run.

The task (:class:`crl.data.text.RetrievalTask`) is the run's own test split (:func:`crl.train.data.text_task`:
every test query against all the test documents, a query relevant to every document one of its pairs names), or
your own queries, corpus and qrels (:func:`crl.metrics.task_files.read_task`). Two models rank it, each query
embedded by the anchor tower f and each document by the positive tower g, tokenised as the run was trained
(:func:`crl.train.heldout_monitor.text_embedders`), by cosine over the whole corpus
(:func:`crl.metrics.text_retrieval.evaluate_retrieval`):

- fine-tuned: the checkpoint's model;
- zero-shot: the model the run started from (:func:`crl.serving.trained.starting_model`: for a MiniLM run the
  pretrained weights of ``[model] path``, by default the packaged all-MiniLM-L6-v2).

The metrics are sentence-transformers' ``InformationRetrievalEvaluator``'s at its cut-offs
(:data:`crl.metrics.ir.DEFAULT_KS`: accuracy@k, precision@k and recall@k for k = 1, 3, 5, 10, MRR@10, nDCG@10,
MAP@100; cut-offs above the corpus size lowered to it; the formulas in :mod:`crl.metrics.ir`), on graded qrels
trec_eval's (nDCG with graded gains, as BEIR and MTEB publish it); the JSON's ``definitions`` says which. For
every metric, the per-query difference d_q = fine-tuned_q - zero-shot_q on the same queries gets a paired
bootstrap interval (:func:`crl.metrics.text_retrieval.compare_reports`): delta = (1/Q) sum_q d_q, and the
percentiles of the means of ``draws`` resamples of the queries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from crl.data.source import Batch
from crl.data.text import RetrievalTask
from crl.metrics.ir import DEFAULT_KS
from crl.metrics.text_retrieval import (
    Difference,
    EmbedTexts,
    TextRetrieval,
    compare_reports,
    evaluate_retrieval,
    trec_run,
)
from crl.models import DualEncoder
from crl.models.minilm import load_tokenizer, tokenize_counting_cuts, truncation_note
from crl.serving.trained import model_of_state, run_folder, starting_model
from crl.train.checkpoint import TrainState
from crl.train.config import TextData, TextPairsData
from crl.train.data import text_pairs, text_task, text_tokenize
from crl.train.fingerprint import (
    DATA_FILE,
    data_differences,
    data_file_print,
    read_fingerprint,
    text_fingerprint,
)
from crl.train.heldout_monitor import text_embedders

__all__ = ["TextEvalResult", "checked_run_data", "evaluate_text_state"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextEvalResult:
    """Held-out retrieval of a text checkpoint and of the model its run started from, on one task.

    Attributes:
        checkpoint: the safetensors file evaluated.
        step: its training step.
        task_name: where the task comes from (the run's test split, or your files).
        task: the queries, documents and qrels ranked.
        fine_tuned: the checkpoint's metrics and rankings.
        zero_shot: the starting model's.
        differences: metric name (``"ndcg@10"``) -> fine-tuned minus zero-shot with its paired interval.
        draws: bootstrap resamples of each interval.
    """

    checkpoint: Path
    step: int
    task_name: str
    task: RetrievalTask
    fine_tuned: TextRetrieval
    zero_shot: TextRetrieval
    differences: dict[str, Difference]
    draws: int

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the content of eval.json): the task, both models' metrics, each difference."""
        return {
            "checkpoint": str(self.checkpoint),
            "step": self.step,
            "task": self.task_name,
            "n_queries": len(self.task.queries),
            "n_documents": len(self.task.corpus),
            "relevance": "graded" if self.fine_tuned.report.graded else "binary",
            "definitions": self.fine_tuned.report.definitions,
            "definitions_note": self.fine_tuned.report.definitions_note(),
            "fine_tuned": self.fine_tuned.report.as_flat_dict(),
            "zero_shot": self.zero_shot.report.as_flat_dict(),
            "fine_tuned_minus_zero_shot": {
                name: {"delta": d.delta, "ci": [d.low, d.high], "level": d.level}
                for name, d in self.differences.items()
            },
            "bootstrap_draws": self.draws,
        }

    def trec_run(self) -> dict[str, list[tuple[str, float]]]:
        """The fine-tuned model's ranking, ``{query_id: [(doc_id, cosine), ...]}`` best first, down to the
        largest cut-off (for :func:`crl.metrics.trec.write_run`)."""
        return trec_run(self.task, self.fine_tuned)


def _ranked(
    model: DualEncoder,
    task: RetrievalTask,
    tokenize: Callable[[Sequence[str]], Batch],
    batch_size: int,
    device: torch.device,
    name: str,
) -> TextRetrieval:
    """The metrics (:data:`crl.metrics.ir.DEFAULT_KS`) and rankings of ``model`` (called ``name`` in the stages
    it logs) on ``task``."""
    queries, documents = text_embedders(model, tokenize, batch_size=batch_size, device=device)
    return evaluate_retrieval(
        task,
        _announced(queries, f"{name}: embedding the queries"),
        _announced(documents, f"{name}: embedding the documents"),
        ks=DEFAULT_KS,
    )


def _announced(embed_texts: EmbedTexts, stage: str) -> EmbedTexts:
    """``embed_texts``, logging ``stage`` and the number of texts (a stage of :mod:`crl.commands`' display)
    before each call."""

    def run(texts: Sequence[str]) -> torch.Tensor:
        _log.info("%s (%s)", stage, f"{len(texts):,}")
        return embed_texts(texts)

    return run


def _warn_of_truncation(task: RetrievalTask, data: TextData) -> None:
    """Log a warning for the queries and for the documents of ``task`` cut at the run's ``max_seq_length`` word
    pieces (:func:`crl.models.minilm.truncation_note`: how many, and how many characters), as both models read
    them so."""
    tokenizer = load_tokenizer(data.tokenizer)
    for what, texts, names in (
        ("queries", task.queries, task.query_ids),
        ("documents", task.corpus, task.doc_ids),
    ):
        cuts = [
            cut
            for start in range(0, len(texts), 1024)
            for cut in tokenize_counting_cuts(tokenizer, texts[start : start + 1024], data.max_seq_length)[1]
        ]
        note = truncation_note(cuts, data.max_seq_length, names)
        if note:
            _log.warning("%s: %s ([data] max_seq_length)", what, note)


def checked_run_data(data: TextData, run_dir: Path) -> TextData:
    """``data`` reading the file the run was trained on (the absolute path its ``data.json`` records, wherever
    crl eval runs from), once its training pairs are checked against the recorded fingerprint.

    A run of your own pairs file at a relative ``[data] path`` whose ``data.json`` is gone is refused: the path
    would name whatever file of that name the current folder holds. A run without one at an absolute path, or of
    a packaged source (a folder written before fingerprints, a state in memory), is evaluated unchecked.

    Raises:
        ValueError: naming what differs (the file's SHA-256, the pairs' count or SHA-256) and the fix, when the
            data is not what the run was trained on, so its test split would be another; naming the missing
            ``data.json`` of a run of your own pairs file at a relative path.
    """
    saved = read_fingerprint(run_dir)
    if saved is None and isinstance(data, TextPairsData) and not Path(data.path).is_absolute():
        raise ValueError(
            f"{run_dir / DATA_FILE} is missing: it records the absolute path and SHA-256 of the pairs file the run "
            f"was trained on, without which [data] path = {data.path!r} could name another file (one of that name "
            "in the current folder); restore data.json from a copy of the run folder, or evaluate files of your "
            "own (crl eval --queries --corpus --qrels)"
        )
    if saved is None:
        return data
    if saved.file is not None and isinstance(data, TextPairsData):
        data = data.model_copy(update={"path": saved.file.path})
    file = data_file_print(data.path) if isinstance(data, TextPairsData) else None
    current = text_fingerprint(data.source, text_pairs(data, "train"), file)
    differences = data_differences(saved, current)
    if differences:
        raise ValueError(
            f"{run_dir}'s data is not what it was trained on ({'; '.join(differences)}), so its test split "
            "would hold other pairs; restore the data, or evaluate files of your own (crl eval --queries --corpus "
            "--qrels)"
        )
    return data


def evaluate_text_state(
    state: TrainState,
    checkpoint: Path,
    device: torch.device,
    *,
    task: RetrievalTask | None = None,
    task_name: str = "your queries, corpus and qrels",
    draws: int = 10000,
    seed: int = 0,
) -> TextEvalResult:
    """Rank ``task`` (named ``task_name``; default: the run's test split) with a text checkpoint's model and its
    run's starting model, and bootstrap each metric's difference with ``draws`` resamples from ``seed``.

    Raises:
        ValueError: if the run is not a text run, its data is not what it was trained on
            (:func:`checked_run_data`), its test split is empty (naming test_fraction), or the task has fewer
            than 2 queries (a paired interval needs 2).
    """
    data = state.config.data
    if not isinstance(data, TextData):
        raise ValueError(
            f"[data] source = {data.source!r} is not a text source; crl eval scores held-out pairs"
        )
    chosen = task if task is not None else text_task(checked_run_data(data, run_folder(checkpoint)), "test")
    name = task_name if task is not None else f"the test split of [data] source = {data.source!r}"
    if len(chosen.queries) < 2:
        raise ValueError(
            f"{name} holds {len(chosen.queries)} query with a relevant document; the paired interval of fine-tuned "
            "minus zero-shot needs at least 2: judge more queries"
        )
    batch, tokenize = state.config.eval.batch_size, text_tokenize(data)
    _warn_of_truncation(chosen, data)
    _log.info("loading the fine-tuned model of step %d", state.step)
    fine_tuned = _ranked(model_of_state(state, device), chosen, tokenize, batch, device, "fine-tuned")
    _log.info("loading the zero-shot model the run started from")
    zero_shot = _ranked(starting_model(state, device), chosen, tokenize, batch, device, "zero-shot")
    _log.info("paired bootstrap intervals (%s resamples)", f"{draws:,}")
    differences = compare_reports(zero_shot.report, fine_tuned.report, draws=draws, seed=seed)
    return TextEvalResult(checkpoint, state.step, name, chosen, fine_tuned, zero_shot, differences, draws)
