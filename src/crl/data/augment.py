"""Batched image augmentations in plain torch (no torchvision), for two-view pairs (x, y) = (a(img), a'(img)).

Every function takes images (N, C, H, W), float in [0, 1], and a ``torch.Generator``; each image gets its own
random parameters, all drawn from the generator in a fixed order, so the output is a deterministic function of
(images, generator state, arguments). Outputs keep the shape and stay in [0, 1]. Random numbers are drawn on the
generator's device and moved to the images' device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from crl._validate import PROBABILITY, check


def horizontal_flip(images: Tensor) -> Tensor:
    """Mirror every image left-right: out[..., i, j] = in[..., i, W - 1 - j]."""
    _check_images(images)
    return images.flip(-1)


def random_horizontal_flip(images: Tensor, generator: torch.Generator, *, p: float = 0.5) -> Tensor:
    """Mirror each image left-right with probability ``p``, independently."""
    _check_images(images)
    check("p", p, PROBABILITY)
    flip = _uniform((images.shape[0],), generator, images) < p
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def random_resized_crop(
    images: Tensor,
    generator: torch.Generator,
    *,
    scale: tuple[float, float] = (0.6, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> Tensor:
    """Crop a random box of each image and resize it back to H x W (bilinear).

    The box has area a * H * W with a ~ U(scale) and aspect w/h = r with log r ~ U(log ratio) (each side capped
    at the image's), and a uniform position inside the image. scale = ratio = (1, 1) is the identity.
    """
    _check_images(images)
    _check_interval("scale", scale, low=0.0, high=1.0)
    _check_interval("ratio", ratio, low=0.0, high=math.inf)
    n = images.shape[0]
    area = _uniform((n,), generator, images, *scale)
    log_ratio = _uniform((n,), generator, images, math.log(ratio[0]), math.log(ratio[1]))
    width = torch.sqrt(area * torch.exp(log_ratio)).clamp(max=1.0)
    height = torch.sqrt(area / torch.exp(log_ratio)).clamp(max=1.0)
    centre_x = width / 2 + (1 - width) * _uniform((n,), generator, images)
    centre_y = height / 2 + (1 - height) * _uniform((n,), generator, images)
    theta = torch.zeros(n, 2, 3, dtype=images.dtype, device=images.device)
    theta[:, 0, 0], theta[:, 0, 2] = width, 2 * centre_x - 1
    theta[:, 1, 1], theta[:, 1, 2] = height, 2 * centre_y - 1
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    resized = F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return resized.clamp_(0.0, 1.0)


def random_shift(images: Tensor, generator: torch.Generator, *, max_shift: int = 2) -> Tensor:
    """Translate each image by integers (dy, dx), each uniform in -max_shift..max_shift, filling with 0.

    out[..., i, j] = in[..., i - dy, j - dx] where that pixel exists, else 0.
    """
    _check_images(images)
    if isinstance(max_shift, bool) or not isinstance(max_shift, int) or max_shift < 0:
        raise ValueError(f"max_shift: got {max_shift!r}; pass an int >= 0 (pixels).")
    n, _, h, w = images.shape
    shifts = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=generator, device=generator.device)
    shifts = shifts.to(images.device)
    padded = F.pad(images, (max_shift, max_shift, max_shift, max_shift))
    rows = torch.arange(h, device=images.device) + max_shift - shifts[:, :1]
    cols = torch.arange(w, device=images.device) + max_shift - shifts[:, 1:]
    batch = torch.arange(n, device=images.device)[:, None, None]
    return padded[batch, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2).contiguous()


def gaussian_noise(images: Tensor, generator: torch.Generator, *, std: float = 0.05) -> Tensor:
    """Add N(0, std^2) noise to every pixel, then clamp to [0, 1]."""
    _check_images(images)
    if not math.isfinite(std) or std < 0:
        raise ValueError(f"std: got {std}; pass a finite standard deviation >= 0.")
    noise = torch.randn(images.shape, generator=generator, device=generator.device, dtype=images.dtype)
    return (images + std * noise.to(images.device)).clamp_(0.0, 1.0)


def random_erasing(
    images: Tensor,
    generator: torch.Generator,
    *,
    p: float = 0.5,
    scale: tuple[float, float] = (0.02, 0.2),
    ratio: tuple[float, float] = (0.3, 3.3),
    value: float = 0.0,
) -> Tensor:
    """With probability ``p`` per image, set a random rectangle to ``value`` (Zhong et al., 2020).

    The rectangle has area a * H * W with a ~ U(scale), aspect h/w = r with log r ~ U(log ratio), sides rounded
    and clipped to 1..H and 1..W, and a uniform position inside the image.
    """
    _check_images(images)
    check("p", p, PROBABILITY)
    _check_interval("scale", scale, low=0.0, high=1.0)
    _check_interval("ratio", ratio, low=0.0, high=math.inf)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"value: got {value}; the erased value must lie in [0, 1] like the images.")
    n, _, h, w = images.shape
    apply = _uniform((n,), generator, images) < p
    area = _uniform((n,), generator, images, *scale) * (h * w)
    aspect = torch.exp(_uniform((n,), generator, images, math.log(ratio[0]), math.log(ratio[1])))
    box_h = torch.sqrt(area * aspect).round().clamp(1, h)
    box_w = torch.sqrt(area / aspect).round().clamp(1, w)
    top = torch.floor(_uniform((n,), generator, images) * (h - box_h + 1))
    left = torch.floor(_uniform((n,), generator, images) * (w - box_w + 1))
    rows = torch.arange(h, device=images.device, dtype=images.dtype)[None, :, None]
    cols = torch.arange(w, device=images.device, dtype=images.dtype)[None, None, :]
    inside = (rows >= top[:, None, None]) & (rows < (top + box_h)[:, None, None])
    inside = inside & (cols >= left[:, None, None]) & (cols < (left + box_w)[:, None, None])
    mask = (inside & apply[:, None, None]).unsqueeze(1)
    return torch.where(mask, torch.full_like(images, value), images)


@dataclass(frozen=True)
class ImageAugmentation:
    """A SimCLR-style pipeline for small grey-scale images: crop, shift, flip, erase, noise (in that order).

    A step whose parameters make it the identity (crop_scale = (1, 1) with crop_ratio = (1, 1), max_shift = 0,
    flip_p = 0, erase_p = 0, noise_std = 0) is skipped and draws no random numbers.

    Examples:
        >>> augment = ImageAugmentation()
        >>> views = augment(torch.rand(8, 1, 28, 28), torch.Generator().manual_seed(0))
    """

    crop_scale: tuple[float, float] = (0.6, 1.0)
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    max_shift: int = 0
    flip_p: float = 0.5
    erase_p: float = 0.25
    erase_scale: tuple[float, float] = (0.02, 0.2)
    noise_std: float = 0.05

    def __post_init__(self) -> None:
        _check_interval("crop_scale", self.crop_scale, low=0.0, high=1.0)
        _check_interval("crop_ratio", self.crop_ratio, low=0.0, high=math.inf)
        if isinstance(self.max_shift, bool) or not isinstance(self.max_shift, int) or self.max_shift < 0:
            raise ValueError(f"max_shift: got {self.max_shift!r}; pass an int >= 0 (pixels).")
        check("flip_p", self.flip_p, PROBABILITY)
        check("erase_p", self.erase_p, PROBABILITY)
        _check_interval("erase_scale", self.erase_scale, low=0.0, high=1.0)
        if not math.isfinite(self.noise_std) or self.noise_std < 0:
            raise ValueError(f"noise_std: got {self.noise_std}; pass a finite standard deviation >= 0.")

    def __call__(self, images: Tensor, generator: torch.Generator) -> Tensor:
        """One random view of each image (N, C, H, W) -> (N, C, H, W)."""
        _check_images(images)
        out = images
        if self.crop_scale != (1.0, 1.0) or self.crop_ratio != (1.0, 1.0):
            out = random_resized_crop(out, generator, scale=self.crop_scale, ratio=self.crop_ratio)
        if self.max_shift > 0:
            out = random_shift(out, generator, max_shift=self.max_shift)
        if self.flip_p > 0:
            out = random_horizontal_flip(out, generator, p=self.flip_p)
        if self.erase_p > 0:
            out = random_erasing(out, generator, p=self.erase_p, scale=self.erase_scale)
        if self.noise_std > 0:
            out = gaussian_noise(out, generator, std=self.noise_std)
        return out


def _uniform(
    shape: tuple[int, ...], generator: torch.Generator, like: Tensor, low: float = 0.0, high: float = 1.0
) -> Tensor:
    """U(low, high) draws from ``generator`` (on its device), returned on ``like``'s device and dtype."""
    draws = torch.rand(shape, generator=generator, device=generator.device, dtype=torch.float64)
    return (low + (high - low) * draws).to(device=like.device, dtype=like.dtype)


def _check_images(images: Tensor) -> None:
    if not isinstance(images, Tensor):
        raise TypeError(f"images: expected a torch.Tensor, got {type(images).__name__}.")
    if images.dim() != 4 or images.shape[0] < 1:
        raise ValueError(
            f"images: expected shape (N, C, H, W) with N >= 1, got {tuple(images.shape)}; "
            "add the channel axis with .unsqueeze(1)."
        )
    if not images.is_floating_point():
        raise TypeError(f"images: expected floats in [0, 1], got {images.dtype}; use .float() / 255.")
    low, high = float(images.min()), float(images.max())
    if not (low >= 0.0 and high <= 1.0):
        raise ValueError(f"images: values span [{low}, {high}], expected [0, 1] (NaN is not allowed).")


def _check_interval(name: str, interval: tuple[float, float], *, low: float, high: float) -> None:
    if len(interval) != 2 or not low < interval[0] <= interval[1] <= high:
        raise ValueError(f"{name}: got {interval!r}; pass (lo, hi) with {low} < lo <= hi <= {high}.")
