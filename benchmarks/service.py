"""Load on ``crl serve``: requests/s and latency percentiles of POST /search under concurrent clients.

    python benchmarks/service.py                      # N = 20,000 vectors, d = 128, 8 clients, 10 s per case

The index (flat, the kind ``crl index build`` chooses at this N) is saved to a temporary folder and served by
``python -m crl serve DIR`` in a subprocess (one faiss thread); the clients are threads of this process, each
with its own HTTP connection, sending requests back to back for ``--seconds`` per case (a batch of 1 and of 16
query vectors, k = 10). Prints one Markdown table: requests/s, queries/s, p50 and p99 latency in ms.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from crl.search import Index


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll GET /health until it answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"crl serve exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("crl serve did not answer /health in time")


def load(url: str, queries: np.ndarray, batch: int, clients: int, seconds: float) -> tuple[int, list[float]]:
    """(requests answered 200, latencies in seconds) of ``clients`` threads sending back to back."""
    latencies: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(seed: int) -> None:
        rng = np.random.default_rng(seed)
        mine, bad = [], 0
        with httpx.Client(timeout=30) as http:
            while time.monotonic() < stop:
                rows = rng.integers(0, len(queries), size=batch)
                start = time.perf_counter()
                status = http.post(
                    f"{url}/search", json={"vectors": queries[rows].tolist(), "k": 10}
                ).status_code
                mine.append(time.perf_counter() - start)
                bad += status != 200
        with lock:
            latencies.extend(mine)
            failures.append(bad)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if sum(failures):
        raise RuntimeError(f"{sum(failures)} requests did not answer 200")
    return len(latencies), latencies


def main() -> None:
    """Serve an index in a subprocess and print the load figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    queries = rng.standard_normal((1000, args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        Index.build(vectors).save(Path(folder) / "index")
        port = free_port()
        command = [sys.executable, "-m", "crl", "serve", str(Path(folder) / "index"), "--port", str(port)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, process)
            print(
                f"N = {args.n:,}, d = {args.dim}, flat index, {args.clients} clients, {args.seconds:g} s per case"
            )
            print(
                "\n| queries per request | requests/s | queries/s | p50 ms | p99 ms |\n|---|---|---|---|---|"
            )
            for batch in (1, 16):
                count, latencies = load(url, queries, batch, args.clients, args.seconds)
                p50, p99 = np.percentile(np.array(latencies) * 1000, [50, 99])
                rate = count / args.seconds
                print(f"| {batch} | {rate:,.0f} | {rate * batch:,.0f} | {p50:.1f} | {p99:.1f} |", flush=True)
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
