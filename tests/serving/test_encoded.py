"""crl index build / crl search on a tiny trained run: manifest provenance, id queries, the string hook, bad input."""

import json
from pathlib import Path

import numpy as np
import pytest

from crl.commands.index import index_build_command
from crl.commands.search import search_command
from crl.search import Index
from crl.search._files import sha256
from crl.serving import queries
from crl.train.checkpoint import resolve_checkpoint
from crl.train.data import labelled_inputs
from tests.train.helpers import fit, tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = tiny_config(
        tmp_path_factory.mktemp("runs"), "search", optim={"total_steps": 2, "warmup_steps": 1}
    )
    fit(config)
    return config.run_dir


@pytest.fixture(scope="module")
def built(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index") / "digits"
    assert index_build_command(run, out=out, device="cpu") == 0
    return out


def test_index_build_records_the_encoder_and_chooses_flat_for_small_n(run: Path, built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    checkpoint = resolve_checkpoint(run)
    assert manifest["encoder"] == {
        "checkpoint": str(checkpoint.resolve()),
        "fingerprint": sha256(checkpoint),
        "vectors": "z",  # two towers: their backbone features h are not comparable, so z
    }
    assert manifest["kind"] == "flat" and manifest["metric"] == "cosine" and manifest["dimension"] == 16
    assert set(manifest["sha256"]) == {"index.faiss", "ids.npy", "metadata.json"}
    index = Index.load(built)
    assert manifest["count"] == len(index) and index.metadata([0])[0] == {"label": int(_labels(run)[0])}


def _labels(run: Path) -> np.ndarray:
    from crl.train.config import load_config

    labelled = labelled_inputs(load_config(run / "config.toml").data, "train")
    assert labelled is not None
    return labelled.labels.numpy()


def test_search_by_item_id_with_include_self_finds_the_item_first(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert search_command(built, ["3", "11"], k=4, as_json=True, exclude_self=False) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["query"] for line in lines] == ["3", "11"]
    assert [line["results"][0]["id"] for line in lines] == [3, 11]
    assert lines[0]["results"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert search_command(built, ["5"], k=2) == 0
    assert "query 5" in capsys.readouterr().out


def test_an_id_query_leaves_its_own_item_out_and_still_returns_k(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """By default an id query's results are the k nearest *other* items: the include-self ranking without its
    first entry (the item itself), k of them, not k - 1."""
    assert search_command(built, ["3", "11"], k=4, as_json=True, exclude_self=False) == 0
    with_self = [json.loads(line)["results"] for line in capsys.readouterr().out.splitlines()]
    assert search_command(built, ["3", "11"], k=4, as_json=True) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for line, item, full in zip(lines, [3, 11], with_self, strict=True):
        ids = [hit["id"] for hit in line["results"]]
        assert item not in ids and len(ids) == 4 and line["found"] == 4 and line["shortfall"] is None
        assert ids[:3] == [hit["id"] for hit in full[1:]]


def test_leaving_the_item_out_of_an_index_of_k_items_says_why_fewer_came_back(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = len(Index.load(built))
    assert search_command(built, ["0"], k=size, as_json=True) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["found"] == size - 1 and 0 not in [hit["id"] for hit in line["results"]]
    assert "query item itself is left out" in line["shortfall"]


@pytest.mark.parametrize(
    ("queries", "reading", "message"),
    [
        (["1984"], "text", "'1984' is read as text"),
        (["a red shirt"], "id", "'a red shirt' is read as an item id but is not"),
    ],
)
def test_text_and_id_force_how_queries_are_read(
    built: Path, queries: list[str], reading: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--text reads "1984" as a string (this index has no string encoder, so it says so instead of searching
    item 1984); --id refuses a query that is not an integer."""
    assert search_command(built, queries, reading=reading) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_filter_keeps_only_the_items_whose_metadata_passes(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = Index.load(built)
    labels = {int(i): meta["label"] for i, meta in zip(index.ids, index.metadata(index.ids), strict=True)}
    wanted = labels[3]
    chosen = f'{{"label": {wanted}}}'
    assert search_command(built, ["3"], k=5, as_json=True, filter_json=chosen, exclude_self=False) == 0
    hits = json.loads(capsys.readouterr().out)["results"]
    assert hits[0]["id"] == 3 and len(hits) == 5 and {labels[hit["id"]] for hit in hits} == {wanted}


def test_string_queries_use_a_registered_string_encoder(
    built: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert search_command(built, ["a red shirt"]) == 2
    assert "no string encoder" in capsys.readouterr().err
    index = Index.load(built)
    target = index.vectors([9])

    def factory(provenance):  # type: ignore[no-untyped-def]
        if provenance.fingerprint != index.encoder.fingerprint:  # type: ignore[union-attr]
            return None
        return lambda strings: np.repeat(target, len(strings), axis=0)

    monkeypatch.setattr(queries, "_STRING_ENCODERS", [])
    queries.register_string_encoder(factory)
    assert search_command(built, ["a red shirt", "9"], k=1, as_json=True, exclude_self=False) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["results"][0]["id"] for line in lines] == [9, 9]
    # --text reads "9" as a string too, embedded by the same encoder; the text query's item is never left out
    assert search_command(built, ["9"], k=1, as_json=True, reading="text") == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["id"] == 9


def test_index_build_from_a_data_file_with_labels(run: Path, tmp_path: Path) -> None:
    from crl.train.config import load_config

    labelled = labelled_inputs(load_config(run / "config.toml").data, "train")
    assert labelled is not None
    np.savez(tmp_path / "items.npz", x=labelled.inputs[:300].numpy(), y=labelled.labels[:300].numpy())
    out = tmp_path / "ivf"
    params = {"nlist": 4, "nprobe": 4}
    code = index_build_command(
        run, out=out, data=tmp_path / "items.npz", labels_key="y", kind="ivf", params=params, device="cpu"
    )
    assert code == 0
    index = Index.load(out)
    assert index.kind == "ivf" and len(index) == 300 and index.params == params
    assert index.metadata([299])[0] == {"label": int(labelled.labels[299])}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "lsh"}, "--kind 'lsh'"),
        ({"metric": "l2"}, "--metric 'l2'"),
        ({"kind": "ivf", "params": {"nlist": 10**7}}, "nlist"),
        ({"kind": "flat", "params": {"nprobe": 3}}, "nprobe"),
        ({"labels_key": "y"}, "--labels-key needs --data"),
        ({"data": Path("missing.npz")}, "missing.npz"),
    ],
)
def test_bad_index_build_input_is_one_line(
    run: Path, tmp_path: Path, kwargs: dict, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert index_build_command(run, out=tmp_path / "idx", device="cpu", **kwargs) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_k_above_the_index_size_is_lowered_to_it_with_a_note(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """k = 10**6 on a small index answers as k = its size, with a note on stderr: if this fails, a search asking for
    more than the index holds is an error again (the README's k = 10 on 5 texts), or silently differs."""
    size = len(Index.load(built))
    assert search_command(built, ["3"], k=size, as_json=True) == 0
    expected = json.loads(capsys.readouterr().out)
    assert search_command(built, ["3"], k=10**6, as_json=True) == 0
    output = capsys.readouterr()
    assert json.loads(output.out) == expected and expected["k"] == size
    assert output.err == f"note: k = 1000000 is more than the {size} items of the index; showing all {size}\n"


@pytest.mark.parametrize(
    ("queries", "kwargs", "message"),
    [
        (["99999"], {}, "item 99999 is not in "),
        (["3"], {"k": 0}, "k=0 must be an integer >= 1"),
        (["3"], {"nprobe": 2}, "nprobe applies"),
        (["3"], {"filter_json": "{label: 1}"}, "--filter is not JSON"),
        (["3"], {"filter_json": "[1]"}, "--filter must be a JSON object"),
        (["3"], {"filter_json": '{"label": {"gt": 1}}'}, "not a condition"),
    ],
)
def test_bad_search_input_is_one_line(
    built: Path, queries: list, kwargs: dict, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert search_command(built, queries, **kwargs) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_id_names_the_ids_held_and_the_flag_for_text(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`crl search idx 1984` on a smaller index once answered "pass ids from index.ids", a Python attribute: the
    command names the ids the index holds and --text, the flag that searches "1984" as text."""
    held = Index.load(built).ids
    assert search_command(built, ["3", "99999"]) == 2
    error = capsys.readouterr().err
    assert f"ids {held.min()} to {held.max()}" in error and "--text to search the text '99999'" in error
    assert "index.ids" not in error


def test_a_truncated_index_file_is_one_line(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in built.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    data = (copy / "index.faiss").read_bytes()
    (copy / "index.faiss").write_bytes(data[: len(data) // 2])
    assert search_command(copy, ["1"]) == 2
    assert "corrupted" in capsys.readouterr().err
    assert search_command(tmp_path / "nowhere", ["1"]) == 2
