"""Text search with MiniLM: an index of texts, and the string encoder that embeds text queries of such an index.

:func:`text_index` embeds texts with a MiniLM folder (:func:`crl.models.minilm.embed_texts`) and records the folder
and the SHA-256 of its weights in the index; :func:`register_text_search` lets ``crl search`` and ``crl serve``
embed string queries of such an index with the same model (:func:`crl.serving.queries.register_string_encoder`),
once the folder's weights are checked against the SHA-256 the index records (:func:`minilm_fingerprint`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crl.models.minilm import (
    MiniLM,
    embed_texts,
    encoder_fingerprint,
    is_sentence_transformer,
    resolve_model_path,
)
from crl.search import EncoderProvenance, Index, Kind, Metric
from crl.serving.encoded import choose_kind
from crl.serving.queries import StringEncoder, register_string_encoder

__all__ = ["minilm_fingerprint", "minilm_string_encoder", "register_text_search", "text_index"]


def text_index(
    texts: Sequence[str],
    model: str | Path = "",
    *,
    kind: Kind | None = None,
    metric: Metric = "cosine",
    max_seq_length: int | None = None,
    **params: int,
) -> Index:
    """A :class:`crl.search.Index` of ``texts`` embedded by a MiniLM folder ('' or 'minilm': the packaged one).

    Item ids are the row numbers, each item's metadata is ``{"text": ...}``, and the index records the model folder
    and its :func:`~crl.models.minilm.encoder_fingerprint`, so ``crl search DIR "some text"`` embeds a query with
    the same model (:func:`register_text_search`). ``kind`` None chooses by N as ``crl index build`` does. Texts are
    truncated at ``max_seq_length`` word pieces (None: the model's own length, as its string encoder embeds
    queries).
    """
    folder = resolve_model_path(model)
    vectors = embed_texts(texts, folder, max_seq_length=max_seq_length).numpy()
    provenance = EncoderProvenance(checkpoint=str(folder.resolve()), fingerprint=encoder_fingerprint(folder))
    chosen = kind if kind is not None else choose_kind(len(texts))
    metadata: list[dict[str, Any] | None] = [{"text": text} for text in texts]
    return Index.build(vectors, None, chosen, metric, metadata=metadata, encoder=provenance, **params)


def minilm_fingerprint(provenance: EncoderProvenance) -> str | None:
    """The :func:`~crl.models.minilm.encoder_fingerprint` the MiniLM folder ``provenance`` records has now (its
    weights, config, tokenizer files, length and pooling), or None when it records no sentence-transformers folder."""
    folder = Path(provenance.checkpoint)
    if not folder.is_dir() or not is_sentence_transformer(folder):
        return None
    return encoder_fingerprint(folder)


def minilm_string_encoder(provenance: EncoderProvenance | None) -> StringEncoder | None:
    """The string encoder of an index made by :func:`text_index` (a sentence-transformers folder), else None.

    The model is loaded once, here, in eval mode; every call of the encoder (concurrent ones included) uses it,
    truncating at the model's own length (:func:`crl.models.minilm.saved_max_seq_length`), as :func:`text_index`
    does by default.
    """
    folder = Path(provenance.checkpoint) if provenance is not None else None
    if folder is None or not folder.is_dir() or not is_sentence_transformer(folder):
        return None
    model = MiniLM(folder).eval()

    def encode(strings: list[str]) -> Any:
        return embed_texts(strings, model=model).numpy()

    return encode


_REGISTERED: list[bool] = []


def register_text_search() -> None:
    """Let ``crl search`` embed string queries of MiniLM indexes (once per process; the registry is
    :func:`crl.serving.queries.register_string_encoder`)."""
    if not _REGISTERED:
        register_string_encoder(minilm_string_encoder, minilm_fingerprint)
        _REGISTERED.append(True)
