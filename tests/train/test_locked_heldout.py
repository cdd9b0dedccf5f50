"""The zero-shot baseline of a head on locked features: the backbone's own features scored as the heads are."""

import torch

from crl.train.locked_heldout import HeldOut, identity_scores


def _images(seed: int = 0) -> HeldOut:
    """40 test images' two views as 6 features each, the second a noisy copy of the first, 4 classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(40, 6, generator=g) + 3.0
    y = x + 0.8 * torch.randn(40, 6, generator=g)
    return HeldOut(x, y, labels=torch.arange(40) % 4)


def _recall_at_1(x: torch.Tensor, y: torch.Tensor) -> float:
    """Float64 loop: view 1 of image i retrieves its own view 2 first by cosine."""
    hits = 0
    for i in range(x.shape[0]):
        cosines = [float(torch.nn.functional.cosine_similarity(x[i], y[j], dim=0)) for j in range(y.shape[0])]
        hits += max(range(len(cosines)), key=cosines.__getitem__) == i
    return hits / x.shape[0]


def test_identity_scores_are_the_features_own_recall_pixels_centred_first() -> None:
    """Against a float64 loop: the raw features for a backbone (here all features share an offset of 3, which
    the cosine sees), and pixels centred by the test anchors' mean on both sides."""
    heldout = _images()
    x, y = heldout.x.double(), heldout.y.double()
    assert identity_scores(heldout, "cnn")["recall@1"] == _recall_at_1(x, y)
    shift = x.mean(dim=0)
    centred = _recall_at_1(x - shift, y - shift)
    assert identity_scores(heldout, "pixels")["recall@1"] == centred
    assert centred != _recall_at_1(x, y), "the offset must matter, or the test cannot see the centring"
