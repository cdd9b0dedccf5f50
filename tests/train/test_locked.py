"""Locked-feature training with [A]'s exact L_hat: every step takes all m negatives of every anchor.

The step's loss is checked against a float64 loop over each anchor's negatives written from the definitions
(the sets from the keyed hash directly, the forms from tests/objectives/reference.py), in both regimes, with the
exclusions (the anchor's own item, items of the same key) and with a disjoint pool; gradients through the heads
by gradcheck; a resumed trainer run against an uninterrupted one; the config's errors.
"""

import pytest
import torch
from torch.func import functional_call

from crl.data import LockedFeaturePairs
from crl.negatives import EmbeddedBatch
from crl.negatives.fixed import POOL_ROW, keyed_hash
from crl.objectives import masked_contrastive_loss
from crl.train.build import Streams, build_model, build_sampler
from crl.train.config import ConfigError, TrainConfig, parse_config
from crl.train.exact_cost import exact_step_cost
from crl.train.loop import TrainingLoop
from tests.objectives.reference import one_direction

N, POOL, D_X, D_Y, B = 24, 10, 6, 5, 8


def _source(pool: int = 0, seed: int = 0) -> LockedFeaturePairs:
    """Random features; items 3, 4 and 5 share a key (one lemma list), so do 7 and 30 (a pool item)."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.arange(N + pool)
    keys[4:6] = 3
    if pool:
        keys[30] = 7
    return LockedFeaturePairs(
        torch.randn(N + pool, D_X, generator=g), torch.randn(N + pool, D_Y, generator=g), keys, n_pairs=N
    )


def _config(
    negatives: str, m: int, *, hidden: list[int] | None = None, form: str = "gcl", **data: object
) -> TrainConfig:
    return parse_config(
        {
            "data": {"source": "locked", "n_train": N, "batch_size": B, **data},
            "model": {"encoder": "mlp", "hidden": hidden or [], "embedding_dim": 4, "towers": "two"},
            "loss": {"negatives": negatives, "n_negatives": m, "form": form, "tau": 0.3},
            "optim": {"total_steps": 3, "warmup_steps": 0, "lr": 1e-2},
            "run": {"seed": 5},
        }
    )


def _brute_sets(
    source: LockedFeaturePairs, rows: list[int], regime: str, m: int, seed: int
) -> list[list[int]]:
    """Each anchor's negatives from the definition: eligible = key differs; SCRL the m smallest h(seed, i, j),
    SSCRL the pool of the m smallest h(seed, POOL_ROW, j) minus the anchor's key (ties by j)."""
    candidates = source.negative_candidates.tolist()
    keys = source.keys.tolist()

    def smallest(row: int, among: list[int], count: int) -> list[int]:
        h = keyed_hash(seed, torch.tensor([row]), torch.tensor(among))[0].tolist()
        return [j for _, j in sorted(zip(h, among, strict=True))[:count]]

    pool = smallest(POOL_ROW, candidates, m)
    sets = []
    for i in rows:
        eligible = [j for j in candidates if keys[j] != keys[i]]
        sets.append(
            smallest(i, eligible, m) if regime == "independent" else [j for j in pool if keys[j] != keys[i]]
        )
    return sets


@pytest.mark.parametrize("pool", [0, POOL], ids=["train_items", "disjoint_pool"])
@pytest.mark.parametrize(
    ("negatives", "form"), [("fixed_sets", "gcl"), ("fixed_pool", "gcl"), ("fixed_sets", "infonce")]
)
def test_a_step_is_the_exact_loss_over_every_negative_of_every_anchor(
    negatives: str, form: str, pool: int
) -> None:
    source = _source(pool)
    m = 7 if pool else 15
    config = _config(negatives, m, hidden=[3], form=form)
    loop = TrainingLoop(config, source, Streams.derive(5, regime=config.loss.regime))
    model = build_model(
        config.model, config.loss, source.anchor_shape, source.positive_shape, torch.Generator()
    )
    model.load_state_dict(loop.model.state_dict())
    model = model.double()
    loss = float(loop.train_step())
    rows = loop.cursor.permutation[:B].tolist()
    with torch.no_grad():
        anchors = model.encode_anchors(source.items_x[rows].double()).tolist()
        positives = model.encode_positives(source.items_y[rows].double()).tolist()
        every = model.encode_positives(source.items_y.double()).tolist()
    sets = _brute_sets(source, rows, config.loss.regime, m, seed=5)
    for i, chosen in zip(rows, sets, strict=True):
        assert i not in chosen and all(source.keys[j] != source.keys[i] for j in chosen)
        if pool:
            assert all(j >= N for j in chosen)
    expected = one_direction(anchors, positives, [[every[j] for j in s] for s in sets], 0.3, form)
    assert loss == pytest.approx(sum(expected) / B, rel=2e-6, abs=1e-6)
    if negatives == "fixed_sets":
        assert all(len(s) == m for s in sets)


def test_scrl_at_m_equal_to_n_is_sscrl() -> None:
    source = _source()
    losses = []
    for negatives in ("fixed_sets", "fixed_pool"):
        config = _config(negatives, N)
        loop = TrainingLoop(config, source, Streams.derive(5, regime=config.loss.regime))
        losses.append([float(loop.train_step()) for _ in range(3)])
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)


class _Step(torch.nn.Module):
    """The exact SCRL loss of fixed anchors, positives and drawn candidates, as a function of the heads' weights."""

    def __init__(self, model: torch.nn.Module, mask: torch.Tensor) -> None:
        super().__init__()
        self.model, self.mask = model, mask

    def forward(self, x: torch.Tensor, y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        f, g = self.model.encode_anchors, self.model.encode_positives
        return masked_contrastive_loss(f(x), g(y), g(c), self.mask, tau=0.3, form="gcl")


def test_gradients_through_the_heads_pass_gradcheck_in_float64() -> None:
    source = _source(POOL)
    config = _config("fixed_sets", 4, hidden=[3])
    model = build_model(
        config.model, config.loss, source.anchor_shape, source.positive_shape, torch.Generator()
    )
    rows = torch.tensor([0, 3, 4, 9])
    drawn = build_sampler(config, source).draw(
        EmbeddedBatch(torch.zeros(4, 1), torch.zeros(4, 1), indices=rows), torch.Generator()
    )
    assert drawn.y is not None and drawn.mask is not None
    step = _Step(model.double(), drawn.mask)
    names = [name for name, _ in step.named_parameters()]
    inputs = (source.items_x[rows].double(), source.items_y[rows].double(), source.items_y[drawn.y].double())

    def loss(*weights: torch.Tensor) -> torch.Tensor:
        return functional_call(step, dict(zip(names, weights, strict=True)), inputs)

    start = tuple(weight.detach().clone().requires_grad_(True) for weight in step.parameters())
    assert len(start) == 8  # two heads, each Linear -> ReLU -> Linear
    assert torch.autograd.gradcheck(loss, start)


@pytest.mark.parametrize(
    ("section", "fields", "expected"),
    [
        (
            "data",
            {"dataset": "wordnet", "backbone": "pixels"},
            "[data] backbone = 'pixels' does not fit dataset",
        ),
        ("data", {"dataset": "fashion_mnist", "backbone": "minilm"}, "use backbone = 'pixels' or 'cnn'"),
        ("data", {"dataset": "fashion_mnist", "backbone": "cnn"}, "backbone = 'cnn' needs backbone_path"),
        ("data", {"negatives_from": "disjoint"}, "negatives_from = 'disjoint' needs disjoint_size (P) >= 1"),
        ("data", {"disjoint_size": 5}, "disjoint_size = 5 is read only with negatives_from = 'disjoint'"),
        (
            "data",
            {"dataset": "fashion_mnist", "backbone": "pixels", "split_seed": 3},
            "split_seed is not read with dataset = 'fashion_mnist'",
        ),
        ("data", {"views_seed": 3}, "views_seed is not read with dataset = 'wordnet'"),
        ("data", {"dataset": "cjk"}, "use backbone = 'efficientnet_minilm'"),
        ("data", {"dataset": "gcide", "backbone": "efficientnet_minilm"}, "use backbone = 'minilm'"),
        (
            "data",
            {"dataset": "cjk", "backbone": "efficientnet_minilm"},
            "[data] dataset = 'cjk' pairs features of two backbones (an image's and a text's, of two widths), "
            "which one shared tower cannot read; set [model] towers = 'two'",
        ),
        (
            "data",
            {"dataset": "cjk", "backbone": "efficientnet_minilm", "views_seed": 1},
            "views_seed is not read with dataset = 'cjk'",
        ),
        (
            "data",
            {"dataset": "bible", "wordnet_pairs": "gloss_example"},
            "wordnet_pairs is not read with dataset = 'bible'",
        ),
        ("model", {"encoder": "mlp", "hidden": [8, 8]}, "hidden = [] (linear) or [width] (one hidden layer)"),
        ("model", {"encoder": "cnn"}, "[model] encoder = 'mlp'"),
        ("loss", {"negatives": "fixed_pool", "n_negatives": 4, "symmetric": True}, "symmetric = true is not"),
        ("loss", {"negatives": "fixed_sets"}, "needs n_negatives (m) >= 1"),
        (
            "loss",
            {"negatives": "fixed_sets", "n_negatives": 4, "pool_size": 9},
            "pool_size = 9 needs negatives",
        ),
        (
            "loss",
            {"negatives": "fixed_pool", "n_negatives": 4, "estimator": "fastclip", "form": "gcl"},
            "fastclip",
        ),
    ],
)
def test_bad_locked_settings_are_one_line_naming_the_field_and_the_fix(
    section: str, fields: dict[str, object], expected: str
) -> None:
    document: dict[str, dict[str, object]] = {
        "data": {"source": "locked"},
        "model": {"encoder": "mlp", "hidden": []},
    }
    document[section] = fields if section == "model" else {**document.get(section, {}), **fields}
    with pytest.raises(ConfigError) as caught:
        parse_config(document, source="x.toml")
    message = str(caught.value)
    assert expected in message and "\n" not in message, message


def test_m_beyond_the_candidates_is_refused_when_the_sampler_is_built() -> None:
    with pytest.raises(ValueError, match=f"n_negatives = m = {POOL + 1} exceeds the {POOL} candidates"):
        build_sampler(_config("fixed_sets", POOL + 1), _source(POOL))


def test_the_cost_of_a_step_counts_every_negative() -> None:
    shared = exact_step_cost("shared", batch=64, m=4096, candidates=100_000, d_x=384, d_y=384, d_out=64)
    assert (shared.negatives, shared.head_rows, shared.scores, shared.hashes) == (4096, 4224, 64 * 4097, 0)
    assert shared.flops == 6 * (64 * 384 * 64 + (64 + 4096) * 384 * 64 + 64 * 4097 * 64)
    own = exact_step_cost(
        "independent", batch=64, m=4096, candidates=100_000, d_x=384, d_y=384, d_out=64, hidden=256
    )
    assert own.negatives == pytest.approx(100_000 * (1 - (1 - 0.04096) ** 64)) and own.hashes == 64 * 100_000
    everything = exact_step_cost("independent", batch=8, m=50, candidates=50, d_x=4, d_y=4, d_out=2)
    assert (everything.negatives, everything.hashes) == (50, 0)
    assert shared.pairs_per_second(0.25) == 256.0 and "negatives embedded" in shared.describe()
    with pytest.raises(ValueError, match="exceeds the 10 candidates"):
        exact_step_cost("shared", batch=2, m=11, candidates=10, d_x=1, d_y=1, d_out=1)
