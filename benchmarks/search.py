"""Approximate search that keeps its promise: build time, memory, QPS and recall@10 of crl.search's kinds.

    python benchmarks/search.py --sets fashion vmf-1e5             # minutes
    python benchmarks/search.py --sets vmf-1e6 --queries 1000      # the heavy run (about an hour on 2 cores)
    python benchmarks/search.py --sets --on-disk 1000000           # only the IVF whose lists are on disk
    python benchmarks/search.py --sets vmf-1e5 --kinds hnsw --milvus   # faiss HNSW beside Milvus HNSW

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

``--kinds`` limits the faiss kinds swept. ``--milvus`` adds Milvus HNSW with crl's HNSW defaults (M = 32,
efConstruction = 80) on the same vectors: a Milvus standalone server (``crl.search.milvus_local.local_server``) in a
temporary folder, the corpus inserted in batches of 10,000, flushed and indexed (build time: insert, flush,
index and load), searched with Eventually-consistent reads in batches of 1,000 queries at each ef; memory is
the growth of the server's resident set from before the insert to after the load.

``--on-disk N``: an IVF-Flat index (``--nlist``, ``--nprobe``) of N vectors of the vMF mixture whose inverted lists
live in a file (faiss's ``OnDiskInvertedLists``, built by ``faiss.contrib.ondisk.merge_ondisk``), searched in a
fresh process (numpy and faiss only) that memory-maps them: its peak anonymous RSS (``RssAnon``, sampled every
5 ms) against the index files' size, its QPS, and whether its results equal those of the same index in RAM.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
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
    """The 70k Fashion-MNIST images embedded (anchor tower, the DIM-dimensional embedding z) by the newest
    checkpoint of ``run``."""
    # Only the fashion set needs the images and a trained encoder: the vMF sets run without them.
    from crl.data.fashion_mnist import load_fashion_mnist
    from crl.serving.evaluate import embed_array

    folder = run if run is not None else train_encoder(train_steps)
    images = torch.cat([load_fashion_mnist(split).images for split in ("train", "test")]).squeeze(1)
    return embed_array(folder, images, device="cpu", batch_size=2048, vectors="z").vectors.numpy()


def train_encoder(steps: int) -> Path:
    """A small MLP encoder (embedding_dim = 128, in-batch InfoNCE on two views) in runs/bench_search_encoder."""
    # Training the encoder is this function's alone (the vMF sets and --run skip it).
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


def milvus_hnsw(
    name: str,
    corpus: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    min_seconds: float,
    rows: list[dict],
) -> None:
    """Milvus HNSW rows: a local server, the corpus inserted, flushed and indexed, searched at each ef."""
    # Deferred: pymilvus and the milvus package are the optional extra crl[milvus], needed only with --milvus.
    from crl.search.milvus import MilvusIndex
    from crl.search.milvus_local import local_server

    with tempfile.TemporaryDirectory() as folder:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        server = local_server(folder, port=port)
        server.start()
        try:
            binary = server.binary_pid  # the Milvus binary, under crl's sandbox process
            if binary is None:
                raise RuntimeError(f"the Milvus server in {folder} started but its binary is gone")
            before = resident_bytes(binary)
            start = time.perf_counter()
            uri = f"milvus://127.0.0.1:{server.listen_port}/{name.replace('-', '_')}"
            collection = MilvusIndex.create(uri, DIM, metric="ip", kind="hnsw", timeout=600)
            for first in range(0, len(corpus), 10_000):
                part = np.arange(first, min(first + 10_000, len(corpus)))
                collection.add(corpus[part], part)
            collection.flush()
            reader = MilvusIndex.connect(uri, consistency="Eventually", timeout=600)
            build = time.perf_counter() - start
            size = resident_bytes(binary) - before
            for ef in SWEEPS["hnsw"][1]:

                def search(ef: int = ef) -> np.ndarray:
                    parts = [
                        reader.search(queries[i : i + 1000], K, ef_search=ef).ids
                        for i in range(0, len(queries), 1000)
                    ]
                    return np.concatenate(parts)

                found, seconds = timed(search, min_seconds)
                hits = (found[:, :, None] == truth[:, None, :]).any(axis=2).sum(axis=1)
                rows.append(
                    {
                        "set": name,
                        "kind": "milvus hnsw",
                        "params": reader.params,
                        "setting": f"ef_search={ef}",
                        "build_s": build,
                        "bytes": size,
                        "qps": len(queries) / seconds,
                        "recall@10": float(hits.mean() / K),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
        finally:
            server.stop()


def resident_bytes(pid: int) -> int:
    """The resident set of process ``pid`` (VmRSS), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def measure(
    name: str,
    corpus: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    min_seconds: float,
    rows: list[dict],
    save: Callable[[], None],
    kinds: list[str],
) -> None:
    """Build each kind of ``kinds`` with its defaults and sweep its search setting, appending rows and saving
    after each."""
    for kind, (knob, values) in SWEEPS.items():
        if kind not in kinds:
            continue
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


MAPPED_SEARCH = """
import json, sys, threading, time
import faiss, numpy as np
folder, nprobe, threads, min_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
peak, done = [0], threading.Event()
def sample():
    while not done.is_set():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                peak[0] = max(peak[0], int(line.split()[1]) * 1024)
        time.sleep(0.005)
threading.Thread(target=sample, daemon=True).start()
faiss.omp_set_num_threads(threads)
index = faiss.read_index(folder + "/populated.index")
faiss.extract_index_ivf(index).nprobe = nprobe
queries = np.load(folder + "/queries.npy")
runs, start = 0, time.perf_counter()
while runs == 0 or time.perf_counter() - start < min_seconds:
    scores, ids = index.search(queries, 10)
    runs += 1
seconds = (time.perf_counter() - start) / runs
np.save(folder + "/mapped_ids.npy", ids)
np.save(folder + "/mapped_scores.npy", scores)
done.set()
time.sleep(0.01)
print(json.dumps({"peak_anon_bytes": peak[0], "qps": len(queries) / seconds}))
"""
"""The search of an on-disk IVF index in a fresh process: numpy and faiss only, the lists memory-mapped."""


def in_ram_ivf(
    corpus: np.ndarray, queries: np.ndarray, nlist: int, nprobe: int, folder: Path, min_seconds: float
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """An IVF-Flat index of ``corpus`` built and searched in RAM: (scores, ids, build s, search s); its trained
    empty form is written to ``folder``/trained.index and the full one to ``folder``/shard.index."""
    start = time.perf_counter()
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.train(corpus[np.random.default_rng(0).permutation(len(corpus))[: 64 * nlist]])
    faiss.write_index(ivf, str(folder / "trained.index"))
    ivf.add(corpus)
    build = time.perf_counter() - start
    ivf.nprobe = nprobe
    (scores, ids), seconds = timed(lambda: ivf.search(queries, K), min_seconds)
    faiss.write_index(ivf, str(folder / "shard.index"))
    return scores, ids, build, seconds


def on_disk_ivf(n: int, n_queries: int, nlist: int, nprobe: int, threads: int, min_seconds: float) -> dict:
    """Build an IVF-Flat index of ``n`` vMF vectors in RAM, move its lists to a file, search it memory-mapped
    in a fresh process, and compare: sizes, peak anonymous RSS, QPS, identical results."""
    queries = vmf_mixture(n_queries, seed=2)
    with tempfile.TemporaryDirectory(dir=".") as name:
        folder = Path(name).resolve()
        scores, ids, build, seconds = in_ram_ivf(
            vmf_mixture(n, seed=1), queries, nlist, nprobe, folder, min_seconds
        )
        # Deferred: faiss's contrib package is only needed to write the lists to disk.
        from faiss.contrib.ondisk import merge_ondisk

        populated = faiss.read_index(str(folder / "trained.index"))
        merge_ondisk(populated, [str(folder / "shard.index")], str(folder / "lists.ivfdata"))
        faiss.write_index(populated, str(folder / "populated.index"))
        (folder / "shard.index").unlink()
        np.save(folder / "queries.npy", queries)
        command = [
            sys.executable,
            "-c",
            MAPPED_SEARCH,
            str(folder),
            str(nprobe),
            str(threads),
            str(min_seconds),
        ]
        mapped = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        files = sum((folder / f).stat().st_size for f in ("populated.index", "lists.ivfdata"))
        same_ids = bool(np.array_equal(np.load(folder / "mapped_ids.npy"), ids))
        same_scores = bool(np.array_equal(np.load(folder / "mapped_scores.npy"), scores))
    return {
        "n": n,
        "nlist": nlist,
        "nprobe": nprobe,
        "build_s": build,
        "file_bytes": files,
        "peak_anon_bytes": mapped["peak_anon_bytes"],
        "file_over_peak_anon": files / mapped["peak_anon_bytes"],
        "qps_in_ram": len(queries) / seconds,
        "qps_mapped": mapped["qps"],
        "same_ids": same_ids,
        "same_scores": same_scores,
    }


def main() -> None:
    """Run the data sets named by --sets and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets", nargs="*", default=["fashion", "vmf-1e5"], choices=["fashion", "vmf-1e5", "vmf-1e6"]
    )
    parser.add_argument("--kinds", nargs="+", default=list(SWEEPS), choices=list(SWEEPS))
    parser.add_argument("--milvus", action="store_true", help="add Milvus HNSW on the same vectors")
    parser.add_argument("--on-disk", type=int, default=0, help="N of the on-disk IVF case (0: none)")
    parser.add_argument("--nlist", type=int, default=1024, help="the on-disk IVF's cells")
    parser.add_argument("--nprobe", type=int, default=32, help="the on-disk IVF's cells probed")
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

        measure(name, corpus, queries, truth, args.min_seconds, rows, save, args.kinds)
        if args.milvus:
            milvus_hnsw(name, corpus, queries, truth, args.min_seconds, rows)
            save()
        print(table(name, len(corpus), exact, rows), flush=True)
    if args.on_disk:
        row = on_disk_ivf(args.on_disk, args.queries, args.nlist, args.nprobe, args.threads, args.min_seconds)
        print(json.dumps(row), flush=True)
        print(
            "\n| N | nlist | nprobe | build s | index files MiB | peak anonymous RSS MiB | files / peak | "
            "QPS in RAM | QPS mapped | same ids | same scores |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
            f"| {row['n']:,} | {row['nlist']} | {row['nprobe']} | {row['build_s']:.1f} | "
            f"{row['file_bytes'] / 2**20:,.0f} | {row['peak_anon_bytes'] / 2**20:,.0f} | "
            f"{row['file_over_peak_anon']:.1f} | {row['qps_in_ram']:,.0f} | {row['qps_mapped']:,.0f} | "
            f"{row['same_ids']} | {row['same_scores']} |"
        )


if __name__ == "__main__":
    main()
