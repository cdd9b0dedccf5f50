"""The false-negative mask (positive_ids / negative_ids) against float64 loops that drop those terms."""

import math

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss


def reference(a, p, cands, own, pos_ids, cand_ids, tau, form, positives_of=None):
    """float64 loop: l_i from s_ii = <a_i, p_i> and the kept s_ij = <a_i, c_j> (own positive and same-id dropped)."""
    a, p, c = a.double().tolist(), p.double().tolist(), cands.double().tolist()
    values = []
    for i, (ai, pi) in enumerate(zip(a, p, strict=True)):
        pos = sum(x * y for x, y in zip(ai, pi, strict=True)) / tau
        kept = [
            sum(x * y for x, y in zip(ai, cj, strict=True)) / tau
            for j, cj in enumerate(c)
            if j != own(i) and cand_ids[j] != pos_ids[i]
        ]
        terms = [k - pos for k in kept]
        if form == "infonce":
            values.append(math.log(1.0 + sum(math.exp(t) for t in terms)))
        elif form == "dcl":
            values.append(math.log(sum(math.exp(t) for t in terms)))
        else:
            values.append(tau * (math.log(sum(math.exp(t) for t in terms)) - math.log(len(terms))))
    return torch.tensor(values, dtype=torch.float64)


def _unit(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)


IDS = torch.tensor([0, 1, 0, 2, 3, 1, 4, 0, 5])
TAU = 0.3


@pytest.mark.parametrize("form", ["infonce", "dcl", "gcl"])
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
@pytest.mark.parametrize("symmetric", [False, True])
def test_in_batch_matches_loops(form, tiling, symmetric):
    a, p = _unit(9, 4, 0), _unit(9, 4, 1)
    got = contrastive_loss(
        a,
        p,
        tau=TAU,
        form=form,
        symmetric=symmetric,
        tiling=tiling,
        block_size=4,
        positive_ids=IDS,
        reduction="none",
    )
    ids = IDS.tolist()
    want = reference(a, p, p, lambda i: i, ids, ids, TAU, form)
    if symmetric:
        want = 0.5 * (want + reference(p, a, a, lambda i: i, ids, ids, TAU, form))
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("form", ["infonce", "gcl"])
@pytest.mark.parametrize("tiling", ["dense", "tiled"])
def test_shared_negatives_and_gathered_offset_match_loops(form, tiling):
    a, p, neg = _unit(9, 4, 2), _unit(9, 4, 3), _unit(7, 4, 4)
    neg_ids = torch.tensor([1, 7, 0, 8, 9, 0, 2])
    got = contrastive_loss(
        a,
        p,
        neg,
        tau=TAU,
        form=form,
        tiling=tiling,
        block_size=4,
        positive_ids=IDS,
        negative_ids=neg_ids,
        reduction="none",
    )
    want = reference(a, p, neg, lambda i: None, IDS.tolist(), neg_ids.tolist(), TAU, form)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    gathered = torch.cat([neg[:3], p, neg[3:]])
    gathered_ids = torch.cat([neg_ids[:3], IDS, neg_ids[3:]])
    got = contrastive_loss(
        a,
        p,
        gathered,
        tau=TAU,
        form=form,
        tiling=tiling,
        block_size=4,
        positive_offset=3,
        positive_ids=IDS,
        negative_ids=gathered_ids,
        reduction="none",
    )
    want = reference(a, p, gathered, lambda i: i + 3, IDS.tolist(), gathered_ids.tolist(), TAU, form)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_symmetric_pair_and_independent_match_loops():
    a, p, ny, nx = _unit(9, 4, 5), _unit(9, 4, 6), _unit(6, 4, 7), _unit(5, 4, 8)
    ids_y, ids_x = torch.tensor([0, 3, 1, 9, 0, 4]), torch.tensor([2, 2, 8, 5, 1])
    got = contrastive_loss(
        a,
        p,
        (ny, nx),
        tau=TAU,
        symmetric=True,
        tiling="tiled",
        block_size=4,
        positive_ids=IDS,
        negative_ids=(ids_y, ids_x),
        reduction="none",
    )
    want = 0.5 * (
        reference(a, p, ny, lambda i: None, IDS.tolist(), ids_y.tolist(), TAU, "infonce")
        + reference(p, a, nx, lambda i: None, IDS.tolist(), ids_x.tolist(), TAU, "infonce")
    )
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    neg = _unit(9 * 5, 4, 9).view(9, 5, 4)
    neg_ids = torch.randint(0, 4, (9, 5), generator=torch.Generator().manual_seed(0))
    neg_ids[:, 0] = 99
    got = contrastive_loss(
        a,
        p,
        neg,
        tau=TAU,
        form="gcl",
        regime="independent",
        positive_ids=IDS,
        negative_ids=neg_ids,
        reduction="none",
    )
    want = torch.stack(
        [
            reference(
                a[i : i + 1],
                p[i : i + 1],
                neg[i],
                lambda _: None,
                IDS[i : i + 1].tolist(),
                neg_ids[i].tolist(),
                TAU,
                "gcl",
            )[0]
            for i in range(9)
        ]
    )
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_without_duplicates_the_ids_change_nothing():
    a, p = _unit(9, 4, 10), _unit(9, 4, 11)
    plain = contrastive_loss(a, p, tau=TAU, symmetric=True, tiling="tiled", block_size=4)
    masked = contrastive_loss(
        a, p, tau=TAU, symmetric=True, tiling="tiled", block_size=4, positive_ids=torch.arange(9) * 3
    )
    torch.testing.assert_close(plain, masked, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("form", ["infonce", "gcl"])
def test_gradcheck_tiled_with_ids(symmetric, form):
    a = _unit(6, 3, 12).requires_grad_(True)
    p = _unit(6, 3, 13).requires_grad_(True)
    ids = torch.tensor([0, 1, 0, 2, 1, 3])

    def f(x, y):
        return contrastive_loss(
            x, y, tau=TAU, form=form, symmetric=symmetric, tiling="tiled", block_size=4, positive_ids=ids
        )

    assert torch.autograd.gradcheck(f, (a, p))


def test_bad_ids_are_named():
    a, p, neg = _unit(4, 3, 14), _unit(4, 3, 15), _unit(5, 3, 16)
    ids = torch.arange(4)
    with pytest.raises(ValueError, match="negative_ids needs positive_ids"):
        contrastive_loss(a, p, neg, tau=TAU, negative_ids=torch.arange(5))
    with pytest.raises(ValueError, match="needs negative_ids"):
        contrastive_loss(a, p, neg, tau=TAU, positive_ids=ids)
    with pytest.raises(ValueError, match="Drop negative_ids"):
        contrastive_loss(a, p, tau=TAU, positive_ids=ids, negative_ids=ids)
    with pytest.raises(ValueError, match=r"positive_ids has shape \(3,\)"):
        contrastive_loss(a, p, tau=TAU, positive_ids=ids[:3])
    with pytest.raises(ValueError, match=r"positive_ids has dtype torch\.float64; pass an integer tensor"):
        contrastive_loss(a, p, tau=TAU, positive_ids=ids.double())
    with pytest.raises(TypeError, match=r"positive_ids must be an integer torch\.Tensor"):
        contrastive_loss(a, p, tau=TAU, positive_ids=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="anchor 0 has every negative left out"):
        contrastive_loss(a, p, tau=TAU, form="dcl", positive_ids=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="anchor 0 has every negative left out"):
        contrastive_loss(a, p, tau=TAU, form="infonce", positive_ids=torch.zeros(4, dtype=torch.long))
