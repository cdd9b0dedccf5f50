"""crl's MiniLM fine-tuning step against sentence-transformers' MultipleNegativesRankingLoss, and GradCache.

Same model (the packaged all-MiniLM-L6-v2), same batch (the first b WordNet definition -> lemma-list training
pairs, at most ``--max-seq-length`` word pieces), same loss: MNRL is one-directional in-batch cross-entropy with
scale 20 on cosine scores, i.e. crl's ``contrastive_loss(a, p, tau=0.05)``; AdamW, lr 2e-5. Cases:

- ``st``: ``loss(features, labels).backward()`` with sentence-transformers' MNRL, then an AdamW step;
- ``crl``: crl's Encoder(MiniLM) on tokenised batches, ``contrastive_loss``, backward, AdamW;
- ``gradcache``: the crl step through :class:`crl.train.gradcache.GradCache` with ``--chunk`` inputs per pass.

Each case runs in a fresh subprocess with one torch thread: one untimed step (AdamW allocates its state; the
peak resident set growth ``VmHWM`` of this step is the step's memory), then ``--repeats`` timed steps
(examples/s = b / median step time). The plain steps' peak growth at small b is fitted by a line in b and
extrapolated to ``--big`` pairs; GradCache runs at two batch sizes to show its peak does not grow with b.
Nothing is asserted: this prints. On a shared machine the times are inflated (the memory is not).

Run: ``.venv/bin/python benchmarks/text.py [--batches 8 16 32] [--gradcache-batches 64 128] [--big 4096]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from _rss import peak_rss_bytes

MIB = 1 << 20


def batch_texts(b: int) -> tuple[list[str], list[str]]:
    """The first b (definition, lemma list) training pairs of WordNet (split seed 0)."""
    # Loaded in the case's own fresh process, after its memory baseline, so that the case's peak counts it.
    from crl.data.text import SplitFractions, load_split

    pairs = load_split("wordnet", "train", SplitFractions())[:b]
    return [p.query for p in pairs], [p.positive for p in pairs]


def st_step(b: int, max_seq_length: int, repeats: int) -> tuple[float, list[float]]:
    """sentence-transformers MNRL: (peak growth of the first step, times of the timed steps)."""
    # Each arm loads only its own library in its fresh process, after its memory baseline (st's arm: st and torch).
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from crl.models.minilm import packaged_model_path

    model = SentenceTransformer(str(packaged_model_path()), device="cpu")
    model.max_seq_length = max_seq_length
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    queries, docs = batch_texts(b)

    def step() -> None:
        prepare = getattr(model, "preprocess", model.tokenize)
        features = [prepare(queries), prepare(docs)]
        optimizer.zero_grad()
        loss(features, None).backward()
        optimizer.step()

    return _measure(step, repeats)


def crl_step(b: int, max_seq_length: int, repeats: int, chunk: int) -> tuple[float, list[float]]:
    """crl's step (GradCache when ``chunk`` > 0): (peak growth of the first step, times of the timed steps)."""
    # Each arm loads only its own library in its fresh process, after its memory baseline (crl's arm: crl and torch).
    import torch

    from crl.models import Encoder
    from crl.models.minilm import MiniLM, load_tokenizer, tokenize
    from crl.objectives import contrastive_loss
    from crl.train.gradcache import GradCache

    encoder = Encoder(MiniLM())
    tokenizer = load_tokenizer()
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=2e-5)
    queries, docs = batch_texts(b)

    def step() -> None:
        x, y = tokenize(tokenizer, queries, max_seq_length), tokenize(tokenizer, docs, max_seq_length)
        optimizer.zero_grad()
        if chunk:
            cache = GradCache(chunk)
            cache.backward(contrastive_loss(cache.embed(encoder, x), cache.embed(encoder, y), tau=0.05))
        else:
            contrastive_loss(encoder(x), encoder(y), tau=0.05).backward()
        optimizer.step()

    return _measure(step, repeats)


def _measure(step, repeats: int) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    before = peak_rss_bytes()
    step()
    growth = (peak_rss_bytes() - before) / MIB
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return growth, times


def run_case(case: str, b: int, max_seq_length: int, repeats: int, chunk: int) -> dict[str, float]:
    """One case in this (fresh) process."""
    # torch only in the case's fresh process, which sets its threads before any arm loads a model.
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    if case == "st":
        growth, times = st_step(b, max_seq_length, repeats)
    else:
        growth, times = crl_step(b, max_seq_length, repeats, chunk if case == "gradcache" else 0)
    median = statistics.median(times)
    return {"growth_mib": growth, "step_s": median, "examples_per_s": b / median}


def _subprocess(case: str, b: int, args: argparse.Namespace) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--case",
        case,
        "--b",
        str(b),
        "--max-seq-length",
        str(args.max_seq_length),
        "--repeats",
        str(args.repeats),
        "--chunk",
        str(args.chunk),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line_fit(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y = a + s x."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--gradcache-batches", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--big", type=int, default=4096)
    parser.add_argument("--max-seq-length", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--case", choices=("st", "crl", "gradcache"), help=argparse.SUPPRESS)
    parser.add_argument("--b", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.b, args.max_seq_length, args.repeats, args.chunk)))
        return
    print("| case | b | examples/s | step (s) | peak RSS growth (MiB) |\n|---|---|---|---|---|", flush=True)
    growth: dict[str, list[float]] = {"st": [], "crl": []}
    for b in args.batches:
        for case in ("st", "crl"):
            result = _subprocess(case, b, args)
            growth[case].append(result["growth_mib"])
            print(
                f"| {case} | {b} | {result['examples_per_s']:.1f} | {result['step_s']:.2f} | "
                f"{result['growth_mib']:.0f} |",
                flush=True,
            )
    for b in args.gradcache_batches:
        result = _subprocess("gradcache", b, args)
        print(
            f"| crl GradCache (chunk {args.chunk}) | {b} | {result['examples_per_s']:.1f} | "
            f"{result['step_s']:.2f} | {result['growth_mib']:.0f} |",
            flush=True,
        )
    for case, values in growth.items():
        intercept, slope = _line_fit(args.batches, values)
        print(
            f"{case}: peak growth ~ {intercept:.0f} + {slope:.2f} b MiB -> b = {args.big}: "
            f"{(intercept + slope * args.big) / 1024:.1f} GiB (extrapolated)"
        )


if __name__ == "__main__":
    main()
