"""From a ``[model]`` config to its encoders: the backbone of each kind (:data:`MODEL_KINDS`) and the dual encoder.

Kept apart from :mod:`crl.train.build` (which re-exports both names) because the data sources need it too: a
locked-feature source (:mod:`crl.train.locked`) rebuilds an image checkpoint's backbone to compute its frozen
features, and :mod:`crl.train.build` imports the data sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from crl.models import MLP, DualEncoder, Encoder, MiniLM, SmallCNN, Temperature, TokenBag
from crl.train.config import BagModel, CnnModel, LossConfig, MiniLMModel, MlpModel, ModelConfig

__all__ = ["MODEL_KINDS", "Backbone", "build_backbone", "build_model"]


def _mlp(config: MlpModel, input_shape: tuple[int, ...], generator: torch.Generator) -> nn.Module:
    width = math.prod(input_shape)
    mlp = MLP(width, config.hidden, config.embedding_dim, generator=generator)
    if config.start == "identity":
        if config.hidden or config.embedding_dim != width:
            raise ValueError(
                f"[model] start = 'identity' needs a linear map onto its own input width: set hidden = [] and "
                f"embedding_dim = {width} (got hidden = {config.hidden}, embedding_dim = {config.embedding_dim})"
            )
        mlp.start_as_identity()
    return mlp


def _bag(config: BagModel, input_shape: tuple[int, ...], generator: torch.Generator) -> nn.Module:
    return TokenBag(config.vocab_size, config.token_dim, config.embedding_dim, generator=generator)


def _cnn(config: CnnModel, input_shape: tuple[int, ...], generator: torch.Generator) -> nn.Module:
    if len(input_shape) not in (2, 3):
        raise ValueError(
            f"model.encoder = 'cnn' needs image inputs (C, H, W) or (H, W), but the data gives shape {input_shape}; "
            "use model.encoder = 'mlp'"
        )
    in_channels = input_shape[0] if len(input_shape) == 3 else 1
    return SmallCNN(
        (input_shape[-2], input_shape[-1]),
        config.embedding_dim,
        config.channels,
        config.hidden,
        in_channels,
        batch_norm=config.batch_norm,
        pool=config.pool,
        generator=generator,
    )


def _minilm(config: MiniLMModel, input_shape: tuple[int, ...], generator: torch.Generator) -> nn.Module:
    """The pretrained MiniLM of ``[model] path`` (offline); its width must be ``embedding_dim``."""
    backbone = MiniLM(config.path)
    if backbone.dim != config.embedding_dim:
        raise ValueError(
            f"model.embedding_dim = {config.embedding_dim} but the MiniLM at {str(backbone.source_path)!r} embeds "
            f"into {backbone.dim} dimensions; set model.embedding_dim = {backbone.dim}"
        )
    return backbone


Backbone = Callable[[Any, tuple[int, ...], torch.Generator], nn.Module]
"""``backbone(config, input_shape, generator)``: one tower's network for a ``[model]`` config and its inputs."""

MODEL_KINDS: dict[type, Backbone] = {MlpModel: _mlp, CnnModel: _cnn, BagModel: _bag, MiniLMModel: _minilm}
"""The encoders by the type of their ``[model]`` config: a new encoder is its config class in
:data:`crl.train.config.ModelConfig` and one entry here."""


def build_backbone(
    config: ModelConfig, input_shape: tuple[int, ...], generator: torch.Generator
) -> nn.Module:
    """One tower's network (before the projection onto the sphere) for ``[model]`` and inputs of ``input_shape``."""
    return MODEL_KINDS[type(config)](config, input_shape, generator)


def build_model(
    model: ModelConfig,
    loss: LossConfig,
    anchor_shape: tuple[int, ...],
    positive_shape: tuple[int, ...],
    generator: torch.Generator,
) -> DualEncoder:
    """The dual encoder of the config, with weights drawn from ``generator``.

    ``towers = "shared"`` needs anchors and positives of one shape.
    """
    if model.towers == "shared" and anchor_shape != positive_shape:
        raise ValueError(
            f"model.towers = 'shared' needs anchors and positives of one shape, got {anchor_shape} and "
            f"{positive_shape}; use model.towers = 'two'"
        )
    anchor = Encoder(build_backbone(model, anchor_shape, generator), normalize=model.normalize)
    positive = (
        None
        if model.towers == "shared"
        else Encoder(build_backbone(model, positive_shape, generator), normalize=model.normalize)
    )
    temperature = Temperature(loss.tau, learnable=loss.learnable_tau, max_inverse=loss.max_inverse_tau)
    return DualEncoder(anchor, positive, temperature)
