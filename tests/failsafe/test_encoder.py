"""A text index queried after its model's weights were replaced: ``crl search``, ``crl serve`` and a Milvus
collection exported from the index.

If these fail, text queries would be embedded by another model than the items and answered with other ids, exit 0
(the index records the weights' SHA-256 and nobody checked it), or ``--allow-other-encoder`` would not let a user
who means it go on.
"""

import shutil
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from crl.commands import app
from crl.commands.serve import serving_app
from crl.models.minilm import packaged_model_path, weights_file
from crl.search import Index, sha256
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
    """The fixture itself: the weights on disk are no longer those the index records."""
    recorded = Index.load(replaced).encoder
    assert recorded is not None and sha256(weights_file(recorded.checkpoint)) != recorded.fingerprint


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
