"""Does crl fine-tuning help MiniLM? Zero-shot vs SSCRL in-batch vs SCRL with mined hard negatives, held out.

    .venv/bin/python -m studies.text_retrieval configs/wordnet_minilm.toml --minutes 8 --queries 300 --corpus 2000
    .venv/bin/python -m studies.text_retrieval --run runs/wordnet_minilm --queries 300 --corpus 2000

With ``--run RUN_DIR`` it trains nothing: it evaluates that run's newest checkpoint beside its zero-shot starting
model on ``--queries`` of its test queries and ``--corpus`` of its test documents (0, 0: the whole test split, as
``crl eval RUN_DIR`` does) through ``crl eval``'s own code (:func:`crl.serving.evaluate.evaluate_checkpoint`),
prints ``crl eval``'s table and writes its JSON to ``--out``. Without it:

1. The held-out test split of the config's text source becomes a retrieval task (queries, the test corpus, qrels:
   every document a query's pairs name is relevant). ``--queries`` of them are drawn by a fixed hash.
2. Zero-shot: the pretrained encoder of ``[model]`` (all-MiniLM-L6-v2) embeds queries and corpus.
3. Fine-tuned, each for the same wall-clock budget (``--minutes``; cosine schedule over ``[optim] total_steps``,
   stopped early at the budget: on a shared machine the step counts differ with the load, so they are printed
   and saved) on the first ``--pool`` training pairs: (a) the config as written (SSCRL, in-batch negatives,
   false negatives masked by item ids); (b) SCRL with ``--mined`` hard negatives per anchor from
   crl.negatives.mining's ``Mined`` sampler, whose memory bank starts from the zero-shot embeddings of the pool (so
   mining works from step 1) and is refreshed from training every ``--refresh`` steps.
4. nDCG@10, MRR@10, recall@k, accuracy@1 (sentence-transformers' definitions, crl.metrics.ir) and paired bootstrap
   95% intervals over queries of each difference. Each fine-tuned model is saved in sentence-transformers' format
   under ``--out``. A JSON of every figure is written there too.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from crl.commands._console import output_console
from crl.commands.evaluate import text_result_table
from crl.data.text import RetrievalTask
from crl.metrics.ir import IRReport
from crl.metrics.text_retrieval import TEXT_KS, Difference, compare_reports, evaluate_retrieval
from crl.models import embed
from crl.models.minilm import MiniLM, save_sentence_transformer
from crl.serving.evaluate import evaluate_checkpoint
from crl.serving.text_evaluate import TextEvalResult
from crl.train.build import Streams
from crl.train.config import TextData, TrainConfig, load_config
from crl.train.data import text_source, text_task, text_tokenize
from crl.train.heldout_monitor import text_embedders
from crl.train.loop import TrainingLoop
from studies.arguments import OneLineParser, at_least, positive_float

METRICS = [("ndcg", 10), ("mrr", 10), ("recall", 10), ("recall", 100), ("accuracy", 1)]
"""The table's columns; a cut-off above the corpus size is lowered to it, as evaluate_retrieval lowers it."""


def test_task(config: TextData, queries: int, corpus: int) -> RetrievalTask:
    """The held-out test split as a retrieval task: ``queries`` of its queries (0: all) over a corpus of ``corpus``
    test documents (all relevant ones, then distractors; 0: the whole test corpus)."""
    return text_task(config, "test").subset(queries).limit_corpus(corpus)


def evaluate(loop: TrainingLoop, task: RetrievalTask) -> IRReport:
    """The metrics (:data:`TEXT_KS`) of a loop's model on ``task``, in eval mode, embedded as crl eval embeds."""
    assert isinstance(loop.config.data, TextData)
    loop.model.eval()
    embedders = text_embedders(
        loop.model, text_tokenize(loop.config.data), batch_size=128, device=loop.device
    )
    report = evaluate_retrieval(task, *embedders).report
    loop.model.train()
    return report


def prefill_bank(loop: TrainingLoop) -> float:
    """Start the Mined sampler's memory bank from the current (zero-shot) embeddings g(y) of the whole pool."""
    started = time.perf_counter()
    source, model = loop.source, loop.model
    pool = torch.arange(source.n_pairs)
    model.eval()
    bank = embed(
        model.encode_positives,
        source.positives(pool, loop.streams.negatives),
        batch_size=128,
        device=loop.device,
    )
    model.train()
    state = {
        "memory": bank.clone(),
        "filled": torch.ones(source.n_pairs, dtype=torch.bool),
        "snapshot": bank.clone(),
        "snapshot_ids": pool.clone(),
        "steps": torch.tensor(0, dtype=torch.int64),
    }
    loop.sampler.load_state_dict(state)
    return time.perf_counter() - started


def make_loop(config: TrainConfig) -> TrainingLoop:
    """The training loop of ``config`` on its text source (the pretrained encoder, no step taken)."""
    assert isinstance(config.data, TextData)
    source = text_source(config.data, "train")
    return TrainingLoop(config, source, Streams.derive(config.run.seed, regime=config.loss.regime))


def fine_tune(config: TrainConfig, minutes: float, *, prefill: bool) -> tuple[TrainingLoop, dict[str, float]]:
    """Train for at most ``minutes`` of wall time (or total_steps); the loop and its timing."""
    loop = make_loop(config)
    prefill_s = prefill_bank(loop) if prefill else 0.0
    started, losses = time.perf_counter(), list[float]()
    while not losses or (not loop.done and time.perf_counter() - started < 60 * minutes):
        losses.append(float(loop.train_step()))
    seconds = time.perf_counter() - started
    print(f"  {loop.step} steps in {seconds:.0f} s (loss {losses[0]:.3f} -> {losses[-1]:.3f})", flush=True)
    return loop, {
        "steps": loop.step,
        "train_s": seconds,
        "prefill_s": prefill_s,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "pairs_seen": loop.step * config.data.batch_size,
    }


def columns(task: RetrievalTask) -> list[tuple[str, int]]:
    """:data:`METRICS` with each cut-off lowered to the corpus size (repeats dropped)."""
    return list(dict.fromkeys((metric, min(k, len(task.corpus))) for metric, k in METRICS))


def row(name: str, report: IRReport, shown: list[tuple[str, int]]) -> str:
    return f"| {name} | " + " | ".join(f"{report.values[m][k]:.4f}" for m, k in shown) + " |"


def difference_row(name: str, differences: dict[str, Difference], shown: list[tuple[str, int]]) -> str:
    cells = [differences[f"{metric}@{k}"] for metric, k in shown]
    return f"| {name} | " + " | ".join(f"{d.delta:+.4f} [{d.low:+.4f}, {d.high:+.4f}]" for d in cells) + " |"


def evaluate_run(run: Path, queries: int, corpus: int, out: Path) -> None:
    """crl eval's evaluation of a run on a sample of its test split: its table printed, its JSON written."""
    config = load_config(run / "config.toml")
    assert isinstance(config.data, TextData)
    task = test_task(config.data, queries, corpus)
    name = f"a sample of the test split (--queries {queries}, --corpus {corpus}; 0: all)"
    result = evaluate_checkpoint(run, task=task, task_name=name)
    assert isinstance(result, TextEvalResult)
    output_console().print(text_result_table(result))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{config.run.name}-eval.json").write_text(json.dumps(result.as_dict(), indent=1))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; bad input exits with one line naming the argument (a budget of -1 minutes, -5 queries)."""
    parser = OneLineParser(prog="python -m studies.text_retrieval", description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, nargs="?", help="The text config to fine-tune (not with --run).")
    parser.add_argument(
        "--run", type=Path, help="Evaluate this run folder's newest checkpoint instead (trains nothing)."
    )
    parser.add_argument(
        "--minutes",
        type=positive_float,
        default=5.0,
        help="Wall-clock training budget of each fine-tuned model, in minutes (> 0).",
    )
    parser.add_argument(
        "--queries", type=at_least(0), default=500, help="Held-out queries evaluated (0: all)."
    )
    parser.add_argument(
        "--corpus", type=at_least(0), default=0, help="Test documents searched (0: all of the split)."
    )
    parser.add_argument(
        "--pool", type=at_least(1), default=8000, help="Training pairs used (the mining pool)."
    )
    parser.add_argument("--mined", type=at_least(1), default=3, help="m mined negatives per anchor (SCRL).")
    parser.add_argument("--window", type=at_least(1), nargs=2, default=[4, 64], help="Mined ranks lo hi.")
    parser.add_argument(
        "--refresh", type=at_least(1), default=10, help="Mined: re-index the bank every this many steps."
    )
    parser.add_argument("--out", type=Path, default=Path("runs/text_retrieval"))
    args = parser.parse_args(argv)
    if (args.config is None) == (args.run is None):
        parser.error("pass a config to fine-tune, or --run RUN_DIR to evaluate a run (not both)")
    if args.window[0] > args.window[1]:
        parser.error(f"argument --window: pass lo <= hi, got {args.window[0]} {args.window[1]}")
    return args


def compare_fine_tunes(args: argparse.Namespace) -> None:
    """Zero-shot vs the two fine-tunes of the config on one sample of its test split; tables and JSON."""
    base = load_config(args.config, [f"data.n_train={args.pool}"])
    torch.set_num_threads(max(1, base.run.num_threads))
    assert isinstance(base.data, TextData)
    task = test_task(base.data, args.queries, args.corpus)
    print(f"held-out task: {len(task.queries)} queries, corpus of {len(task.corpus)} documents", flush=True)
    mined = load_config(
        args.config,
        [
            f"data.n_train={args.pool}",
            'loss.negatives="mined"',
            f"loss.n_negatives={args.mined}",
            "loss.symmetric=false",
            f"loss.mine_window={list(args.window)}",
            f"loss.mine_refresh_every={args.refresh}",
        ],
    )
    reports: dict[str, IRReport] = {}
    figures: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    reports["zero-shot MiniLM"] = evaluate(make_loop(base), task)
    print(f"zero-shot evaluated in {time.perf_counter() - started:.0f} s", flush=True)
    for name, config, prefill in (
        ("crl SSCRL in-batch", base, False),
        (f"crl SCRL mined m={args.mined}", mined, True),
    ):
        print(name, flush=True)
        loop, figures[name] = fine_tune(config, args.minutes, prefill=prefill)
        reports[name] = evaluate(loop, task)
        backbone = loop.model.anchor_encoder.backbone
        assert isinstance(backbone, MiniLM) and isinstance(config.data, TextData)
        folder = args.out / config.run.name / name.split()[1].lower()
        save_sentence_transformer(backbone, folder, max_seq_length=config.data.max_seq_length)
        figures[name]["saved_to"] = str(folder)  # type: ignore[assignment]
    shown = columns(task)
    header = "| model | " + " | ".join(f"{m}@{k}" for m, k in shown) + " |"
    lines = [header, "|" + "---|" * (len(shown) + 1)]
    lines += [row(name, report, shown) for name, report in reports.items()]
    names = list(reports)
    lines += [
        "",
        "Paired differences (bootstrap 95% CI over queries, 10,000 draws):",
        "",
        header,
        "|" + "---|" * (len(shown) + 1),
    ]
    for first, second in ((0, 1), (0, 2), (1, 2)):
        label = f"{names[second]} - {'zero-shot' if first == 0 else names[first]}"
        differences = compare_reports(reports[names[first]], reports[names[second]])
        lines.append(difference_row(label, differences, shown))
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "config": str(args.config),
        "queries": len(task.queries),
        "corpus": len(task.corpus),
        "ks": {k: list(v) for k, v in TEXT_KS.items()},
        "training": figures,
        "metrics": {name: report.as_flat_dict() for name, report in reports.items()},
        "table": table,
    }
    (args.out / f"{base.run.name}.json").write_text(json.dumps(result, indent=2))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.run is not None:
        evaluate_run(args.run, args.queries, args.corpus, args.out)
    else:
        compare_fine_tunes(args)


if __name__ == "__main__":
    main()
