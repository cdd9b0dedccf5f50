"""Exact class retrieval when scores tie: crl.metrics.ir's dense ranking of a flat index against the widening search.

    .venv/bin/python -m studies.ir_ties                     # N = 10,000, d = 128: about 3 minutes on 2 cores
    .venv/bin/python -m studies.ir_ties --items 3000 --out runs/bench_ir_ties.json

:func:`crl.metrics.ir.class_retrieval` ranks each of N items against the N - 1 others (10 classes, own item removed,
pessimistic ties). Two ways, on the same vectors:

- ``dense`` (what a flat :class:`crl.search.Index` gets): blocks of scores, the K-th largest found by partition,
  the tie block at it filled from its counts;
- ``widening`` (what any other backend gets, and what flat indexes got before): the index's top K + 1, the request
  doubled while the K-th score ties with the last one, every row of a batch searched again.

Embeddings: ``spread`` (Gaussian, no ties) and ``collapsed`` (4 distinct unit vectors repeated, as a contrastive
head that collapsed at a small number of negatives gives; every score ties with a quarter of the items). Each
(path, embeddings) runs in its own process, so its peak resident memory (VmHWM) is its own. On spread embeddings
the two paths' metrics agree up to the rare pair of scores within float32 rounding of each other, which numpy's
and faiss's products may order differently. On collapsed ones the pessimistic rule's answer is 0 for every metric
at k <= 10 (each query's tie block at its top score holds hundreds of items of other classes); the widening path
misses part of those ties because faiss's batched product rounds copies of one vector differently by position (a
query's top 200 then holds two distinct scores where all are equal). Prints a Markdown table and writes the
rows to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from benchmarks._rss import peak_rss_bytes

ROOT = Path(__file__).resolve().parents[1]
"""The repository: each case's own process runs ``python -m studies.ir_ties`` from there."""
CASES = ("spread", "collapsed")
PATHS = ("dense", "widening")


class _Searched:
    """A backend that is not a crl Index, over a flat one: evaluate_index then searches it, widening at ties."""

    def __init__(self, index: object) -> None:
        self.inner = index

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]


def embeddings(case: str, items: int, dim: int) -> np.ndarray:
    """(items, dim) float32 unit rows: ``spread`` Gaussian, ``collapsed`` 4 distinct rows repeated."""
    rng = np.random.default_rng(0)
    if case == "spread":
        rows = rng.standard_normal((items, dim))
    else:
        rows = rng.standard_normal((4, dim))[rng.integers(0, 4, size=items)]
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def one(case: str, path: str, items: int, dim: int) -> dict[str, object]:
    """Time, peak RSS and metrics of one (case, path) in this process."""
    # Loaded in the case's own fresh process, after its memory baseline, so that the case's peak counts them.
    from crl.metrics.ir import evaluate_index, label_relevance
    from crl.search import Index

    matrix = embeddings(case, items, dim)
    labels = label_relevance(np.arange(items) % 10, np.arange(items) % 10)
    index = Index.build(matrix, metric="ip")
    backend = index if path == "dense" else _Searched(index)
    start = time.perf_counter()
    report = evaluate_index(backend, matrix, labels=labels, self_ids=np.arange(items))  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    return {
        "case": case,
        "path": path,
        "items": items,
        "seconds": seconds,
        "peak_rss_mib": peak_rss_bytes() / 2**20,
        "metrics": report.as_flat_dict(),
    }


def _largest_gap(mine: dict[str, float], theirs: object) -> float:
    """The largest |difference| between two flat metric dicts."""
    assert isinstance(theirs, dict)
    return max(abs(value - theirs[name]) for name, value in mine.items())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_ir_ties.json"))
    parser.add_argument("--one", nargs=2, metavar=("CASE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.items, args.dim)))
        return
    rows = []
    for case in CASES:
        for path in PATHS:
            command = [
                sys.executable,
                "-m",
                "studies.ir_ties",
                "--items",
                str(args.items),
                "--dim",
                str(args.dim),
                "--one",
                case,
                path,
            ]
            done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"N = {args.items}, d = {args.dim}, 10 classes, every item queries the others (K = 100)\n")
    print(
        "| embeddings | path | seconds | peak RSS (MiB) | accuracy@1 | nDCG@10 | max |difference| from the other path |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        twin = next(r for r in rows if r["case"] == row["case"] and r["path"] != row["path"])
        metrics = row["metrics"]
        assert isinstance(metrics, dict)
        print(
            f"| {row['case']} | {row['path']} | {row['seconds']:.1f} | {row['peak_rss_mib']:.0f} |"
            f" {metrics['accuracy@1']:.4f} | {metrics['ndcg@10']:.4f} | {_largest_gap(metrics, twin['metrics']):.2g} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
