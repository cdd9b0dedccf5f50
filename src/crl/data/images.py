"""A labelled set of images: the common output of the Fashion-MNIST and digits loaders."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import Integers, check


@dataclass(frozen=True)
class ImageSet:
    """N labelled images.

    Attributes:
        images: (N, C, H, W) float32 in [0, 1] (C = 1 for the grey-scale sets here).
        labels: (N,) int64 class indices in 0..len(class_names) - 1.
        class_names: the name of each class.
    """

    images: Tensor
    labels: Tensor
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.images, Tensor) or self.images.dim() != 4 or self.images.shape[0] < 1:
            shape = (
                tuple(self.images.shape) if isinstance(self.images, Tensor) else type(self.images).__name__
            )
            raise ValueError(f"images: expected a (N, C, H, W) tensor with N >= 1, got {shape}.")
        if self.images.dtype != torch.float32:
            raise TypeError(
                f"images: expected float32 in [0, 1], got {self.images.dtype}; use .float() / 255."
            )
        if float(self.images.min()) < 0.0 or float(self.images.max()) > 1.0:
            raise ValueError(
                f"images: values span [{float(self.images.min())}, {float(self.images.max())}], expected [0, 1]; "
                "divide by the maximum pixel value."
            )
        if not isinstance(self.labels, Tensor) or self.labels.shape != (self.images.shape[0],):
            shape = (
                tuple(self.labels.shape) if isinstance(self.labels, Tensor) else type(self.labels).__name__
            )
            raise ValueError(f"labels: expected shape ({self.images.shape[0]},), one per image, got {shape}.")
        check("labels", self.labels, Integers(int64=True))
        n_classes = len(self.class_names)
        if int(self.labels.min()) < 0 or int(self.labels.max()) >= n_classes:
            raise ValueError(
                f"labels: values span {int(self.labels.min())}..{int(self.labels.max())} but there are "
                f"{n_classes} class_names; labels must lie in 0..{n_classes - 1}."
            )

    def __len__(self) -> int:
        """N, the number of images."""
        return self.images.shape[0]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        _, c, h, w = self.images.shape
        return (c, h, w)

    def subset(self, indices: Tensor | slice) -> ImageSet:
        """The images (and labels) at ``indices``, e.g. ``subset(slice(0, n))`` for the first n."""
        return ImageSet(self.images[indices], self.labels[indices], self.class_names)
