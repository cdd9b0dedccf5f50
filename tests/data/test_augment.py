"""crl.data.augment: determinism, ranges and shapes, and each operation against an independent description."""

import functools
import math

import pytest
import torch

from crl.data.augment import (
    ImageAugmentation,
    gaussian_noise,
    horizontal_flip,
    random_erasing,
    random_horizontal_flip,
    random_resized_crop,
    random_shift,
)

RANDOM_OPS = {
    "crop": random_resized_crop,
    "shift": functools.partial(random_shift, max_shift=3),
    "flip": random_horizontal_flip,
    "noise": functools.partial(gaussian_noise, std=0.3),
    "erase": functools.partial(random_erasing, p=0.7),
    "pipeline": ImageAugmentation(max_shift=2),
}


def _images(n: int = 16, c: int = 1, h: int = 12, w: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, c, h, w, generator=torch.Generator().manual_seed(seed))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_same_seed_same_output_other_seed_other_output(name: str) -> None:
    """Output must be a function of the generator state: equal for equal seeds, different otherwise."""
    op, images = RANDOM_OPS[name], _images()
    first, again, other = op(images, _gen(1)), op(images, _gen(1)), op(images, _gen(2))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


@pytest.mark.parametrize("name", list(RANDOM_OPS))
@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
@pytest.mark.parametrize("channels", [1, 3])
def test_shape_dtype_and_range_are_kept(name: str, fill: str, channels: int) -> None:
    """Every op must keep (N, C, H, W), the dtype and values in [0, 1], even at the extremes 0 and 1."""
    images = {"random": _images(c=channels), "zeros": torch.zeros(16, channels, 12, 10)}.get(
        fill, torch.ones(16, channels, 12, 10)
    )
    out = RANDOM_OPS[name](images, _gen(3))
    assert out.shape == images.shape and out.dtype == images.dtype
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0


def test_flip_twice_is_identity_and_flip_mirrors_columns() -> None:
    """Flipping twice must return the image; once must map column j to W - 1 - j."""
    images = _images()
    assert torch.equal(horizontal_flip(horizontal_flip(images)), images)
    flipped = horizontal_flip(images)
    for j in range(images.shape[-1]):
        assert torch.equal(flipped[..., j], images[..., images.shape[-1] - 1 - j])


def test_random_flip_with_p_one_and_zero() -> None:
    """p = 1 flips every image, p = 0 none; p = 1/2 flips each image either way."""
    images = _images(n=200)
    assert torch.equal(random_horizontal_flip(images, _gen(0), p=1.0), horizontal_flip(images))
    assert torch.equal(random_horizontal_flip(images, _gen(0), p=0.0), images)
    half = random_horizontal_flip(images, _gen(0), p=0.5)
    flipped = (half == horizontal_flip(images)).flatten(1).all(1)
    kept = (half == images).flatten(1).all(1)
    assert bool((flipped ^ kept).all()) and 60 < int(flipped.sum()) < 140


def test_full_crop_is_identity() -> None:
    """scale = ratio = (1, 1) samples every pixel centre exactly: the image must come back."""
    images = _images()
    out = random_resized_crop(images, _gen(0), scale=(1.0, 1.0), ratio=(1.0, 1.0))
    torch.testing.assert_close(out, images, atol=1e-6, rtol=0)


def test_crop_of_a_linear_ramp_reveals_a_box_inside_the_bounds() -> None:
    """Bilinear resampling keeps a linear image linear; its slopes give the box sides w, h.

    On f(i, j) = a i + b j the output's column step is b w and its row step a h (w, h: the box sides as
    fractions of the image's): the area w h must lie in scale and w / h in ratio (an asymmetric ratio range,
    so that swapping w and h fails). Interior pixels only: the border pixels clamp.
    """
    h, w, a, b = 24, 20, 0.02, 0.025
    ramp = (
        a * torch.arange(h, dtype=torch.float64)[:, None] + b * torch.arange(w, dtype=torch.float64)[None, :]
    )
    images = ramp.expand(64, 1, h, w).contiguous()
    scale, ratio = (0.3, 0.5), (1.2, 1.6)
    out = random_resized_crop(images, _gen(5), scale=scale, ratio=ratio)[:, 0, 1:-1, 1:-1]
    col_step, row_step = out.diff(dim=2), out.diff(dim=1)
    torch.testing.assert_close(col_step, col_step[:, :1, :1].expand_as(col_step), atol=1e-9, rtol=0)
    torch.testing.assert_close(row_step, row_step[:, :1, :1].expand_as(row_step), atol=1e-9, rtol=0)
    box_w, box_h = col_step[:, 0, 0] / b, row_step[:, 0, 0] / a
    area, aspect = box_w * box_h, box_w / box_h
    assert bool((area >= scale[0] - 1e-9).all() and (area <= scale[1] + 1e-9).all())
    assert bool((aspect >= ratio[0] - 1e-9).all() and (aspect <= ratio[1] + 1e-9).all())
    assert float(area.std()) > 0.01
    assert float(out.min()) >= 0.0 and float(out.max()) <= float(ramp.max())


def _shifted(image: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """out[i, j] = image[i - dy, j - dx] or 0, by explicit loops."""
    out = torch.zeros_like(image)
    for i in range(image.shape[-2]):
        for j in range(image.shape[-1]):
            if 0 <= i - dy < image.shape[-2] and 0 <= j - dx < image.shape[-1]:
                out[..., i, j] = image[..., i - dy, j - dx]
    return out


def test_shift_equals_a_loop_shift_by_some_offset_in_range() -> None:
    """Each output must equal the loop-shifted image for one (dy, dx) in -2..2, and several offsets occur."""
    images = _images(n=30, c=2, h=7, w=6)
    out = random_shift(images, _gen(0), max_shift=2)
    offsets = set()
    for n in range(images.shape[0]):
        matches = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(out[n], _shifted(images[n], dy, dx))
        ]
        assert len(matches) == 1, f"image {n}: {matches}"
        offsets.add(matches[0])
    assert len(offsets) >= 8
    assert torch.equal(random_shift(images, _gen(0), max_shift=0), images)


def test_noise_has_the_requested_standard_deviation() -> None:
    """On mid-grey images (no clamping at 10 sd), the added noise must have mean 0 and sd = std."""
    images = torch.full((50, 1, 28, 28), 0.5)
    noise = gaussian_noise(images, _gen(0), std=0.05) - images
    assert abs(float(noise.mean())) < 5 * 0.05 / math.sqrt(noise.numel())
    assert float(noise.std()) == pytest.approx(0.05, rel=0.02)
    assert torch.equal(gaussian_noise(images, _gen(0), std=0.0), images)


def test_erasing_sets_one_rectangle_of_the_requested_size() -> None:
    """With p = 1 the changed pixels of each image must fill their bounding box, of area within the rounding
    of scale * H * W; with p = 0 nothing changes; with p = 1/2 about half the images change."""
    images = torch.ones(300, 1, 28, 28)
    erased = random_erasing(images, _gen(0), p=1.0, scale=(0.1, 0.2), ratio=(0.5, 2.0), value=0.0)
    for n in range(0, 300, 7):
        changed = erased[n, 0] == 0.0
        rows, cols = changed.any(1).nonzero().flatten(), changed.any(0).nonzero().flatten()
        box = changed[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
        assert bool(box.all()), f"image {n}: erased pixels are not a rectangle"
        assert 65 <= int(changed.sum()) <= 176
    assert torch.equal(random_erasing(images, _gen(0), p=0.0), images)
    half = random_erasing(images, _gen(0), p=0.5)
    assert 110 < int((half != images).flatten(1).any(1).sum()) < 190


def test_disabled_pipeline_is_identity_and_draws_nothing() -> None:
    """With every step off, the pipeline must return the images and leave the generator untouched."""
    off = ImageAugmentation(
        crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=0.0, erase_p=0.0, noise_std=0.0
    )
    generator, images = _gen(0), _images()
    state = generator.get_state()
    assert torch.equal(off(images, generator), images)
    assert torch.equal(generator.get_state(), state)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: horizontal_flip(torch.rand(3, 8, 8)), ValueError, "images: expected shape"),
        (
            lambda: horizontal_flip(torch.zeros(2, 1, 4, 4, dtype=torch.uint8)),
            TypeError,
            "images: expected floats",
        ),
        (lambda: horizontal_flip(torch.full((2, 1, 4, 4), 2.0)), ValueError, r"expected \[0, 1\]"),
        (lambda: horizontal_flip(torch.full((2, 1, 4, 4), float("nan"))), ValueError, "NaN"),
        (
            lambda: random_horizontal_flip(_images(), _gen(0), p=1.5),
            ValueError,
            r"p=1\.5 must be a number in \[0, 1\]",
        ),
        (lambda: random_resized_crop(_images(), _gen(0), scale=(0.0, 0.5)), ValueError, "scale"),
        (lambda: random_resized_crop(_images(), _gen(0), scale=(0.8, 0.5)), ValueError, "scale"),
        (lambda: random_shift(_images(), _gen(0), max_shift=-1), ValueError, "max_shift"),
        (lambda: gaussian_noise(_images(), _gen(0), std=-0.1), ValueError, "std"),
        (lambda: random_erasing(_images(), _gen(0), value=2.0), ValueError, "value"),
        (lambda: ImageAugmentation(flip_p=2.0), ValueError, "flip_p"),
        (lambda: ImageAugmentation(max_shift=1.5), ValueError, "max_shift"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, error: type, match: str) -> None:
    """Bad images or parameters must raise with the argument's name in the message."""
    with pytest.raises(error, match=match):
        call()
