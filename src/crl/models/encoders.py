"""Encoders of tensors and the dual encoder that defines the score.

A contrastive model scores a pair by an inner product of embeddings, s(x, y) = <f(x), g(y)> (docs/theory.md,
section 1). This module gives the pieces:

- :class:`MLP` and :class:`SmallCNN` (for 28x28 grey-scale images, or any small H x W) as backbones;
- :func:`project_to_sphere` / :class:`Encoder`: phi on the unit sphere S^{d-1}, as in [B], so that
  |s| <= 1 and [B]'s temperature bounds (eq. 8, e^{+-2/tau}) apply;
- :class:`DualEncoder`: the two towers f (anchors x) and g (positives y). ``towers="shared"`` ties them
  (Siamese, f = g = phi, [B]'s setting); ``towers="two"`` keeps separate weights (the two-tower model of
  [A], e.g. left/right halves as two "modalities");
- the temperature tau (:class:`crl.objectives.Temperature`, fixed or learnable) is held by the DualEncoder.

Every constructor takes a ``torch.Generator`` for its initial weights; no global random state is read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from crl._validate import check_count
from crl.data.source import Batch
from crl.objectives import Temperature

__all__ = ["MLP", "DualEncoder", "Encoder", "SmallCNN", "init_parameters", "project_to_sphere"]

Towers = Literal["shared", "two"]


def project_to_sphere(z: Tensor, eps: float = 1e-12) -> Tensor:
    """Map each row to the unit sphere: phi(z) = z / max(||z||_2, eps).

    Args:
        z: embeddings of shape (n, d).
        eps: floor on the norm, so a zero row maps to zero instead of NaN.

    Returns:
        Tensor of shape (n, d) whose non-zero rows have unit Euclidean norm.
    """
    return z / z.norm(dim=-1, keepdim=True).clamp_min(eps)


def init_parameters(module: nn.Module, generator: torch.Generator) -> None:
    """Re-draw the weights of every Linear and Conv2d layer from ``generator``.

    The law is PyTorch's default one (``reset_parameters``): W ~ U(-b, b) with b = 1/sqrt(fan_in)
    (Kaiming-uniform with a = sqrt(5)), bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); only the source of
    randomness differs, so that two runs with the same generator state start from identical weights.

    Args:
        module: any module; its Linear and Conv2d sub-modules are re-initialised in place.
        generator: the torch.Generator to draw from.
    """
    for layer in module.modules():
        if isinstance(layer, nn.Linear | nn.Conv2d):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            if layer.bias is not None:
                fan_in = layer.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


class MLP(nn.Module):
    """Multi-layer perceptron on flattened inputs: Linear -> ReLU -> ... -> Linear.

    Args:
        in_features: input size after flattening (e.g. 784 for 28x28 images).
        hidden: widths of the hidden layers (may be empty: a linear map).
        out_features: embedding dimension d.
        generator: source of the initial weights.

    Examples:
        >>> mlp = MLP(784, [256], 32, generator=torch.Generator().manual_seed(0))
        >>> mlp(torch.zeros(5, 28, 28)).shape
        torch.Size([5, 32])
    """

    def __init__(
        self, in_features: int, hidden: Sequence[int], out_features: int, *, generator: torch.Generator
    ) -> None:
        super().__init__()
        check_count("in_features", in_features, 1)
        check_count("out_features", out_features, 1)
        for width in hidden:
            check_count("hidden width", width, 1)
        widths = [in_features, *hidden]
        layers: list[nn.Module] = []
        for fan_in, fan_out in itertools.pairwise(widths):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], out_features))
        self.net = nn.Sequential(*layers)
        self.in_features = in_features
        init_parameters(self, generator)

    @torch.no_grad()
    def start_as_identity(self) -> None:
        """Set a linear map onto its own width to the identity (W = I, b = 0): f(x) = x.

        Raises:
            ValueError: when the MLP has hidden layers or out_features != in_features.
        """
        last = self.net[-1]
        if len(self.net) != 1 or not isinstance(last, nn.Linear) or last.in_features != last.out_features:
            raise ValueError(
                "only a linear map onto its own input width (hidden = []) can start as the identity"
            )
        last.weight.copy_(torch.eye(last.in_features))
        last.bias.zero_()

    def representation(self, x: Tensor) -> Tensor:
        """h, the features before the last Linear (the flattened input when ``hidden`` is empty): (n, ...) ->
        (n, hidden[-1])."""
        return self.net[:-1](x.reshape(x.shape[0], -1))

    def forward(self, x: Tensor) -> Tensor:
        """Embed a batch: (n, ...) with prod(...) = in_features -> (n, out_features)."""
        return self.net(x.reshape(x.shape[0], -1))


class SmallCNN(nn.Module):
    """A small convolutional encoder for grey-scale images (28x28 Fashion-MNIST, or halves 28x14).

    Architecture: for each width c in ``channels``: Conv3x3(c) [-> BatchNorm2d(c)] -> ReLU -> MaxPool2 (halving
    H and W); then the representation h: the feature maps flattened (``pool="flatten"``) or averaged over H x W
    (``pool="mean"``, global average pooling, h of size channels[-1]); then the projection head
    Linear(hidden) -> ReLU -> Linear(out_features) (SimCLR's h and z = g(h); :meth:`representation` gives h).
    Without batch normalisation (the default) a batch's embeddings do not depend on each other and data-parallel
    training equals single-process training; with it, each process normalises its own batch in training mode.

    Args:
        image_shape: (H, W) of the inputs; inputs are (n, C, H, W), or (n, H, W) when C = 1.
        out_features: embedding dimension d.
        channels: convolution widths, one pooling stage each.
        hidden: width of the fully connected layer.
        in_channels: C, the input channels (1 for grey-scale).
        batch_norm: BatchNorm2d after every convolution.
        pool: "flatten" or "mean" (global average pooling), how the last feature maps become h.
        generator: source of the initial weights.

    Examples:
        >>> cnn = SmallCNN((28, 28), 16, generator=torch.Generator().manual_seed(0))
        >>> cnn(torch.zeros(3, 28, 28)).shape
        torch.Size([3, 16])
    """

    def __init__(
        self,
        image_shape: tuple[int, int],
        out_features: int,
        channels: Sequence[int] = (32, 64),
        hidden: int = 128,
        in_channels: int = 1,
        *,
        batch_norm: bool = False,
        pool: Literal["flatten", "mean"] = "flatten",
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        height, width = image_shape
        check_count("in_channels", in_channels, 1)
        if pool not in ("flatten", "mean"):
            raise ValueError(
                f"pool = {pool!r} is not known; use 'flatten' or 'mean' (global average pooling)"
            )
        check_count("out_features", out_features, 1)
        check_count("hidden", hidden, 1)
        if not channels:
            raise ValueError("channels must list at least one convolution width, got an empty sequence")
        stages: list[nn.Module] = []
        for c in channels:
            check_count("channel width", c, 1)
            norm: list[nn.Module] = [nn.BatchNorm2d(c)] if batch_norm else []
            stages += [nn.Conv2d(in_channels, c, 3, padding=1), *norm, nn.ReLU(), nn.MaxPool2d(2)]
            in_channels = c
            height, width = height // 2, width // 2
        if height < 1 or width < 1:
            raise ValueError(
                f"image_shape {image_shape} is too small for {len(channels)} pooling stages; "
                "use fewer channels entries"
            )
        self.features = nn.Sequential(*stages)
        self.pool = pool
        self.head = nn.Sequential(  # Flatten (a no-op on h) keeps the state_dict keys of older checkpoints
            nn.Flatten(),
            nn.Linear(in_channels * (height * width if pool == "flatten" else 1), hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )
        self.image_shape = image_shape
        init_parameters(self, generator)

    def representation(self, x: Tensor) -> Tensor:
        """h, the backbone features before the projection head: (n, C, H, W) or (n, H, W) -> (n, size of h)."""
        if x.dim() == 3:
            x = x.unsqueeze(1)
        maps = self.features(x)
        return maps.flatten(1) if self.pool == "flatten" else maps.mean(dim=(2, 3))

    def forward(self, x: Tensor) -> Tensor:
        """Embed a batch of images (n, C, H, W) (or (n, H, W) when C = 1) -> (n, out_features): z = head(h)."""
        return self.head(self.representation(x))


class Encoder(nn.Module):
    """phi = a backbone followed (optionally) by the projection onto the unit sphere.

    Args:
        backbone: module mapping a batch of n inputs (a tensor (n, ...) or a mapping of tensors with n rows, see
            :data:`crl.data.Batch`) to (n, d).
        normalize: project onto S^{d-1} (then s(x, y) = <phi(x), phi(y)> is a cosine in [-1, 1]).
    """

    def __init__(self, backbone: nn.Module, *, normalize: bool = True) -> None:
        super().__init__()
        self.backbone = backbone
        self.normalize = normalize

    def forward(self, x: Batch) -> Tensor:
        """phi(x): n inputs -> (n, d), unit rows when ``normalize``."""
        z = self.backbone(x)
        return project_to_sphere(z) if self.normalize else z


class DualEncoder(nn.Module):
    """The pair of towers (f, g) that defines the score s(x, y) = <f(x), g(y)>, and the temperature tau.

    With ``towers="shared"`` (Siamese) f and g are one module; with ``towers="two"`` they are separate.
    Negatives y' are always embedded by the positive tower g. The temperature lives here so that a learned
    tau is trained, averaged across ranks and checkpointed with the encoders.

    Args:
        anchor_encoder: f, applied to anchors x.
        positive_encoder: g, applied to positives and negatives y; ``None`` means g = f (shared).
        temperature: tau as a :class:`Temperature` (fixed or learnable); default a fixed tau = 0.1.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> model = DualEncoder(Encoder(MLP(4, [], 3, generator=g)))
        >>> model.towers, round(float(model.tau()), 3)
        ('shared', 0.1)
    """

    def __init__(
        self,
        anchor_encoder: nn.Module,
        positive_encoder: nn.Module | None = None,
        temperature: Temperature | None = None,
    ) -> None:
        super().__init__()
        self.anchor_encoder = anchor_encoder
        self.positive_encoder = positive_encoder
        self.temperature = temperature if temperature is not None else Temperature(0.1, learnable=False)
        self.towers: Towers = "shared" if positive_encoder is None else "two"

    def tau(self) -> Tensor:
        """The current temperature tau as a 0-dim tensor."""
        value: Tensor = self.temperature()
        return value

    def encode_anchors(self, x: Batch) -> Tensor:
        """f(x): embeddings of n anchors -> (n, d)."""
        return self.anchor_encoder(x)

    def encode_positives(self, y: Batch) -> Tensor:
        """g(y): embeddings of n positives or negatives -> (n, d)."""
        encoder = self.anchor_encoder if self.positive_encoder is None else self.positive_encoder
        return encoder(y)

    def forward(self, x: Batch, y: Batch) -> tuple[Tensor, Tensor]:
        """Embed a batch of pairs: returns (f(x), g(y)), each (n, d)."""
        return self.encode_anchors(x), self.encode_positives(y)

    def score(self, x: Batch, y: Batch) -> Tensor:
        """s(x_i, y_i) = <f(x_i), g(y_i)> for each pair i: shape (n,)."""
        fx, gy = self(x, y)
        return (fx * gy).sum(dim=-1)
