"""Approximate search that keeps its promise: build time, memory, QPS and recall@10 of crl.search's kinds.

    python benchmarks/search.py --sets fashion vmf-1e5             # minutes
    python benchmarks/search.py --sets vmf-1e6 --queries 1000      # the heavy run (about an hour on 2 cores)

Data sets (d = 128, cosine):

- ``fashion``: the 70,000 Fashion-MNIST images (train + test) embedded by a crl encoder with embedding_dim = 128
  (``--run``: a run folder; by default a small MLP is trained for ``--train-steps`` steps into
  ``runs/bench_search_encoder``); ``--queries`` of them are held out as queries, the rest is the corpus.
- ``vmf-1e5``, ``vmf-1e6``: a vMF mixture on S^127: 1,000 centres uniform on the sphere, kappa = 200 (an item's
  cosine to its centre is about 0.73), equal weights; queries are fresh draws of the same mixture. Isotropic
  random vectors have no neighbourhoods and would make every approximate index look worse than it is.

Every figure uses ``--threads`` faiss threads (default 2). Exact QPS is a batched ``faiss.IndexFlatIP`` search of
all queries; recall@10 = |approximate top 10 ∩ exact top 10| / 10, averaged over the queries; memory is the size
of the serialised faiss index. Each configuration's search is repeated until it has run for ``--min-seconds``.
Prints one Markdown table per data set and writes every row to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch

from crl.search import Index
from crl.synthetic.vmf import sample_uniform_sphere, sample_vmf

DIM = 128
K = 10
SWEEPS: dict[str, tuple[str | None, tuple[int, ...]]] = {
    "flat": (None, (0,)),
    "ivf": ("nprobe", (1, 4, 8, 16, 32, 64)),
    "ivfpq": ("nprobe", (4, 16, 64)),
    "hnsw": ("ef_search", (16, 32, 64, 128, 256)),
}


def vmf_mixture(n: int, seed: int, centres: int = 1000, kappa: float = 200.0) -> np.ndarray:
    """``n`` float32 unit vectors of the vMF mixture (centres drawn from ``seed`` 0, items from ``seed``)."""
    centre_rng = torch.Generator().manual_seed(0)
    means = sample_uniform_sphere((centres,), DIM, centre_rng)
    rng = torch.Generator().manual_seed(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 50_000):
        count = min(50_000, n - start)
        which = torch.randint(centres, (count,), generator=rng)
        out[start : start + count] = sample_vmf(means[which], kappa, rng).float().numpy()
    return out


def fashion_embeddings(run: Path | None, train_steps: int) -> np.ndarray:
    """The 70k Fashion-MNIST images embedded (anchor tower) by the newest checkpoint of ``run``."""
    from crl.data.fashion_mnist import load_fashion_mnist
    from crl.serving.evaluate import embed_array

    folder = run if run is not None else train_encoder(train_steps)
    images = torch.cat([load_fashion_mnist(split).images for split in ("train", "test")]).squeeze(1)
    return embed_array(folder, images, device="cpu", batch_size=2048).numpy()


def train_encoder(steps: int) -> Path:
    """A small MLP encoder (embedding_dim = 128, in-batch InfoNCE on two views) in runs/bench_search_encoder."""
    from crl.train.config import parse_config
    from crl.train.trainer import Trainer

    config = parse_config(
        {
            "data": {"source": "fashion_mnist", "pairs": "augment", "batch_size": 256},
            "model": {"encoder": "mlp", "hidden": [512], "embedding_dim": DIM, "towers": "shared"},
            "loss": {"tau": 0.1, "symmetric": True},
            "optim": {"lr": 2e-3, "warmup_steps": 20, "total_steps": steps},
            "run": {
                "name": "bench_search_encoder",
                "progress": False,
                "num_threads": 2,
                "tensorboard": False,
            },
        }
    )
    Trainer(config).fit()
    return config.run_dir


def timed(call: Callable[[], Any], min_seconds: float) -> tuple[Any, float]:
    """(result, seconds per call), repeating ``call`` until ``min_seconds`` have passed."""
    runs, start, result = 0, time.perf_counter(), None
    while runs == 0 or time.perf_counter() - start < min_seconds:
        result = call()
        runs += 1
    return result, (time.perf_counter() - start) / runs


def index_bytes(index: Index) -> int:
    """Bytes of the serialised faiss index."""
    return int(faiss.serialize_index(index.faiss_index).nbytes)


def exact_baseline(corpus: np.ndarray, queries: np.ndarray, min_seconds: float) -> tuple[np.ndarray, dict]:
    """Exact top-10 ids by batched IndexFlatIP, and its row of the table."""
    start = time.perf_counter()
    flat = faiss.IndexFlatIP(DIM)
    flat.add(corpus)
    build = time.perf_counter() - start
    (_, ids), seconds = timed(lambda: flat.search(queries, K), min_seconds)
    row = {"kind": "exact IndexFlatIP", "setting": "-", "build_s": build, "bytes": corpus.nbytes}
    return ids, row | {"qps": len(queries) / seconds, "recall@10": 1.0}


def measure(
    name: str,
    corpus: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    min_seconds: float,
    rows: list[dict],
    save: Callable[[], None],
) -> None:
    """Build each kind with its defaults and sweep its search setting, appending rows and saving after each."""
    for kind, (knob, values) in SWEEPS.items():
        start = time.perf_counter()
        index = Index.build(corpus, kind=kind, metric="ip")  # type: ignore[arg-type]
        build = time.perf_counter() - start
        size = index_bytes(index)
        for value in values:
            extra = {} if knob is None else {knob: value}
            found, seconds = timed(
                lambda index=index, extra=extra: index.search(queries, K, **extra), min_seconds
            )
            hits = (found.ids[:, :, None] == truth[:, None, :]).any(axis=2).sum(axis=1)
            rows.append(
                {
                    "set": name,
                    "kind": kind,
                    "params": index.params,
                    "setting": "-" if knob is None else f"{knob}={value}",
                    "build_s": build,
                    "bytes": size,
                    "qps": len(queries) / seconds,
                    "recall@10": float(hits.mean() / K),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            save()
        del index


def table(name: str, n: int, exact: dict, rows: list[dict]) -> str:
    """A Markdown table: kind, setting, build time, memory, QPS, speed-up over exact, recall@10."""
    lines = [
        f"**{name}** (N = {n:,}, d = {DIM})",
        "",
        "| kind | setting | build s | MiB | QPS | x exact | recall@10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in [exact, *rows]:
        speed = row["qps"] / exact["qps"]
        lines.append(
            f"| {row['kind']} | {row['setting']} | {row['build_s']:.1f} | {row['bytes'] / 2**20:.0f} | "
            f"{row['qps']:,.0f} | {speed:.1f} | {row['recall@10']:.3f} |"
        )
    return "\n".join(lines)


def data_set(name: str, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries) of a named data set."""
    if name == "fashion":
        vectors = fashion_embeddings(args.run, args.train_steps)
        order = np.random.default_rng(0).permutation(len(vectors))
        return vectors[order[args.queries :]], vectors[order[: args.queries]]
    n = {"vmf-1e5": 100_000, "vmf-1e6": 1_000_000}[name]
    return vmf_mixture(n, seed=1), vmf_mixture(args.queries, seed=2)


def main() -> None:
    """Run the data sets named by --sets and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets", nargs="+", default=["fashion", "vmf-1e5"], choices=["fashion", "vmf-1e5", "vmf-1e6"]
    )
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--run", type=Path, default=None, help="a run folder with embedding_dim = 128")
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_search.json"))
    args = parser.parse_args()
    faiss.omp_set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    report: dict[str, Any] = {}
    for name in args.sets:
        corpus, queries = data_set(name, args)
        truth, exact = exact_baseline(corpus, queries, args.min_seconds)
        print(json.dumps({"set": name, **exact}), flush=True)
        rows: list[dict] = []
        report[name] = {"n": len(corpus), "queries": len(queries), "exact": exact, "rows": rows}
        args.out.parent.mkdir(parents=True, exist_ok=True)

        def save() -> None:
            args.out.write_text(json.dumps(report, indent=1))

        measure(name, corpus, queries, truth, args.min_seconds, rows, save)
        print(table(name, len(corpus), exact, rows), flush=True)


if __name__ == "__main__":
    main()
