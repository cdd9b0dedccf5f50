"""Text queries whose words lie beyond the characters the tokeniser reads: 20,000 spaces, then the query.

If these fail, a query of 20,000 spaces plus text is cut to whitespace before the tokeniser (it reads at most
``max_seq_length * 64`` characters) and embedded as an empty text: answered with unrelated items, exit 0; or the
cleaning changes the word pieces of an ordinary text, so queries and the items of existing indexes would part.
"""

import pytest
import torch

from crl.models.minilm import embed_texts, load_tokenizer, tokenize

QUERY = "where is the sea"
PADDED = {
    "spaces": " " * 20_000 + QUERY,
    "tabs and line breaks": "\t\n\r" * 7_000 + QUERY,
    "ideographic spaces": "\u3000" * 20_000 + QUERY,
    "control characters": "\x01\x0b" * 10_000 + QUERY,
    "spaces between the words": QUERY.replace(" ", " " * 10_000),
}


@pytest.fixture(scope="module")
def tokenizer() -> object:
    return load_tokenizer("")


@pytest.mark.parametrize("text", list(PADDED.values()), ids=list(PADDED))
def test_a_query_behind_a_long_run_of_whitespace_keeps_its_word_pieces(tokenizer: object, text: str) -> None:
    """The cut kept 16,384 spaces and no word: [CLS] [SEP]; now the word pieces of the query alone."""
    found = tokenize(tokenizer, [text], 256)["input_ids"].tolist()
    assert found == tokenizer([QUERY], truncation=True, max_length=256)["input_ids"]  # type: ignore[operator]


ORDINARY = ["a\u3000b", "a\x0bb", "a \t\n b", "x\u2028y", "\ufeffhello", "naïve café", "tab\tseparated\r\n"]


@pytest.mark.parametrize("text", ORDINARY)
def test_an_ordinary_text_keeps_the_word_pieces_the_tokenizer_gives_it(tokenizer: object, text: str) -> None:
    """Reading a text as its words (control characters dropped, whitespace runs one space) changes no word piece:
    the tokenizer's own normaliser does the same."""
    found = tokenize(tokenizer, [text], 64)["input_ids"].tolist()
    assert found == tokenizer([text], truncation=True, max_length=64)["input_ids"]  # type: ignore[operator]


def test_a_padded_query_is_embedded_as_the_query() -> None:
    """The embedding of 20,000 spaces plus the query was that of an empty text; now that of the query."""
    padded, plain = embed_texts([PADDED["spaces"], QUERY])
    torch.testing.assert_close(padded, plain, atol=1e-6, rtol=0)
