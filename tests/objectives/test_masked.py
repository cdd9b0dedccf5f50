"""masked_contrastive_loss: SCRL sets S_i of shared candidates, scored densely and masked, exactly."""

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss, masked_contrastive_loss
from tests.objectives.reference import one_direction


def _unit(rows: int, d: int, generator: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(rows, d, generator=generator, dtype=torch.float64), dim=1)


def _case(seed: int = 0, n: int = 5, size: int = 9, d: int = 4) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    a, p, c = _unit(n, d, g), _unit(n, d, g), _unit(size, d, g)
    member = torch.rand(n, size, generator=g) < 0.5
    member[:, 0] = True  # no empty set
    return a, p, c, member


@pytest.mark.parametrize("form", ["infonce", "dcl", "gcl"])
def test_equals_a_float64_loop_over_each_anchors_own_set(form: str) -> None:
    a, p, c, member = _case()
    ids_p = torch.tensor([0, 1, 2, 3, 4])
    ids_c = torch.tensor(
        [7, 0, 2, 9, 9, 9, 1, 8, 3]
    )  # candidate 0 (id 7, in every set) is nobody's duplicate
    keep = member & (ids_p[:, None] != ids_c[None, :])
    assert (keep != member).any(), "the case must leave some false negative out"
    sets = [[c[j].tolist() for j in range(c.shape[0]) if keep[i, j]] for i in range(a.shape[0])]
    expected = one_direction(a.tolist(), p.tolist(), sets, 0.3, form)
    got = masked_contrastive_loss(
        a, p, c, member, tau=0.3, form=form, positive_ids=ids_p, candidate_ids=ids_c, reduction="none"
    )
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_a_full_mask_is_the_shared_loss_and_equal_sets_are_the_independent_one() -> None:
    a, p, c, _ = _case(1)
    full = torch.ones(a.shape[0], c.shape[0], dtype=torch.bool)
    torch.testing.assert_close(
        masked_contrastive_loss(a, p, c, full, tau=0.2, form="gcl"),
        contrastive_loss(a, p, c, tau=0.2, form="gcl"),
    )
    g = torch.Generator().manual_seed(3)
    sets = torch.rand(a.shape[0], c.shape[0], generator=g).argsort(dim=1)[:, :4]
    member = torch.zeros_like(full).scatter_(1, sets, True)
    independent = contrastive_loss(a, p, c[sets], tau=0.2, form="gcl", regime="independent")
    torch.testing.assert_close(masked_contrastive_loss(a, p, c, member, tau=0.2, form="gcl"), independent)


def test_chunks_give_the_same_value_and_gradients() -> None:
    a, p, c, member = _case(2, n=7)
    inputs = [t.clone().requires_grad_(True) for t in (a, p, c)]
    whole = masked_contrastive_loss(*inputs, member, tau=0.1, form="gcl")
    whole.backward()
    grads = [t.grad.clone() for t in inputs]  # type: ignore[union-attr]
    chunked_inputs = [t.detach().clone().requires_grad_(True) for t in (a, p, c)]
    chunked = masked_contrastive_loss(*chunked_inputs, member, tau=0.1, form="gcl", block_size=2)
    chunked.backward()
    torch.testing.assert_close(chunked, whole)
    for got, expected in zip((t.grad for t in chunked_inputs), grads, strict=True):
        torch.testing.assert_close(got, expected)


def test_gradcheck_float64() -> None:
    a, p, c, member = _case(4, n=3, size=5, d=3)
    inputs = tuple(t.clone().requires_grad_(True) for t in (a, p, c))
    assert torch.autograd.gradcheck(
        lambda x, y, z: masked_contrastive_loss(x, y, z, member, tau=0.5, form="gcl", block_size=2), inputs
    )


def test_bad_input_names_the_argument() -> None:
    a, p, c, member = _case()
    with pytest.raises(TypeError, match="member must be a boolean tensor"):
        masked_contrastive_loss(a, p, c, member.long(), tau=0.1)
    with pytest.raises(ValueError, match=r"member has shape \(5, 8\)"):
        masked_contrastive_loss(a, p, c, member[:, :8], tau=0.1)
    empty = member.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="anchor 2 has an empty negative set"):
        masked_contrastive_loss(a, p, c, empty, tau=0.1, form="infonce")
    with pytest.raises(ValueError, match="go together"):
        masked_contrastive_loss(a, p, c, member, tau=0.1, positive_ids=torch.arange(5))
    with pytest.raises(ValueError, match="candidates has dimension 3"):
        masked_contrastive_loss(a, p, c[:, :3], member, tau=0.1)
