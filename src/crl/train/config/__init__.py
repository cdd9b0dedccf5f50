"""The training configuration: a TOML file validated by pydantic models, one module per TOML section
(:mod:`~crl.train.config.data`, :mod:`~crl.train.config.model`, :mod:`~crl.train.config.loss`,
:mod:`~crl.train.config.sections` for ``[optim]``, ``[run]`` and ``[eval]``), the shared base
(:mod:`~crl.train.config.base`), the whole document (:mod:`~crl.train.config.document`) and the file loader
(:mod:`~crl.train.config.files`); every public name is imported here, so ``from crl.train.config import ...``
reads the whole schema, and ``crl config`` lists it.

Sections: ``[data]``, ``[model]``, ``[loss]``, ``[optim]``, ``[run]``, ``[eval]``. ``[data]`` and ``[model]`` are
kinds chosen by a tag, ``source`` and ``encoder``: each kind is one pydantic model with only its own fields
(pydantic discriminated unions), so a field of another kind is an unknown field, e.g. ``[data] kappa`` with
``source = "digits"``; fields every kind has sit in a private base class. ``[loss]`` gathers the estimator's
fields (:class:`EstimatorFields`: ``estimator = "fastclip"`` trains with
:func:`crl.objectives.moving_average_loss`, SogCLR / FastCLIP's running estimate u_i of each item's pool mean)
and the temperature's (:class:`TemperatureFields`: ``temperature = "per_sample"`` is iSogCLR's tau_i per item,
:func:`crl.objectives.individual_temperature_loss`), each checked by its own part of the validator.

Every field has a default and a description; unknown fields are errors; types are strict (no string -> number)
and floats finite. :func:`load_config` reads the file, applies ``--set`` overrides and migrates old flat
sections (:mod:`crl.train.config.files`), and turns pydantic's errors into a :class:`ConfigError` whose message
names the field, the value given and what is allowed, e.g.::

    configs/x.toml: [loss] form = 'nce' is not allowed: expected one of 'infonce', 'dcl', 'gcl'
"""

from __future__ import annotations

from crl.train.config.base import FolderName, Section
from crl.train.config.data import (
    LOCKED_TWO_MODALITIES,
    ArraysData,
    BibleData,
    DataConfig,
    DigitsData,
    FashionMnistData,
    GcideData,
    ImageData,
    LockedData,
    SyntheticData,
    TextData,
    TextPairsData,
    WordnetData,
)
from crl.train.config.document import (
    IMAGE_SOURCES,
    TrainConfig,
    load_config,
    parse_config,
    parse_saved_config,
    resume_differences,
)
from crl.train.config.files import ConfigError, config_to_toml, read_toml
from crl.train.config.loss import (
    EstimatorFields,
    LossConfig,
    TemperatureFields,
    check_estimator,
    check_temperature,
)
from crl.train.config.model import BagModel, CnnModel, MiniLMModel, MlpModel, ModelConfig
from crl.train.config.sections import EvalConfig, OptimConfig, RunConfig

__all__ = [
    "IMAGE_SOURCES",
    "LOCKED_TWO_MODALITIES",
    "ArraysData",
    "BagModel",
    "BibleData",
    "CnnModel",
    "ConfigError",
    "DataConfig",
    "DigitsData",
    "EstimatorFields",
    "EvalConfig",
    "FashionMnistData",
    "FolderName",
    "GcideData",
    "ImageData",
    "LockedData",
    "LossConfig",
    "MiniLMModel",
    "MlpModel",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "Section",
    "SyntheticData",
    "TemperatureFields",
    "TextData",
    "TextPairsData",
    "TrainConfig",
    "WordnetData",
    "check_estimator",
    "check_temperature",
    "config_to_toml",
    "load_config",
    "parse_config",
    "parse_saved_config",
    "read_toml",
    "resume_differences",
]
