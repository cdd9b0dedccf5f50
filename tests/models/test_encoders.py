"""Tests of crl.models: sphere projection, encoders, initialisation from a generator, the two tower layouts."""

import math

import pytest
import torch
from torch import nn

import crl.objectives
from crl.models import (
    MLP,
    DualEncoder,
    Encoder,
    SmallCNN,
    Temperature,
    TokenBag,
    embed,
    init_parameters,
    project_to_sphere,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_projection_gives_unit_rows_and_keeps_zero_rows_finite() -> None:
    """phi must land on S^{d-1}; a zero row must map to zero, not NaN (never a silent NaN)."""
    z = torch.randn(6, 5, dtype=torch.float64)
    z[2] = 0.0
    phi = project_to_sphere(z)
    norms = phi.norm(dim=1)
    assert torch.allclose(norms[[0, 1, 3, 4, 5]], torch.ones(5, dtype=torch.float64))
    assert torch.equal(phi[2], torch.zeros(5, dtype=torch.float64))
    assert torch.allclose(phi[0], z[0] / math.sqrt(float((z[0] ** 2).sum())))


def test_init_is_a_function_of_the_generator_state() -> None:
    """Same generator state -> identical weights; another seed -> different weights (no global RNG is read)."""
    a, b, c = (MLP(10, [8], 4, generator=_gen(s)) for s in (1, 1, 2))
    with torch.random.fork_rng():
        torch.manual_seed(123)  # the global generator must not matter
        d = MLP(10, [8], 4, generator=_gen(1))
    for pa, pb, pc, pd in zip(a.parameters(), b.parameters(), c.parameters(), d.parameters(), strict=True):
        assert torch.equal(pa, pb) and torch.equal(pa, pd) and not torch.equal(pa, pc)


def test_init_follows_pytorch_default_law() -> None:
    """Weights must be U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch's default: bound and variance b^2/3."""
    layer = nn.Linear(400, 300).requires_grad_(False)
    init_parameters(layer, _gen(0))
    bound = 1.0 / math.sqrt(400)
    assert float(layer.weight.abs().max()) <= bound
    assert float(layer.bias.abs().max()) <= bound
    assert abs(float(layer.weight.var()) / (bound**2 / 3) - 1.0) < 0.02


def test_mlp_flattens_and_maps_to_d() -> None:
    """The MLP must accept (n, H, W) images and give (n, d); with hidden=[] it is one linear map."""
    mlp = MLP(12, [], 5, generator=_gen())
    x = torch.randn(4, 3, 4)
    linear = mlp.net[0]
    assert torch.allclose(mlp(x), x.reshape(4, 12) @ linear.weight.T + linear.bias)


@pytest.mark.parametrize("shape", [(28, 28), (28, 14), (8, 8)])
def test_cnn_accepts_images_and_halves(shape: tuple[int, int]) -> None:
    """The CNN must embed full images, left/right halves and 8x8 digits, with or without a channel axis."""
    cnn = SmallCNN(shape, 7, channels=(4, 8), hidden=16, generator=_gen())
    x = torch.randn(3, *shape)
    assert cnn(x).shape == (3, 7)
    assert torch.equal(cnn(x), cnn(x.unsqueeze(1)))


def test_cnn_embeds_each_item_alone() -> None:
    """No batch statistics: an item's embedding must not depend on the rest of the batch (DDP = one process)."""
    cnn = SmallCNN((28, 28), 4, channels=(4,), hidden=8, generator=_gen())
    x = torch.randn(5, 28, 28)
    assert torch.allclose(cnn(x)[2:3], cnn(x[2:3]), atol=1e-6)


def test_cnn_rejects_images_too_small_for_its_pooling() -> None:
    """Three 2x poolings of a 4x4 image leave nothing: the error must say so instead of a shape error deep inside."""
    with pytest.raises(ValueError, match="too small"):
        SmallCNN((4, 4), 3, channels=(2, 2, 2), generator=_gen())


def test_bad_widths_raise() -> None:
    """A zero width must raise ValueError naming it."""
    with pytest.raises(ValueError, match="out_features"):
        MLP(4, [3], 0, generator=_gen())


def test_shared_towers_are_one_module_and_two_towers_differ() -> None:
    """towers='shared' must use f for both sides (Siamese); towers='two' must use separate weights."""
    f = Encoder(MLP(6, [5], 3, generator=_gen(0)))
    g = Encoder(MLP(6, [5], 3, generator=_gen(1)))
    x = torch.randn(4, 6)
    shared, two = DualEncoder(f), DualEncoder(f, g)
    assert shared.towers == "shared" and two.towers == "two"
    assert torch.equal(shared.encode_positives(x), f(x))
    assert torch.equal(two.encode_positives(x), g(x)) and not torch.equal(two.encode_positives(x), f(x))
    assert len(list(two.parameters())) == 2 * len(list(shared.parameters()))


def test_score_is_the_cosine_of_the_raw_embeddings() -> None:
    """With normalisation s(x, y) = <f(x), g(y)> must equal the cosine of the backbone outputs."""
    backbone = MLP(6, [5], 3, generator=_gen(0))
    model = DualEncoder(Encoder(backbone))
    x, y = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    model = model.double()
    expected = torch.nn.functional.cosine_similarity(backbone(x), backbone(y), dim=1)
    assert torch.allclose(model.score(x, y), expected)


def test_temperature_is_the_objectives_one_and_is_a_parameter_when_learnable() -> None:
    """One Temperature for the project; a learnable tau must be trained (a parameter of the model)."""
    assert Temperature is crl.objectives.Temperature
    model = DualEncoder(
        Encoder(MLP(2, [], 2, generator=_gen())), temperature=Temperature(0.2, learnable=True)
    )
    assert any(p is model.temperature.log_inverse for p in model.parameters())
    assert math.isclose(float(model.tau().detach()), 0.2, rel_tol=1e-6)


def test_token_bag_is_a_masked_mean_then_a_linear_map() -> None:
    """TokenBag must average the embeddings of unmasked tokens only: padding must not move the embedding."""
    bag = TokenBag(10, 4, 3, generator=_gen())
    ids = torch.tensor([[1, 2, 3], [1, 2, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    out = bag({"input_ids": ids, "attention_mask": mask})
    expected = bag.head(bag.tokens.weight[[1, 2]].mean(dim=0))
    assert torch.allclose(out[0], expected) and torch.allclose(out[1], expected)
    with pytest.raises(TypeError, match="input_ids and attention_mask"):
        bag(ids)


def test_embed_gives_the_same_rows_for_any_batch_size() -> None:
    """embed() in slices must equal one forward pass, for tensor and mapping inputs alike."""
    mlp = Encoder(MLP(6, [5], 3, generator=_gen()))
    x = torch.randn(11, 6, generator=_gen())
    for size in (1, 4, 11, 50):
        # a matrix product's float32 rounding depends on the batch's shape: rows agree to about 1e-7, absolutely
        assert torch.allclose(
            embed(mlp, x, batch_size=size, device=torch.device("cpu")), mlp(x).detach(), rtol=0, atol=1e-6
        )
    bag = TokenBag(10, 4, 3, generator=_gen())
    tokens = {"input_ids": torch.randint(10, (9, 5)), "attention_mask": torch.ones(9, 5, dtype=torch.long)}
    assert torch.allclose(embed(bag, tokens, batch_size=2, device=torch.device("cpu")), bag(tokens).detach())
