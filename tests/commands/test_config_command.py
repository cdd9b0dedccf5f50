"""``crl config --defaults`` lists every field with its default, as TOML that validates to the defaults.

If these fail, the listing a new user starts from has drifted from what ``crl train`` accepts, or misses a
field.
"""

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from crl.commands import app
from crl.commands.config import defaults_toml, field_docs, section_variants
from crl.train.config import TrainConfig, config_to_toml, parse_config


def test_the_defaults_listing_validates_to_the_default_config() -> None:
    assert parse_config(tomllib.loads(defaults_toml(TrainConfig))) == TrainConfig()


def test_every_field_of_every_section_is_listed_with_its_description() -> None:
    text = defaults_toml(TrainConfig)
    for name, info in TrainConfig.model_fields.items():
        assert f"[{name}]" in text
        for variant in section_variants(info):
            for doc in field_docs(variant):
                assert f"{doc.name} = " in text, f"[{name}] {doc.name} is missing from the listing"
                assert doc.description, f"[{name}] {doc.name} has no description"


def test_the_command_prints_the_listing() -> None:
    result = CliRunner().invoke(app, ["config", "--defaults"])
    assert result.exit_code == 0, result.output
    assert result.output == defaults_toml(TrainConfig)


def test_check_fills_in_every_default(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[loss]\ntau = 0.2\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "--check", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output == config_to_toml(parse_config({"loss": {"tau": 0.2}}))


def test_neither_option_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["config"])
    assert result.exit_code == 2 and "exactly one of --defaults or --check" in result.output
