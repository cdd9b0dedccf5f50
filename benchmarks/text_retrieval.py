"""Does crl fine-tuning help MiniLM? Zero-shot vs SSCRL in-batch vs SCRL with mined hard negatives, held out.

    .venv/bin/python benchmarks/text_retrieval.py configs/wordnet_minilm.toml --minutes 8 --queries 300 --corpus 2000

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

from crl.data.text import RetrievalTask, SplitFractions, load_split
from crl.metrics.ir import IRReport
from crl.metrics.text_retrieval import TEXT_KS, evaluate_retrieval, paired_bootstrap
from crl.models import DualEncoder, embed
from crl.models.minilm import MiniLM, save_sentence_transformer
from crl.train.build import Streams
from crl.train.config import TextData, TrainConfig, load_config
from crl.train.data import text_source
from crl.train.loop import TrainingLoop

METRICS = [("ndcg", 10), ("mrr", 10), ("recall", 10), ("recall", 100), ("accuracy", 1)]


def test_task(config: TextData, queries: int, corpus: int) -> RetrievalTask:
    """The held-out test split as a retrieval task: ``queries`` of its queries (0: all) over a corpus of ``corpus``
    test documents (all relevant ones, then distractors; 0: the whole test corpus)."""
    fractions = SplitFractions(config.val_fraction, config.test_fraction, config.split_seed)
    pairs = load_split(
        config.source,
        "test",
        fractions,
        wordnet_root=getattr(config, "root", ""),
        wordnet_kind=getattr(config, "pairs", "gloss_lemmas"),
        cache_dir=getattr(config, "cache_dir", ""),
        path=getattr(config, "path", ""),
    )
    return RetrievalTask.from_pairs(pairs).subset(queries).limit_corpus(corpus)


def encoders(model: DualEncoder, loop_source: object, batch_size: int = 128):  # type: ignore[no-untyped-def]
    """(embed queries, embed corpus) functions of a dual encoder, in eval mode, for evaluate_retrieval."""
    tokenize = loop_source.tokenize  # type: ignore[attr-defined]

    def run(encode, texts: Sequence[str]) -> torch.Tensor:  # type: ignore[no-untyped-def]
        model.eval()
        vectors = embed(encode, tokenize(list(texts)), batch_size=batch_size, device=torch.device("cpu"))
        model.train()
        return vectors

    return (lambda t: run(model.encode_anchors, t)), (lambda t: run(model.encode_positives, t))


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
    source = text_source(config.data, "train")
    return TrainingLoop(config, source, Streams.derive(config.run.seed, regime=config.loss.regime))


def fine_tune(config: TrainConfig, minutes: float, *, prefill: bool) -> tuple[TrainingLoop, dict[str, float]]:
    """Train for at most ``minutes`` of wall time (or total_steps); the loop and its timing."""
    loop = make_loop(config)
    prefill_s = prefill_bank(loop) if prefill else 0.0
    started, losses = time.perf_counter(), []
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


def row(name: str, report: IRReport) -> str:
    return f"| {name} | " + " | ".join(f"{report.values[m][k]:.4f}" for m, k in METRICS) + " |"


def difference_row(name: str, a: IRReport, b: IRReport) -> str:
    cells = []
    for metric, k in METRICS:
        d = paired_bootstrap(a.per_query[metric][k], b.per_query[metric][k])
        cells.append(f"{d.delta:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument(
        "--minutes",
        type=float,
        default=5.0,
        help="Wall-clock training budget of each fine-tuned model, in minutes.",
    )
    parser.add_argument("--queries", type=int, default=500, help="Held-out queries evaluated (0: all).")
    parser.add_argument(
        "--corpus", type=int, default=0, help="Test documents searched (0: all of the split)."
    )
    parser.add_argument("--pool", type=int, default=8000, help="Training pairs used (the mining pool).")
    parser.add_argument("--mined", type=int, default=3, help="m mined negatives per anchor (SCRL).")
    parser.add_argument("--window", type=int, nargs=2, default=[4, 64], help="Mined ranks lo hi.")
    parser.add_argument(
        "--refresh", type=int, default=10, help="Mined: re-index the bank every this many steps."
    )
    parser.add_argument("--out", type=Path, default=Path("runs/text_retrieval"))
    args = parser.parse_args()
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
    loop = make_loop(base)
    started = time.perf_counter()
    reports["zero-shot MiniLM"] = evaluate_retrieval(task, *encoders(loop.model, loop.source)).report
    print(f"zero-shot evaluated in {time.perf_counter() - started:.0f} s", flush=True)
    for name, config, prefill in (
        ("crl SSCRL in-batch", base, False),
        (f"crl SCRL mined m={args.mined}", mined, True),
    ):
        print(name, flush=True)
        loop, figures[name] = fine_tune(config, args.minutes, prefill=prefill)
        reports[name] = evaluate_retrieval(task, *encoders(loop.model, loop.source)).report
        backbone = loop.model.anchor_encoder.backbone
        assert isinstance(backbone, MiniLM)
        folder = args.out / config.run.name / name.split()[1].lower()
        save_sentence_transformer(backbone, folder, max_seq_length=config.data.max_seq_length)
        figures[name]["saved_to"] = str(folder)  # type: ignore[assignment]
    header = "| model | " + " | ".join(f"{m}@{k}" for m, k in METRICS) + " |"
    lines = [header, "|" + "---|" * (len(METRICS) + 1)]
    lines += [row(name, report) for name, report in reports.items()]
    names = list(reports)
    lines += [
        "",
        "Paired differences (bootstrap 95% CI over queries, 10,000 draws):",
        "",
        header,
        "|" + "---|" * (len(METRICS) + 1),
    ]
    lines.append(difference_row(f"{names[1]} - zero-shot", reports[names[0]], reports[names[1]]))
    lines.append(difference_row(f"{names[2]} - zero-shot", reports[names[0]], reports[names[2]]))
    lines.append(difference_row(f"{names[2]} - {names[1]}", reports[names[1]], reports[names[2]]))
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


if __name__ == "__main__":
    main()
