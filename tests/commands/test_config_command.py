"""``crl config --defaults`` lists every field with its default, as TOML that validates to the defaults.

If these fail, the listing a new user starts from has drifted from what ``crl train`` accepts, or misses a
field.
"""

import tomllib
from pathlib import Path

import pytest
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


@pytest.mark.parametrize(
    "arguments", [["{path}"], ["{path}", "--check"], ["--check", "{path}"]], ids=["alone", "after", "before"]
)
def test_check_fills_in_every_default(tmp_path: Path, arguments: list[str]) -> None:
    """`crl config CONFIG --check`, as a user types it, was a usage error (--check took the next word as its
    value); the config may come before or after --check, or alone."""
    path = tmp_path / "c.toml"
    path.write_text("[loss]\ntau = 0.2\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["config", *(word.format(path=path) for word in arguments)])
    assert result.exit_code == 0, result.output
    assert result.output == config_to_toml(parse_config({"loss": {"tau": 0.2}}))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "pass a CONFIG to validate (crl config CONFIG) or --defaults"),
        (["--check"], "--check needs a CONFIG to validate: crl config CONFIG --check"),
        (["--defaults", "c.toml"], "--defaults lists every field and takes no CONFIG"),
    ],
)
def test_a_wrong_combination_is_one_usage_line(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["config", *arguments])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1
