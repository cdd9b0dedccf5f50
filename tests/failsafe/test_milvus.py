"""A Milvus collection on hostile filters, racing writers and the ids Milvus keeps for itself, and the server's
sockets, against the session's real Milvus server on 127.0.0.1 (tests/milvus_server.py; outside CI these skip
where it cannot start).

If these fail, another machine could read or crash the local server through its internal ports, one client's
filter would mark the connection stale and turn every other client's request into a
503 while it reconnects, a filter faiss answers would be a Milvus error, one id would become several rows, or an
id would be counted but never found, or an interrupted export would leave a partial collection that looks
complete.
"""

import ipaddress
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from crl.commands import app
from crl.search import BackendUnavailableError, Index, milvus
from crl.search.milvus import UNFINISHED, MilvusIndex, export_index
from crl.serving.service import create_app
from tests.milvus_server import answering_addresses, namespace_addresses, process_tree, uri

N, D = 60, 8
KEYWORDS = ("like", "and", "or", "not", "in", "exists", "json_contains")
"""Words of Milvus's expression grammar, used as metadata field names."""


@pytest.fixture(scope="module")
def items() -> tuple[np.ndarray, np.ndarray, list[dict[str, Any] | None]]:
    """N vectors, ids 0..N-1, and metadata whose fields include every word of :data:`KEYWORDS`."""
    vectors = np.random.default_rng(5).standard_normal((N, D)).astype(np.float32)
    metadata: list[dict[str, Any] | None] = [
        {**{word: i % 3 for word in KEYWORDS}, "label": i % 4, "x": [0.0, 1.5, 3.0][i % 3]} for i in range(N)
    ]
    return vectors, np.arange(N), metadata


@pytest.fixture(scope="module")
def collection(milvus_server: Any, items: tuple[np.ndarray, np.ndarray, list[Any]]) -> MilvusIndex:
    created = MilvusIndex.create(uri(milvus_server, "failsafe_hostile"), D)
    created.add(*items)
    return created


ANSWERED = [{word: 1} for word in KEYWORDS] + [
    {"label": {"in": [0, 1.5]}},
    {"x": {"in": [0, 1.5]}},
    {"x": {"range": [1, 3]}},
]


@pytest.mark.parametrize("spec", ANSWERED, ids=[str(spec) for spec in ANSWERED])
def test_filters_faiss_answers_milvus_answers_alike(
    collection: MilvusIndex, items: tuple[np.ndarray, np.ndarray, list[Any]], spec: dict[str, Any]
) -> None:
    """A field named like a word of Milvus's grammar, or an "in" list mixing ints and floats, was a parse error
    reported as a lost server (503), where faiss answered."""
    vectors, ids, metadata = items
    queries = vectors[:3]
    expected = Index.build(vectors, ids, metadata=metadata).search(queries, 5, filter=spec)
    found = collection.search(queries, 5, filter=spec)
    assert found.ids.tolist() == expected.ids.tolist()


REFUSED = [
    ({"label": 2**63}, "int64"),
    ({"label": -(2**63) - 1}, "int64"),
    ({"label": "\ud800"}, "surrogate"),
]


@pytest.mark.parametrize(("spec", "message"), REFUSED, ids=["2**63", "-2**63-1", "lone surrogate"])
def test_filters_milvus_cannot_compare_are_a_value_error_before_the_server(
    collection: MilvusIndex, reconnects: list[int], spec: dict[str, Any], message: str
) -> None:
    """An integer beyond int64 or a lone surrogate reached the server, failed to parse, and marked the
    connection stale (the next call reconnected)."""
    with pytest.raises(ValueError, match=message):
        collection.search(np.ones((1, D), np.float32), 3, filter=spec)
    collection.search(np.ones((1, D), np.float32), 3)
    assert reconnects == []


def test_an_expression_the_server_refuses_is_a_value_error_and_keeps_the_connection(
    collection: MilvusIndex, reconnects: list[int]
) -> None:
    """Every server error, a parse error included, was a BackendUnavailableError that marked the connection
    stale; a request the server refuses is the caller's ValueError, and the next call reuses the connection."""
    with pytest.raises(ValueError, match="cannot parse expression") as raised:
        collection._call(lambda c: c.query(expr="(like == 1)", output_fields=["id"], timeout=5))
    assert not isinstance(raised.value, BackendUnavailableError)
    assert len(collection) == N
    assert reconnects == []


def test_the_service_answers_hostile_filters_with_a_4xx_or_faiss_ids_and_no_503(
    collection: MilvusIndex, items: tuple[np.ndarray, np.ndarray, list[Any]], reconnects: list[int]
) -> None:
    """One client sending {"filter": {"like": 1}} made every other client's request a 503 while the service
    reconnected (700 x 503 against 104 x 200)."""
    vectors, ids, metadata = items
    faiss = Index.build(vectors, ids, metadata=metadata)
    with TestClient(create_app(collection)) as http:
        for spec in [*ANSWERED, *(spec for spec, _ in REFUSED)]:
            body = json.dumps({"vectors": vectors[:2].tolist(), "k": 4, "filter": spec})
            answer = http.post("/search", content=body, headers={"content-type": "application/json"})
            if spec in ANSWERED:
                assert answer.status_code == 200, answer.text
                expected = faiss.search(vectors[:2], 4, filter=spec).ids.tolist()
                assert [result["ids"] for result in answer.json()["results"]] == expected
            else:
                assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "filter"]
        assert http.get("/health").status_code == 200
    assert reconnects == []


def test_four_threads_adding_one_id_make_one_row(milvus_server: Any) -> None:
    """add() checked then inserted, so 4 threads adding id 7 all succeeded and the collection held 4 rows."""
    collection = MilvusIndex.create(uri(milvus_server, "failsafe_racing"), D)
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def add() -> None:
        start.wait()
        try:
            collection.add(np.ones((1, D), np.float32), [7])
            outcomes.append("added")
        except ValueError:
            outcomes.append("refused")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["added", "refused", "refused", "refused"]
    assert len(collection) == 1 and collection.ids.tolist() == [7]


def test_the_id_milvus_keeps_for_itself_is_refused(milvus_server: Any) -> None:
    """Id 2**63 - 1 was counted but invisible to metadata, vectors and delete, and search(k=10) found 9."""
    collection = MilvusIndex.create(uri(milvus_server, "failsafe_sentinel"), D)
    with pytest.raises(ValueError, match="ids holds 9223372036854775807"):
        collection.add(np.ones((1, D), np.float32), [2**63 - 1])
    top = 2**63 - 2
    collection.add(np.eye(D, dtype=np.float32)[:2], [0, top], [{"a": 1}, {"a": 2}])
    assert len(collection) == 2 and collection.metadata([top]) == [{"a": 2}]
    assert collection.search(np.ones((1, D), np.float32), 2).found.tolist() == [2]
    assert collection.delete([top]) == 1


class InterruptedExportError(Exception):
    """The stand-in for a ^C or a lost process in the middle of an export."""


def test_an_interrupted_export_leaves_no_collection_that_looks_complete(
    milvus_server: Any, monkeypatch: pytest.MonkeyPatch, items: tuple[np.ndarray, np.ndarray, list[Any]]
) -> None:
    """An export stopped after 2 of 6 batches left a searchable collection of 20 of 60 items under its name, and
    a rerun said it existed already."""
    index = Index.build(*items[:2], metadata=items[2])
    address = uri(milvus_server, "failsafe_exported")
    add, calls = MilvusIndex.add, []

    def add_then_stop(self: MilvusIndex, *args: Any) -> np.ndarray:
        calls.append(1)
        if len(calls) > 2:
            raise InterruptedExportError
        return add(self, *args)

    monkeypatch.setattr(MilvusIndex, "add", add_then_stop)
    with pytest.raises(InterruptedExportError):
        export_index(index, address, batch=10)
    monkeypatch.setattr(MilvusIndex, "add", add)
    with pytest.raises(ValueError, match="does not exist"):
        MilvusIndex.connect(address)
    with pytest.raises(ValueError, match="unfinished copy of an export"):
        MilvusIndex.connect(address + UNFINISHED)
    exported = export_index(index, address, batch=10)
    assert len(exported) == N and exported.ids.tolist() == index.ids.tolist()


def test_export_refuses_an_existing_collection_unless_overwrite(
    milvus_server: Any, tmp_path: Path, items: tuple[np.ndarray, np.ndarray, list[Any]]
) -> None:
    """crl index export had no way to replace a collection; --overwrite replaces it with the index's items."""
    vectors, ids, metadata = items
    address = uri(milvus_server, "failsafe_replaced")
    Index.build(vectors[:7], ids[:7]).save(tmp_path / "seven")
    Index.build(vectors, ids, metadata=metadata).save(tmp_path / "all")
    assert (
        CliRunner().invoke(app, ["index", "export", str(tmp_path / "seven"), "--to", address]).exit_code == 0
    )
    again = CliRunner().invoke(app, ["index", "export", str(tmp_path / "all"), "--to", address])
    assert again.exit_code == 2 and "--overwrite" in again.output
    assert len(MilvusIndex.connect(address)) == 7
    command = ["index", "export", str(tmp_path / "all"), "--to", address, "--overwrite"]
    replaced = CliRunner().invoke(app, command)
    assert replaced.exit_code == 0, replaced.output
    assert MilvusIndex.connect(address).ids.tolist() == ids.tolist()


def test_a_k_above_the_collection_is_lowered_with_a_note_and_searched(collection: MilvusIndex) -> None:
    """crl search -k 16384 on a collection of 60 items printed a note lowering k to 60, then refused k = 16384."""
    result = CliRunner().invoke(app, ["search", str(collection.address), "1", "-k", "16384", "--json"])
    assert result.exit_code == 0, result.output
    assert "showing all 60" in result.stderr and "-k 16384:" not in result.stderr
    found = [hit["id"] for hit in json.loads(result.stdout)["results"]]
    assert len(found) == N - 1 and 1 not in found


def test_k_at_milvus_largest_with_the_query_item_left_out_names_the_k_passed(
    collection: MilvusIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """crl search -k K by id (its own item left out, so K + 1 asked) at Milvus's largest k said K + 1, a k nobody
    passed (Milvus's largest is 16,384; lowered here to 10 so that a collection of 60 reaches it)."""
    monkeypatch.setattr(milvus, "MAX_K", 10)
    result = CliRunner().invoke(app, ["search", str(collection.address), "1", "-k", "10"])
    assert result.exit_code == 2, result.output
    assert "-k 10" in result.output and "-k 9" in result.output and "11" not in result.output


def test_the_service_names_no_milvus_address_in_a_422_or_its_schema(
    collection: MilvusIndex, milvus_server: Any
) -> None:
    """An unknown id's 422 and /openapi.json's description showed milvus://HOST:PORT/COLLECTION."""
    with TestClient(create_app(collection)) as http:
        schema = http.get("/openapi.json")
        unknown = http.post("/search", json={"ids": [10**6]})
    assert schema.status_code == 200 and unknown.status_code == 422
    assert "is not in the collection" in unknown.text
    for text in (schema.text, unknown.text):
        assert f"127.0.0.1:{milvus_server.listen_port}" not in text and "failsafe_hostile" not in text


def _is_loopback(address: str) -> bool:
    """Whether ``address`` (IPv4, IPv6 or IPv4-mapped IPv6) is a loopback address."""
    parsed = ipaddress.ip_address(address)
    mapped = parsed.ipv4_mapped if isinstance(parsed, ipaddress.IPv6Address) else None
    return (mapped or parsed).is_loopback


def _root_coordinator_port(pid: int) -> int:
    """The root coordinator's port, as the config in the working folder of the Milvus binary ``pid`` names it."""
    config = (Path(os.readlink(f"/proc/{pid}/cwd")) / "configs" / "milvus.yaml").read_text()
    found = re.search(r"^rootCoord:\n(?:[ #].*\n)*?  port: (\d+)", config, flags=re.MULTILINE)
    assert found, "no rootCoord.port in the server's milvus.yaml"
    return int(found.group(1))


def _refuses(address: str, port: int) -> bool:
    """Whether a TCP connection to ``address``:``port`` is refused (nothing listens there)."""
    try:
        with socket.create_connection((address, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_no_socket_of_the_server_answers_beyond_loopback_and_its_root_coordinator_refuses(
    milvus_server: Any,
) -> None:
    """Milvus 2.3.5 listened on every interface with each of its ports: from another machine its root
    coordinator answered ShowCollections and DescribeCollection without credentials, and one empty call to it
    ended the whole server. Every listening socket of the server's processes, in whatever network namespace it
    sits, answers on loopback addresses only, and the root coordinator's port refuses on 127.0.0.1 and on every
    address of this machine (link-local ones aside: they need an interface to be reached)."""
    tree = process_tree(milvus_server.server_proc.pid)
    answering = [address for pid in tree for address in answering_addresses(pid)]
    assert answering, "no listening socket found in the server's processes"
    assert [a for a in answering if not _is_loopback(a.rsplit(":", 1)[0].strip("[]"))] == []
    binary = next(pid for pid in tree if Path(f"/proc/{pid}/exe").resolve().name == "milvus")
    port = _root_coordinator_port(binary)
    reachable = {a for a in namespace_addresses(os.getpid()) if not ipaddress.ip_address(a).is_link_local}
    for address in sorted({"127.0.0.1", *reachable}):
        assert _refuses(address, port), f"the root coordinator answers at {address}:{port}"


def test_connect_waits_for_a_collection_the_server_still_loads_and_says_so(
    collection: MilvusIndex, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """After a restart the server loads each collection again (first waiting out the stopped server's session,
    about 30 s), and the first query failed after 12 s with "unavailable (Deadline Exceeded); start the server"
    while the server was up. connect waits for the load, saying so once, and a load that outlasts the wait is
    said as such, never as a server to start."""
    from pymilvus import utility
    from pymilvus.client.types import LoadState

    loading = iter([LoadState.Loading, LoadState.Loading])
    load_state = utility.load_state
    monkeypatch.setattr(utility, "load_state", lambda *a, **kw: next(loading, None) or load_state(*a, **kw))
    with caplog.at_level(logging.INFO, logger="crl"):
        reopened = MilvusIndex.connect(str(collection.address))
    assert len(reopened) == N
    assert caplog.text.count("waiting for the server to load failsafe_hostile") == 1
    monkeypatch.setattr(utility, "load_state", lambda *a, **kw: LoadState.Loading)
    with pytest.raises(
        BackendUnavailableError, match="failsafe_hostile is still loading after 1 s"
    ) as raised:
        MilvusIndex.connect(str(collection.address), load_wait_s=1)
    assert "start" not in str(raised.value)


def test_a_second_export_to_one_name_is_refused_in_one_line_while_the_first_completes(
    milvus_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    items: tuple[np.ndarray, np.ndarray, list[Any]],
) -> None:
    """B started while A filled the collection: B dropped A's copy and filled its own, A printed "exported 60000
    items" with exit status 0, and the collection held 0 rows. One writer per name: B, started while A fills its
    copy, exits with one line naming the other export, and A's collection is whole."""
    index = Index.build(*items[:2], metadata=items[2])
    index.save(tmp_path / "ix")
    address = uri(milvus_server, "failsafe_two_writers")
    add, second = MilvusIndex.add, []

    def add_beside_a_second_export(self: MilvusIndex, *args: Any) -> np.ndarray:
        if not second:
            second.append(None)
            second.append(CliRunner().invoke(app, ["index", "export", str(tmp_path / "ix"), "--to", address]))
        return add(self, *args)

    monkeypatch.setattr(MilvusIndex, "add", add_beside_a_second_export)
    exported = export_index(index, address, batch=10)
    refused = second[1]
    assert refused.exit_code == 2 and refused.stderr.count("error:") == 1, refused.output
    assert f"another export to {address} is filling" in refused.stderr and "Traceback" not in refused.output
    assert len(exported) == N and exported.ids.tolist() == index.ids.tolist()


def test_an_export_replaced_by_an_overwriting_one_fails_in_one_line_and_the_name_holds_the_other(
    milvus_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    items: tuple[np.ndarray, np.ndarray, list[Any]],
) -> None:
    """An export whose copy another export (--overwrite) dropped and refilled went on and reported success; it
    fails naming the other export, and the collection holds the other export's items, whole."""
    vectors, ids, metadata = items
    Index.build(vectors[:7], ids[:7]).save(tmp_path / "seven")
    address = uri(milvus_server, "failsafe_overwritten")
    add, second = MilvusIndex.add, []

    def add_beside_an_overwriting_export(self: MilvusIndex, *args: Any) -> np.ndarray:
        if not second:
            second.append(None)
            command = ["index", "export", str(tmp_path / "seven"), "--to", address, "--overwrite"]
            second.append(CliRunner().invoke(app, command))
        return add(self, *args)

    monkeypatch.setattr(MilvusIndex, "add", add_beside_an_overwriting_export)
    with pytest.raises(ValueError, match=f"another export to {address} ran at the same time"):
        export_index(Index.build(vectors, ids, metadata=metadata), address, batch=10)
    assert second[1].exit_code == 0, second[1].output
    assert MilvusIndex.connect(address).ids.tolist() == ids[:7].tolist()


ADD_ONE_ID = """
import sys, time
import numpy as np
from crl.search.milvus import MilvusIndex
collection = MilvusIndex.connect(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
try:
    collection.add(np.ones((1, 8), np.float32), [7])
    print("added")
except ValueError as error:
    print(f"refused: {error}")
"""


def test_four_processes_adding_one_id_are_told_when_they_make_several_rows(milvus_server: Any) -> None:
    """Four processes adding id 7 at once all succeeded: the collection counted 4 rows and found 1, and nobody
    was told. Each add checks after its insert that its ids hold one row each: the collection holds one row, or
    a process that made a second one says so."""
    address = uri(milvus_server, "failsafe_four_processes")
    collection = MilvusIndex.create(address, D)
    start_at = str(time.time() + 8)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", ADD_ONE_ID, address, start_at], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    said = [writer.communicate(timeout=120)[0].strip() for writer in writers]
    assert all(line.startswith(("added", "refused: ")) for line in said), said
    told = [line for line in said if "another writer added id 7" in line]
    assert len(collection) == 1 or told, f"{len(collection)} rows of id 7, nobody told: {said}"
