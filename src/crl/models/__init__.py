"""Encoders, the score s(x, y) = <f(x), g(y)> they define, and embedding many inputs with them.

- :mod:`crl.models.encoders`: :class:`MLP`, :class:`SmallCNN` (tensor inputs), :class:`Encoder` (a backbone then
  the projection onto the unit sphere), :class:`DualEncoder` (towers f and g, and the temperature tau);
- :mod:`crl.models.text`: :class:`TokenBag`, an encoder of token sequences (mapping batches);
- :mod:`crl.models.minilm`: :class:`MiniLM`, pretrained all-MiniLM-L6-v2 loaded offline, :func:`embed_texts`
  (strings -> unit-norm vectors) and :func:`save_sentence_transformer`;
- :mod:`crl.models.efficientnet`: :class:`EfficientNetLite0`, the ImageNet image backbone of locked glyph features
  (the weights of the optional ``crl[cjk]``);
- :mod:`crl.models.embed`: :func:`embed`, phi of N inputs in batches.
"""

from crl.models.efficientnet import EfficientNetLite0, load_efficientnet_lite0, normalise_pixels
from crl.models.embed import embed
from crl.models.encoders import MLP, DualEncoder, Encoder, SmallCNN, init_parameters, project_to_sphere
from crl.models.minilm import MiniLM, embed_texts, save_sentence_transformer
from crl.models.text import TokenBag
from crl.objectives import Temperature

__all__ = [
    "MLP",
    "DualEncoder",
    "EfficientNetLite0",
    "Encoder",
    "MiniLM",
    "SmallCNN",
    "Temperature",
    "TokenBag",
    "embed",
    "embed_texts",
    "init_parameters",
    "load_efficientnet_lite0",
    "normalise_pixels",
    "project_to_sphere",
    "save_sentence_transformer",
]
