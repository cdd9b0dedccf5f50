"""The kinds of [loss] negatives: every kind has its facts and its sampler, and the config checks what they say."""

from typing import get_args

import pytest
import torch

from crl.negatives import EmbeddedBatch
from crl.negatives.mining import Mined
from crl.train.build import NEGATIVE_KINDS, build_sampler
from crl.train.config import ConfigError, LossConfig, parse_config
from crl.train.negative_kinds import NEGATIVES_FACTS, NegativesName, negatives_where

KINDS = get_args(NegativesName)


class _Pool:
    n_pairs, anchor_shape, positive_shape, generate_negatives = 50, (2,), (2,), None


def _loss(negatives: str, **fields: object) -> dict[str, object]:
    """A [loss] section of ``negatives`` with m = 3 where the kind takes an m."""
    return {"negatives": negatives, "n_negatives": 3 if NEGATIVES_FACTS[negatives].sized else 0, **fields}


def test_every_kind_has_facts_and_a_sampler() -> None:
    """If this fails, a kind was added to the config without its facts or its sampler (or the other way)."""
    assert LossConfig.model_fields["negatives"].annotation == NegativesName
    assert tuple(NEGATIVES_FACTS) == KINDS
    assert set(NEGATIVE_KINDS) == set(KINDS)
    assert all(NEGATIVE_KINDS[name].facts is NEGATIVES_FACTS[name] for name in KINDS)


@pytest.mark.parametrize("negatives", [k for k in KINDS if k != "mined"])
def test_each_kinds_regime_is_the_regime_its_sampler_draws_in(negatives: str) -> None:
    config = parse_config({"loss": _loss(negatives)})
    sampler = build_sampler(config, _Pool())  # type: ignore[arg-type]
    batch = EmbeddedBatch(
        torch.zeros(3, 2), torch.zeros(3, 2), indices=torch.arange(3)
    )  # as the loop gives it
    drawn = sampler.draw(batch, torch.Generator().manual_seed(0))
    assert sampler.regime == drawn.regime == NEGATIVES_FACTS[negatives].regime == config.loss.regime


def test_mined_negatives_are_drawn_per_anchor() -> None:
    assert Mined.regime == NEGATIVES_FACTS["mined"].regime == "independent"


def test_the_facts_name_the_kinds_each_rule_allows() -> None:
    """The rules of docs/estimators.md and the config's descriptions, as the facts give them."""
    assert negatives_where(lambda f: f.per_anchor) == ("independent_pool", "mined", "fixed_sets")
    assert negatives_where(lambda f: not f.sized) == ("in_batch",)
    assert negatives_where(lambda f: f.pooled) == ("shared_pool", "independent_pool")
    assert negatives_where(lambda f: not f.holds_inputs) == ("queue",)
    assert negatives_where(lambda f: f.fastclip) == ("shared_pool",)
    assert negatives_where(lambda f: f.per_sample_temperature) == ("in_batch", "shared_pool")
    assert negatives_where(lambda f: f.fixed) == ("fixed_pool", "fixed_sets")


@pytest.mark.parametrize("negatives", KINDS)
def test_the_config_refuses_what_the_facts_rule_out(negatives: str) -> None:
    """A symmetric loss needs a shared kind that is not fixed (the exact L_hat is one-sided), a pool size a pooled
    one, fastclip and per-sample temperatures theirs; every other kind is refused naming the field."""
    facts = NEGATIVES_FACTS[negatives]
    cases = [
        ({"symmetric": True}, not (facts.per_anchor or facts.fixed), "symmetric = true"),
        ({"pool_size": 5}, facts.pooled, "pool_size = 5 needs negatives ="),
        ({"estimator": "fastclip", "form": "gcl"}, facts.fastclip, "negatives = "),
        (
            {"temperature": "per_sample", "form": "gcl", "tau": 0.2},
            facts.per_sample_temperature,
            "negatives = ",
        ),
    ]
    for fields, allowed, message in cases:
        document = {"loss": _loss(negatives, **fields)}
        if allowed:
            assert parse_config(document).loss.negatives == negatives
        else:
            with pytest.raises(ConfigError, match=message):
                parse_config(document)


def test_m_comes_from_n_negatives_only_where_the_kind_is_sized() -> None:
    with pytest.raises(ConfigError, match="n_negatives = 4 is not allowed with negatives = 'in_batch'"):
        parse_config({"loss": {"negatives": "in_batch", "n_negatives": 4}})
    for negatives in negatives_where(lambda f: f.sized):
        with pytest.raises(ConfigError, match=f"negatives = '{negatives}' needs n_negatives"):
            parse_config({"loss": {"negatives": negatives}})
