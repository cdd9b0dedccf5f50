"""The choice of vectors (backbone h or embedding z) on validation images: the better one wins on constructed
encoders where only one of the two separates the classes, and the record in the run folder reads back."""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from crl.models import DualEncoder
from crl.models.encoders import MLP, Encoder
from crl.train import vectors as vectors_module
from crl.train.config import parse_config
from crl.train.data import LabelledInputs, ValidationSet
from crl.train.vectors import (
    VECTORS_FILE,
    VectorChoice,
    check_vectors,
    choose_vectors,
    encoder_of,
    read_choice,
    record_choice,
)

CLASSES, SIGNAL, NOISE = 4, 4, 12


class Split(nn.Module):
    """A stub backbone on inputs [one-hot class * 3 | noise]: one of h and z sees the class block, the other only
    the noise block."""

    def __init__(self, h_sees_class: bool) -> None:
        super().__init__()
        self.h_sees_class = h_sees_class

    def _block(self, x: Tensor, signal: bool) -> Tensor:
        return x[:, :SIGNAL] if signal else x[:, SIGNAL:]

    def representation(self, x: Tensor) -> Tensor:
        return self._block(x, self.h_sees_class)

    def forward(self, x: Tensor) -> Tensor:
        return self._block(x, not self.h_sees_class)


def _items(count: int, generator: torch.Generator) -> LabelledInputs:
    labels = torch.arange(count) % CLASSES
    signal = 3.0 * nn.functional.one_hot(labels, CLASSES).float()
    noise = torch.randn(count, NOISE, generator=generator)
    return LabelledInputs(
        torch.cat([signal + 0.1 * torch.randn(count, SIGNAL, generator=generator), noise], 1), labels, CLASSES
    )


@pytest.fixture
def validation(monkeypatch: pytest.MonkeyPatch) -> ValidationSet:
    generator = torch.Generator().manual_seed(0)
    made = ValidationSet(_items(40, generator), _items(200, generator), held_out=True, seed=0)
    monkeypatch.setattr(vectors_module, "validation_set", lambda data: made)
    return made


def _brute_accuracy_at_1(
    queries: np.ndarray, gallery: np.ndarray, query_labels: Tensor, labels: Tensor
) -> float:
    """Share of queries whose highest-cosine gallery item shares their class (float64, by definition)."""
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    nearest = (unit(queries) @ unit(gallery).T).argmax(axis=1)
    return float((labels.numpy()[nearest] == query_labels.numpy()).mean())


@pytest.mark.parametrize(("h_sees_class", "winner"), [(True, "h"), (False, "z")])
def test_the_vectors_that_separate_the_classes_win(
    validation: ValidationSet, h_sees_class: bool, winner: str
) -> None:
    model = DualEncoder(Encoder(Split(h_sees_class)))
    config = parse_config({"data": {"source": "digits"}})
    model.train()
    choice = choose_vectors(model, config, torch.device("cpu"), step=7)
    assert choice is not None and choice.vectors == winner and choice.step == 7 and model.training
    queries, gallery = validation.queries, validation.gallery
    for name, signal in (("h", h_sees_class), ("z", not h_sees_class)):
        block = slice(0, SIGNAL) if signal else slice(SIGNAL, None)
        expected = _brute_accuracy_at_1(
            queries.inputs[:, block].numpy(), gallery.inputs[:, block].numpy(), queries.labels, gallery.labels
        )
        assert choice.scores[name] == pytest.approx(expected, abs=1e-12)
    assert choice.scores[winner] == 1.0 and choice.scores["z" if winner == "h" else "h"] < 0.6
    assert (choice.n_queries, choice.n_gallery, choice.held_out, choice.seed) == (40, 200, True, 0)


def test_two_towers_and_encoders_without_h_have_no_choice(validation: ValidationSet) -> None:
    config = parse_config({"data": {"source": "digits"}})
    two = DualEncoder(Encoder(Split(True)), Encoder(Split(True)))
    flat = DualEncoder(Encoder(nn.Linear(SIGNAL + NOISE, 3)))
    for model in (two, flat):
        assert choose_vectors(model, config, torch.device("cpu"), step=1) is None
    with pytest.raises(ValueError, match=r"--vectors h: this run has two towers.*; use --vectors z$"):
        encoder_of(two, "h")
    with pytest.raises(ValueError, match=r"--vectors h: this run's encoder \(Linear\) has no backbone"):
        encoder_of(flat, "h")


def test_h_of_an_mlp_is_its_last_hidden_layer() -> None:
    mlp = MLP(6, [5, 4], 3, generator=torch.Generator().manual_seed(0))
    model = DualEncoder(Encoder(mlp))
    x = torch.randn(2, 6)
    assert encoder_of(model, "h")(x).shape == (2, 4) and encoder_of(model, "z", "positive")(x).shape == (2, 3)


@pytest.mark.parametrize("text", ["H", "both", ""])
def test_a_bad_vectors_value_is_one_line(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_vectors(text)
    assert str(caught.value).startswith(f"--vectors {text!r} is not known; use h") and "\n" not in str(
        caught.value
    )


def test_the_record_keeps_each_step_and_reads_back(tmp_path: Path) -> None:
    first = VectorChoice("h", 10, {"h": 0.9, "z": 0.8}, 143, 1295, True, 0)
    second = VectorChoice("z", 20, {"h": 0.7, "z": 0.75}, 143, 1295, True, 0)
    assert read_choice(tmp_path, 10) is None
    record_choice(tmp_path, first)
    record_choice(tmp_path, second)
    assert read_choice(tmp_path, 10) == first and read_choice(tmp_path, 20) == second
    (tmp_path / VECTORS_FILE).write_text("[1]", encoding="utf-8")
    with pytest.raises(ValueError, match='holds no "by_step" object; delete it'):
        read_choice(tmp_path, 10)
