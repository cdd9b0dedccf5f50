"""Load and faults on ``crl serve``: requests/s and latency percentiles of POST /search under concurrent clients.

    python benchmarks/service.py                      # N = 20,000 vectors, d = 128, 8 clients, 10 s per case
    python benchmarks/service.py --backend milvus --seconds 30      # the service in front of a Milvus server

``--backend faiss``: the index (flat, the kind ``crl index build`` chooses at this N) is saved to a temporary
folder and served by ``python -m crl serve DIR`` in a subprocess (one faiss thread).

``--backend milvus``: a Milvus standalone server (``crl.search.milvus_local.local_server``, session lease
``--session-ttl`` s) starts in a temporary folder, the vectors go into a FLAT collection, and
``python -m crl serve milvus://...`` (``--timeout`` s per backend call, Bounded reads) serves it. After the load
cases, the fault case: the load goes on while a writer inserts ``--insert-batch`` new items at a time through
``MilvusIndex`` (Strong), the server is killed (SIGKILL) ``--kill-after`` s in, started again ``--down`` s
later, and the load runs until ``--after`` s past the first 200 after the restart. It prints the answers by
status, the 503s, the time from the kill and from the restart to the first 200, and how many of the inserts the
server acknowledged before the kill are found after the restart.

The clients are threads of this process, each with its own HTTP connection, sending requests back to back for
``--seconds`` per load case (a batch of 1 and of 16 query vectors, k = 10). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from crl.search import BackendUnavailableError, Index
from crl.search.milvus import MilvusIndex
from crl.search.milvus_local import local_server

TRANSPORT_ERROR = 0
"""The status recorded for a request that got no HTTP answer (connection refused or reset, timeout)."""


@dataclass(frozen=True)
class Answer:
    """One request: when it was sent (monotonic s), how long it took (s), and its HTTP status."""

    sent: float
    seconds: float
    status: int


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
    """Poll GET /health until it answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"crl serve exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("crl serve did not answer /health in time")


def run_clients(
    url: str, queries: np.ndarray, batch: int, clients: int, until: Callable[[], bool]
) -> list[Answer]:
    """Every answer of ``clients`` threads sending requests of ``batch`` queries back to back until ``until()``."""
    answers: list[Answer] = []
    lock = threading.Lock()

    def client(seed: int) -> None:
        rng = np.random.default_rng(seed)
        mine = []
        with httpx.Client(timeout=60) as http:
            while not until():
                rows = rng.integers(0, len(queries), size=batch)
                sent = time.monotonic()
                try:
                    body = {"vectors": queries[rows].tolist(), "k": 10}
                    status = http.post(f"{url}/search", json=body).status_code
                except httpx.TransportError:
                    status = TRANSPORT_ERROR
                mine.append(Answer(sent, time.monotonic() - sent, status))
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def past(moment: float) -> Callable[[], bool]:
    """A test of whether the monotonic clock has reached ``moment``."""
    return lambda: time.monotonic() >= moment


def load_table(url: str, queries: np.ndarray, clients: int, seconds: float) -> None:
    """Print requests/s, queries/s, p50/p99 latency and errors for batches of 1 and 16 queries."""
    print(
        "\n| queries per request | requests/s | queries/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|"
    )
    for batch in (1, 16):
        answers = run_clients(url, queries, batch, clients, past(time.monotonic() + seconds))
        ok = [a.seconds for a in answers if a.status == 200]
        p50, p99 = np.percentile(np.array(ok) * 1000, [50, 99])
        rate = len(ok) / seconds
        errors = len(answers) - len(ok)
        print(
            f"| {batch} | {rate:,.0f} | {rate * batch:,.0f} | {p50:.1f} | {p99:.1f} | {errors} |", flush=True
        )


@contextmanager
def served(target: str, extra: list[str]) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m crl serve TARGET`` on a free port, healthy; terminated on leaving."""
    port = free_port()
    command = [sys.executable, "-m", "crl", "serve", target, "--port", str(port), *extra]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                wait_healthy(url, process)
            except RuntimeError as error:
                log.seek(0)
                raise RuntimeError(f"{error}: {log.read().decode(errors='replace')[-2000:]}") from None
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=30)


def faiss_case(args: argparse.Namespace, vectors: np.ndarray, queries: np.ndarray) -> None:
    """The load cases against a saved faiss index."""
    with tempfile.TemporaryDirectory() as folder:
        Index.build(vectors).save(Path(folder) / "index")
        with served(str(Path(folder) / "index"), []) as (url, _):
            print(
                f"N = {args.n:,}, d = {args.dim}, flat index, {args.clients} clients, {args.seconds:g} s per case"
            )
            load_table(url, queries, args.clients, args.seconds)


def milvus_case(args: argparse.Namespace, vectors: np.ndarray, queries: np.ndarray) -> None:
    """The load cases and the fault case against a Milvus collection behind the service."""
    with tempfile.TemporaryDirectory() as folder:
        server = local_server(folder, port=free_port(), session_ttl_s=args.session_ttl)
        started = time.monotonic()
        server.start()
        print(f"Milvus standalone started in {time.monotonic() - started:.1f} s", flush=True)
        try:
            uri = f"milvus://127.0.0.1:{server.listen_port}/bench"
            collection = MilvusIndex.create(uri, args.dim)
            started = time.monotonic()
            for start in range(0, args.n, 5000):
                part = np.arange(start, min(start + 5000, args.n))
                collection.add(vectors[part], part)
            print(f"{args.n:,} vectors inserted in {time.monotonic() - started:.1f} s", flush=True)
            with served(uri, ["--timeout", str(args.timeout)]) as (url, _):
                print(
                    f"N = {args.n:,}, d = {args.dim}, Milvus FLAT collection (Bounded reads), {args.clients} "
                    f"clients, {args.seconds:g} s per case"
                )
                load_table(url, queries, args.clients, args.seconds)
                fault_case(args, server, uri, url, queries)
        finally:
            server.stop()


def fault_case(args: argparse.Namespace, server: Any, uri: str, url: str, queries: np.ndarray) -> None:
    """Load and inserts while the server is killed and restarted; print what the clients and the writer saw."""
    writer = MilvusIndex.connect(uri, timeout=args.timeout)
    acknowledged: list[np.ndarray] = []
    stop = threading.Event()

    def insert() -> None:
        next_id = 10 * args.n
        rng = np.random.default_rng(1)
        while not stop.is_set():
            ids = np.arange(next_id, next_id + args.insert_batch)
            try:
                writer.add(rng.standard_normal((ids.size, args.dim)).astype(np.float32), ids)
            except BackendUnavailableError:
                return
            acknowledged.append(ids)
            next_id += ids.size

    answers: list[Answer] = []
    loader = threading.Thread(
        target=lambda: answers.extend(run_clients(url, queries, 1, args.clients, stop.is_set))
    )
    inserter = threading.Thread(target=insert)
    loader.start()
    inserter.start()
    time.sleep(args.kill_after)
    server.server_proc.kill()
    server.server_proc.wait()
    killed = time.monotonic()
    inserter.join()
    time.sleep(args.down)
    restarted = time.monotonic()
    server.start()
    up = time.monotonic()
    back = wait_for_200(url, queries[:1], restarted + 600)
    time.sleep(args.after)
    stop.set()
    loader.join()
    by_status = Counter(a.status for a in answers)
    inserted = np.concatenate(acknowledged) if acknowledged else np.empty(0, dtype=np.int64)
    held = set(after_restart(lambda: writer.ids).tolist())
    found = sum(int(i) in held for i in inserted)
    print(
        f"\nFault: server killed (SIGKILL) {args.kill_after:g} s into load ({args.clients} clients, 1 query per "
        f"request) and inserts ({args.insert_batch} items per insert, Strong), started again {args.down:g} s later "
        f"(start() took {up - restarted:.1f} s, session lease {args.session_ttl} s), load until {args.after:g} s "
        f"after the first 200; service --timeout {args.timeout:g}\n"
    )
    print(
        "| answers | 200 | 503 | other errors | kill -> first 200 s | restart -> first 200 s | start() "
        "returned -> first 200 s | inserts acknowledged before the kill | found after the restart |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    other = len(answers) - by_status[200] - by_status[503]
    print(
        f"| {len(answers)} | {by_status[200]} | {by_status[503]} | {other} | {back - killed:.1f} | "
        f"{back - restarted:.1f} | {back - up:.1f} | {inserted.size:,} | {found:,} |",
        flush=True,
    )
    if other:
        print(f"other statuses: {dict((s, c) for s, c in by_status.items() if s not in (200, 503))}")


def after_restart(read: Callable[[], np.ndarray], attempts: int = 30) -> np.ndarray:
    """``read()``, tried again once a second while the backend is still unavailable."""
    for _ in range(attempts - 1):
        try:
            return read()
        except BackendUnavailableError:
            time.sleep(1.0)
    return read()


def wait_for_200(url: str, query: np.ndarray, deadline: float) -> float:
    """The monotonic time of the first 200 of a /search of ``query`` (1, d) after now (polling every 0.1 s until
    ``deadline``)."""
    body = {"vectors": query.tolist(), "k": 1}
    with httpx.Client(timeout=60) as http:
        while time.monotonic() < deadline:
            try:
                if http.post(f"{url}/search", json=body).status_code == 200:
                    return time.monotonic()
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError("the service did not answer 200 again in time")


def main() -> None:
    """Serve an index (or a Milvus collection) in a subprocess and print the load (and fault) figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("faiss", "milvus"), default="faiss")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=2.0, help="milvus: crl serve --timeout")
    parser.add_argument("--session-ttl", type=int, default=3, help="milvus: the server's session lease, s")
    parser.add_argument("--insert-batch", type=int, default=100, help="milvus: items per insert")
    parser.add_argument("--kill-after", type=float, default=10.0, help="milvus: s of load before the kill")
    parser.add_argument("--down", type=float, default=5.0, help="milvus: s between the kill and the restart")
    parser.add_argument("--after", type=float, default=10.0, help="milvus: s of load after the first 200")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    queries = rng.standard_normal((1000, args.dim)).astype(np.float32)
    if args.backend == "faiss":
        faiss_case(args, vectors, queries)
    else:
        milvus_case(args, vectors, queries)


if __name__ == "__main__":
    main()
