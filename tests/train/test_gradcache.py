"""GradCache: parameter gradients equal the plain one-graph step's (float64).

Without dropout the reference is the whole batch in one forward pass. With dropout the masks of a chunked forward
differ from those of one big forward (a transformer draws them layer by layer), so the reference embeds the same
chunks with their graphs kept, from the same random state: GradCache must reproduce exactly that step.
"""

import pytest
import torch
from torch import Tensor, nn

from crl.data.source import Batch
from crl.objectives import Temperature, contrastive_loss
from crl.train.gradcache import GradCache, check_chunk_size


class DropoutMLP(nn.Module):
    """A float64 MLP with dropout, so the recomputed chunks must replay the random state."""

    def __init__(self, seed: int, dropout: float = 0.3) -> None:
        super().__init__()
        torch.manual_seed(seed)
        layers = [nn.Linear(6, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 5)]
        self.net = nn.Sequential(*layers).double()

    def forward(self, x: Batch) -> Tensor:
        assert isinstance(x, Tensor)
        return nn.functional.normalize(self.net(x), dim=1)


class TinyBert(nn.Module):
    """A 2-layer random BERT (float64) with dropout, mean-pooled like MiniLM, on mapping batches."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        torch.manual_seed(0)
        config = BertConfig(
            vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
        )
        self.bert = BertModel(config).double()

    def forward(self, batch: Batch) -> Tensor:
        assert not isinstance(batch, Tensor)
        hidden = self.bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).double()
        return nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)


def _grads(module: nn.Module) -> list[Tensor]:
    return [p.grad.clone() for p in module.parameters() if p.grad is not None]


def _loss(a: Tensor, p: Tensor, tau: Temperature) -> Tensor:
    return contrastive_loss(a, p, tau=tau, symmetric=True, tiling="tiled", block_size=3)


def _chunked_with_graph(model: nn.Module, inputs: Batch, chunk_size: int) -> Tensor:
    """The reference of a dropout model: the same chunks as GradCache, each kept with its graph."""
    total = inputs.shape[0] if isinstance(inputs, Tensor) else inputs["input_ids"].shape[0]
    parts = []
    for start in range(0, total, chunk_size):
        rows = slice(start, start + chunk_size)
        parts.append(
            model(inputs[rows] if isinstance(inputs, Tensor) else {k: v[rows] for k, v in inputs.items()})
        )
    return torch.cat(parts)


@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_gradcache_matches_one_graph_over_the_whole_batch(chunk_size: int) -> None:
    model, tau = DropoutMLP(1, dropout=0.0), Temperature(0.2, learnable=True)
    tau.double()
    x, y = torch.randn(11, 6, dtype=torch.float64), torch.randn(11, 6, dtype=torch.float64)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    plain_a = model(x)
    plain = _loss(plain_a, model(y), tau)
    plain.backward()
    expected, expected_tau = _grads(model), tau.log_inverse.grad.clone()  # type: ignore[union-attr]
    model.zero_grad()
    tau.zero_grad()
    torch.set_rng_state(state)
    cache = GradCache(chunk_size)
    cached = _loss(cache.embed(model, x), cache.embed(model, y), tau)
    cache.backward(cached)
    torch.testing.assert_close(cached, plain, rtol=0, atol=1e-12)
    for got, want in zip(_grads(model), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(tau.log_inverse.grad, expected_tau)  # type: ignore[union-attr]


@pytest.mark.parametrize("chunk_size", [4])
def test_gradcache_matches_plain_step_on_a_transformer_with_dropout(chunk_size: int) -> None:
    model = TinyBert()
    model.train()
    ids = torch.randint(1, 50, (9, 7), generator=torch.Generator().manual_seed(0))
    mask = (torch.arange(7)[None, :] < torch.randint(2, 8, (9, 1))).long()
    x = {"input_ids": ids, "attention_mask": mask}
    y = {"input_ids": ids.flip(1), "attention_mask": mask.flip(1)}
    torch.manual_seed(3)
    state = torch.get_rng_state()
    a, p = _chunked_with_graph(model, x, chunk_size), _chunked_with_graph(model, y, chunk_size)
    contrastive_loss(a, p, tau=0.1).backward()
    expected = _grads(model)
    model.zero_grad()
    torch.set_rng_state(state)
    cache = GradCache(chunk_size)
    cache.backward(contrastive_loss(cache.embed(model, x), cache.embed(model, y), tau=0.1))
    for got, want in zip(_grads(model), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


def test_gradcache_keeps_the_random_stream_of_the_plain_step() -> None:
    model = DropoutMLP(2)
    x = torch.randn(5, 6, dtype=torch.float64)
    torch.manual_seed(11)
    model(x)
    after_plain = torch.get_rng_state()
    torch.manual_seed(11)
    cache = GradCache(2)
    a = cache.embed(model, x)
    cache.backward((a * a.detach()).sum())
    assert torch.equal(torch.get_rng_state(), after_plain)


def test_gradcache_refuses_bad_use() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        check_chunk_size(0)
    cache = GradCache(2)
    with pytest.raises(ValueError, match="nothing was embedded"):
        cache.backward(torch.zeros(()))
    with pytest.raises(ValueError, match="0 inputs"):
        cache.embed(nn.Identity(), torch.zeros(0, 3))
    a = cache.embed(nn.Identity(), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="scalar"):
        cache.backward(a.sum(1))


def test_gradcache_recomputes_under_the_autocast_of_the_embedding_pass() -> None:
    """bf16 autocast (``[run] precision = "bf16"``): the chunks are recomputed in bf16, as they were embedded."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 5))
    x, y = torch.randn(10, 6), torch.randn(10, 6)
    seen: list[torch.dtype] = []

    def encode(inputs: Batch) -> Tensor:
        out = model(inputs)
        seen.append(out.dtype)
        return out

    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, p = _chunked_with_graph(model, x, 4), _chunked_with_graph(model, y, 4)
        contrastive_loss(a, p, tau=0.1).backward()
    expected = _grads(model)
    model.zero_grad()
    cache = GradCache(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = contrastive_loss(cache.embed(encode, x), cache.embed(encode, y), tau=0.1)
    cache.backward(loss)
    assert seen == [torch.bfloat16] * 12  # 6 chunks embedded, 6 recomputed: all under autocast
    for got, want in zip(_grads(model), expected, strict=True):
        # bf16 rounding only: the reference sums its chunks' weight gradients in bf16 (autocast casts each weight
        # once), GradCache sums them in float32
        assert float((got - want).norm() / want.norm()) < 2e-2
