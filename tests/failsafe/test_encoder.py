"""A text index queried after its model's weights, tokenizer, length or pooling were changed: ``crl search``,
``crl serve`` and a Milvus collection exported from the index.

If these fail, text queries would be embedded by another model than the items and answered with other ids, exit 0
(the index records the weights' SHA-256 and nobody checked it), or ``--allow-other-encoder`` would not let a user
who means it go on.
"""

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from crl.commands import app
from crl.commands.serve import serving_app
from crl.models.minilm import ENCODER_FILES, encoder_fingerprint, packaged_model_path, weights_file
from crl.search import Index
from crl.search.milvus import export_index
from crl.serving.queries import OtherEncoderError
from crl.serving.text import text_index
from tests.serving.helpers import CORPUS


@pytest.fixture(scope="module")
def replaced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A text index of CORPUS built with a copy of the packaged MiniLM, whose weights are then scaled by 1.5."""
    folder = tmp_path_factory.mktemp("encoder")
    model = folder / "model"
    shutil.copytree(packaged_model_path(), model)
    text_index(CORPUS, model).save(folder / "idx")
    weights = weights_file(model)
    tensors = load_file(weights)
    scaled = {
        name: tensor * 1.5 if tensor.is_floating_point() else tensor for name, tensor in tensors.items()
    }
    save_file({name: tensor.contiguous() for name, tensor in scaled.items()}, weights)
    return folder / "idx"


def test_the_replaced_weights_hash_differently(replaced: Path) -> None:
    """The fixture itself: the model folder on disk no longer has the fingerprint the index records."""
    recorded = Index.load(replaced).encoder
    assert recorded is not None and encoder_fingerprint(recorded.checkpoint) != recorded.fingerprint


def test_crl_search_refuses_a_text_query_with_other_weights(replaced: Path) -> None:
    """crl search embedded the query with the replaced weights and printed other ids, exit 0."""
    result = CliRunner().invoke(app, ["search", str(replaced), "water"])
    assert result.exit_code == 2, result.output
    assert "SHA-256" in result.output and "--allow-other-encoder" in result.output


def test_crl_search_with_allow_other_encoder_warns_and_answers(replaced: Path) -> None:
    """--allow-other-encoder is the way on for a user who means it: a warning, then the results."""
    result = CliRunner().invoke(app, ["search", str(replaced), "water", "-k", "2", "--allow-other-encoder"])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "another model" in result.output


def test_crl_serve_refuses_to_start_with_other_weights(replaced: Path) -> None:
    """crl serve answered text queries with the replaced weights."""
    with pytest.raises(OtherEncoderError, match="SHA-256"):
        serving_app(str(replaced), max_batch=4, max_k=4)
    with pytest.warns(UserWarning, match="another model"):
        serving_app(str(replaced), max_batch=4, max_k=4, allow_other_encoder=True)


def test_a_collection_exported_from_the_index_is_checked_too(replaced: Path, milvus_server: Any) -> None:
    """A Milvus collection records the encoder in its description; serving it skipped the check as well."""
    collection = export_index(
        Index.load(replaced), f"milvus://127.0.0.1:{milvus_server.listen_port}/replaced"
    )
    with pytest.raises(OtherEncoderError, match="SHA-256"):
        serving_app(str(collection.address), max_batch=4, max_k=4)


def _lowercase_off(model: Path) -> None:
    """The tokenizer stops lowercasing (its config and its fast tokenizer's normaliser)."""
    for name, edit in (
        ("tokenizer_config.json", lambda config: config.update(do_lower_case=False)),
        ("tokenizer.json", lambda tokenizer: tokenizer["normalizer"].update(lowercase=False)),
    ):
        document = json.loads((model / name).read_text(encoding="utf-8"))
        edit(document)
        (model / name).write_text(json.dumps(document), encoding="utf-8")


def _max_seq_length_3(model: Path) -> None:
    """sentence-transformers' length cut from 256 to 3 word pieces."""
    (model / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 3, "do_lower_case": False})
    )


def _pooling_cls(model: Path) -> None:
    """The pooling module set to the [CLS] token instead of the mean."""
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text(encoding="utf-8"))
    (pooling).write_text(
        json.dumps({**config, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a copy of the packaged MiniLM, a text index of CORPUS built with it)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    model = folder / "model"
    shutil.copytree(packaged_model_path(), model)
    return model, text_index(CORPUS, model).save(folder / "idx")


@pytest.mark.parametrize("change", [_lowercase_off, _max_seq_length_3, _pooling_cls])
def test_a_changed_tokenizer_length_or_pooling_is_refused_as_other_weights_are(
    text_model: tuple[Path, Path], change: Callable[[Path], None]
) -> None:
    """Only the weights were fingerprinted: a tokenizer that stopped lowercasing, or max_seq_length 256 -> 3,
    changed every text query's results with no warning (exit 0)."""
    model, index = text_model
    kept = {path: path.read_bytes() for path in model.rglob("*.json")}
    try:
        assert CliRunner().invoke(app, ["search", str(index), "water", "-k", "2"]).exit_code == 0
        change(model)
        result = CliRunner().invoke(app, ["search", str(index), "water", "-k", "2"])
        assert result.exit_code == 2, result.output
        assert "SHA-256" in result.output and "--allow-other-encoder" in result.output
        with pytest.raises(OtherEncoderError, match="SHA-256"):
            serving_app(str(index), max_batch=4, max_k=4)
    finally:
        for path, content in kept.items():
            path.write_bytes(content)


def test_the_fingerprint_covers_every_file_that_changes_the_encoder() -> None:
    """The files hashed: the weights, the transformer's config, the tokenizer's, and sentence-transformers'."""
    assert {
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "special_tokens_map.json",
        "sentence_bert_config.json",
        "modules.json",
        "1_Pooling/config.json",
    } <= set(ENCODER_FILES)
