"""``[model] start = "identity"``: a linear head that starts as its inputs themselves (the zero-shot map)."""

import pytest
import torch
from torch.nn import functional

from crl.models import DualEncoder
from crl.train.config import parse_config
from crl.train.model_kinds import build_model


def model_of(model: dict[str, object]) -> DualEncoder:
    """The dual encoder of a [model] section on 6-wide inputs."""
    config = parse_config({"model": {"encoder": "mlp", **model}}, source="test")
    return build_model(config.model, config.loss, (6,), (6,), torch.Generator().manual_seed(0))


def test_an_identity_start_embeds_each_input_as_itself() -> None:
    """If this fails, a head configured to start at the zero-shot map starts elsewhere (a random head), so a
    pilot or a training run starts below what the user already has."""
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    model = model_of({"hidden": [], "embedding_dim": 6, "start": "identity", "towers": "two"})
    torch.testing.assert_close(model.encode_anchors(x), functional.normalize(x, dim=-1))
    torch.testing.assert_close(model.encode_positives(x), functional.normalize(x, dim=-1))
    random = model_of({"hidden": [], "embedding_dim": 6})
    assert not torch.allclose(random.encode_anchors(x), functional.normalize(x, dim=-1))


@pytest.mark.parametrize("model", [{"hidden": [], "embedding_dim": 4}, {"hidden": [8], "embedding_dim": 6}])
def test_an_identity_start_off_its_own_width_names_the_fields(model: dict[str, object]) -> None:
    """If this fails, an identity start that cannot exist gives a shape error from deep inside torch."""
    with pytest.raises(ValueError, match=r"hidden = \[\] and embedding_dim = 6"):
        model_of({**model, "start": "identity"})
