"""The offline MiniLM encoder against sentence-transformers' own encode, its save format, and its errors."""

import logging
import os
from pathlib import Path

import pytest
import torch

from crl.models import Encoder
from crl.models.minilm import (
    MiniLM,
    embed_texts,
    load_tokenizer,
    packaged_model_path,
    resolve_model_path,
    save_sentence_transformer,
    saved_max_seq_length,
    tokenize,
)

SENTENCES = [
    "a large body of water",
    "The cat sat on the mat.",
    "In the beginning God created the heaven and the earth.",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    torch.set_num_threads(1)
    return MiniLM()


def test_loading_is_offline(minilm: MiniLM) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert minilm.source_path == packaged_model_path()
    assert minilm.dim == 384


def test_embeddings_equal_sentence_transformers_encode(minilm: MiniLM) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(packaged_model_path()), device="cpu").encode(SENTENCES)
    ours = embed_texts(SENTENCES, model=minilm)
    torch.testing.assert_close(ours, torch.from_numpy(reference), rtol=0, atol=1e-5)
    torch.testing.assert_close(ours.norm(dim=1), torch.ones(3))


def test_encoder_wrapper_is_the_unit_norm_mean_pool(minilm: MiniLM) -> None:
    batch = tokenize(load_tokenizer(), SENTENCES, 128)
    minilm.eval()
    with torch.no_grad():
        torch.testing.assert_close(Encoder(minilm)(batch), embed_texts(SENTENCES, model=minilm))


def test_padding_does_not_change_an_embedding(minilm: MiniLM) -> None:
    alone = embed_texts(SENTENCES[:1], model=minilm)
    padded = embed_texts(SENTENCES, model=minilm)[:1]
    torch.testing.assert_close(alone, padded, rtol=0, atol=1e-5)


def test_long_texts_are_truncated_at_max_seq_length(minilm: MiniLM) -> None:
    long = " ".join(["water"] * 400)
    tokens = tokenize(load_tokenizer(), [long], 16)
    assert tokens["input_ids"].shape == (1, 16)
    torch.testing.assert_close(
        embed_texts([long], model=minilm, max_seq_length=16),
        embed_texts([" ".join(["water"] * 14)], model=minilm, max_seq_length=16),
    )


def test_a_truncation_says_how_many_texts_and_characters_it_cut(
    minilm: MiniLM, caplog: pytest.LogCaptureFixture
) -> None:
    """Texts beyond max_seq_length word pieces were once cut without a word: the warning counts them and the
    characters dropped, each equal to what follows the 14th word piece in the tokenizer's own untruncated
    offsets (16 with [CLS] and [SEP]); a text that fits, or whose rest is whitespace, counts nothing."""
    texts = ["a short text", " ".join(f"river{i}" for i in range(40)), " ".join(["water"] * 14) + "   "]
    untruncated = load_tokenizer()(texts[1], add_special_tokens=False, return_offsets_mapping=True)
    dropped = len(texts[1]) - untruncated["offset_mapping"][13][1]
    with caplog.at_level(logging.WARNING, logger="crl"):
        embed_texts(texts, model=minilm, max_seq_length=16)
    assert [record.getMessage() for record in caplog.records] == [
        "1 of 3 texts are longer than 16 word pieces and were embedded from their first 16 only (as "
        f"sentence-transformers does): {dropped:,} characters dropped, {dropped:,} from text 1 (line 2 of a "
        "--text-file)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crl"):
        embed_texts(texts[:1], model=minilm)
    assert caplog.records == []


def test_saved_model_loads_in_sentence_transformers(minilm: MiniLM, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    with torch.no_grad():
        minilm.transformer.pooler.dense.bias.zero_()
        minilm.transformer.encoder.layer[0].output.dense.bias.add_(0.01)
    folder = save_sentence_transformer(minilm, tmp_path / "st", max_seq_length=64)
    loaded = SentenceTransformer(str(folder), device="cpu")
    assert loaded.max_seq_length == 64
    expected = embed_texts(SENTENCES, model=minilm)
    torch.testing.assert_close(torch.from_numpy(loaded.encode(SENTENCES)), expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(embed_texts(SENTENCES, folder), expected, rtol=0, atol=1e-5)


PARAGRAPH = (
    "The river rose through the night, and by morning the lower fields of the valley lay under brown water. "
    "Farmers moved their cattle to the ridge, while the ferryman, who had crossed that stretch for forty years, "
    "refused to take his boat out until the current slowed. "
)
LONG_TEXTS = [PARAGRAPH * 2, PARAGRAPH * 4, PARAGRAPH * 7]
"""About 110, 220 and 390 word pieces: past 64 and 128, within and past all-MiniLM-L6-v2's own 256."""


def _cosines(ours: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The cosine of each row of ``ours`` with the same row of ``reference``."""
    return torch.nn.functional.cosine_similarity(ours.double(), reference.double(), dim=1)


def test_long_texts_equal_sentence_transformers_encode(minilm: MiniLM, tmp_path: Path) -> None:
    """Long texts embed as ``SentenceTransformer(path).encode`` embeds them, for the packaged model (256 word
    pieces) and for a saved model of max_seq_length 64; if this fails, crl truncates at a length of its own rather
    than the model's saved one (a 254-piece text then differs from sentence-transformers' by cos 0.97)."""
    from sentence_transformers import SentenceTransformer

    pieces = [len(load_tokenizer()(text)["input_ids"]) for text in LONG_TEXTS]
    assert pieces[0] > 64 + 32 and 128 + 32 < pieces[1] < 256 and pieces[2] > 256 + 32
    packaged = SentenceTransformer(str(packaged_model_path()), device="cpu")
    reference = torch.from_numpy(packaged.encode(LONG_TEXTS))
    assert saved_max_seq_length() == packaged.max_seq_length == 256
    assert bool((_cosines(embed_texts(LONG_TEXTS, model=minilm), reference) >= 0.9999).all())
    folder = save_sentence_transformer(minilm, tmp_path / "st64", max_seq_length=64)
    saved = SentenceTransformer(str(folder), device="cpu")
    assert saved.max_seq_length == 64
    ours = embed_texts(LONG_TEXTS, folder)
    assert bool((_cosines(ours, torch.from_numpy(saved.encode(LONG_TEXTS))) >= 0.9999).all())


def test_the_user_length_overrides_the_saved_one(minilm: MiniLM) -> None:
    """An explicit max_seq_length still truncates there: if this fails, the saved length took over the user's."""
    cut = embed_texts(LONG_TEXTS[1:2], model=minilm, max_seq_length=128)
    first_pieces = load_tokenizer().decode(load_tokenizer()(LONG_TEXTS[1])["input_ids"][1:127])
    torch.testing.assert_close(cut, embed_texts([first_pieces], model=minilm), rtol=0, atol=1e-4)


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        tokenize(load_tokenizer(), ["fine", "  "], 8)
    with pytest.raises(ValueError, match="texts is empty"):
        embed_texts([])
    with pytest.raises(ValueError, match="not a folder"):
        resolve_model_path(tmp_path / "absent")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no weights"):
        resolve_model_path(tmp_path)
