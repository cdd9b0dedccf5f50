"""The search service on numbers JSON has no value for and texts that are no characters, and the tokeniser on
one huge text.

If these fail, NaN, Infinity or 1e400 in a field would crash the 422 handler (it echoed a float JSON cannot
write: HTTP 500), a lone surrogate would reach the tokeniser (TypeError: HTTP 500), or one 3 MB text would cost
hundreds of megabytes to tokenise although only its first word pieces are kept.
"""

import math
import zlib
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from crl.models.minilm import CHARS_PER_WORD_PIECE, load_tokenizer, tokenize
from crl.search import EncoderProvenance, Index
from crl.serving.queries import StringEncoder, register_string_encoder
from crl.serving.service import create_app

DIM = 8
ENCODER = EncoderProvenance(checkpoint="tests/failsafe/crc-encoder", fingerprint="0")


def crc_encoder(texts: list[str]) -> np.ndarray:
    """A deterministic text encoder: a normal vector seeded by the text's CRC-32."""
    seeds = [zlib.crc32(text.encode()) for text in texts]
    return np.stack([np.random.default_rng(seed).standard_normal(DIM) for seed in seeds]).astype(np.float32)


def crc_encoder_of(provenance: EncoderProvenance) -> StringEncoder | None:
    return crc_encoder if provenance == ENCODER else None


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """A flat index of 50 vectors whose texts are embedded by :func:`crc_encoder`."""
    register_string_encoder(crc_encoder_of)
    vectors = np.random.default_rng(0).standard_normal((50, DIM)).astype(np.float32)
    with TestClient(create_app(Index.build(vectors, encoder=ENCODER))) as http:
        yield http


NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400"]
VECTOR = "[" + ", ".join(["0.5"] * DIM) + "]"
BODIES = {
    "k": '{"vectors": [' + VECTOR + '], "k": %s}',
    "ef_search": '{"vectors": [' + VECTOR + '], "ef_search": %s}',
    "exclude_self": '{"ids": [1], "exclude_self": %s}',
    "ids": '{"ids": [%s]}',
    "texts": '{"texts": [%s]}',
}


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("field", list(BODIES))
def test_a_number_json_cannot_write_is_a_422_naming_the_field(
    client: TestClient, field: str, number: str
) -> None:
    """Each of these was an HTTP 500: the 422 handler echoed the parsed float (nan or inf) in a JSON answer."""
    body = BODIES[field] % number
    answer = client.post("/search", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail[0]["loc"][:2] == ["body", field]
    shown = detail[0]["input"]
    assert isinstance(shown, str) and math.isnan(float(shown)) == (number == "NaN")


def test_a_lone_surrogate_text_is_a_422_naming_texts(client: TestClient) -> None:
    """texts: ["\\ud800"] reached the tokeniser, whose TypeError was an HTTP 500."""
    body = '{"texts": ["\\ud800"]}'
    answer = client.post("/search", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "texts"]
    assert client.post("/search", json={"texts": ["water"], "k": 3}).status_code == 200


def test_minilm_tokenize_names_a_lone_surrogate() -> None:
    """The tokeniser raised TypeError: TextEncodeInput must be Union[...] on a lone surrogate."""
    with pytest.raises(ValueError, match="text 1 holds the lone surrogate"):
        tokenize(load_tokenizer(""), ["water", "a \ud800 b"], 16)


def test_a_huge_text_is_cut_before_the_tokeniser_and_keeps_its_word_pieces() -> None:
    """A 3 MB text went whole into the tokeniser (3.6 s and 440 MB for one text) to keep 128 word pieces."""
    tokenizer = load_tokenizer("")
    seen: list[int] = []

    def counting(texts: list[str], **options: object) -> object:
        seen.extend(len(text) for text in texts)
        return tokenizer(texts, **options)

    huge = "the quick brown fox jumps over the lazy dog " * 70_000
    kept = tokenize(counting, [huge], 128)
    assert max(seen) <= 128 * CHARS_PER_WORD_PIECE
    reference = tokenizer([huge[:5_000]], truncation=True, max_length=128, return_tensors="pt")
    assert kept["input_ids"].tolist() == reference["input_ids"].tolist()
