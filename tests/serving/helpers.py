"""A small text index built as the README builds one: ``crl index build minilm --text-file``."""

from pathlib import Path

from typer.testing import CliRunner

from crl.commands import app

CORPUS = ["a large expanse of sea", "the domestic dog", "to run quickly", "sea, ocean"]
"""Four lines, two about the sea: "water" finds them first."""


def build_text_index(folder: Path) -> Path:
    """``CORPUS`` written to ``folder/corpus.txt`` and indexed by the CLI into ``folder/idx`` (one MiniLM load)."""
    (folder / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    command = [
        "index",
        "build",
        "minilm",
        "--text-file",
        str(folder / "corpus.txt"),
        "--out",
        str(folder / "idx"),
    ]
    built = CliRunner().invoke(app, command)
    assert built.exit_code == 0, built.output
    return folder / "idx"
