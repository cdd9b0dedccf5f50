"""The `crl` command line: parses arguments and calls the library, nothing more.

Each command lives next to the library part it drives and is registered here.
"""

import typer

app = typer.Typer(
    name="crl",
    help="Contrastive representation learning for similarity search, with its statistical theory built in.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print crl's version."""
    from crl import __version__

    typer.echo(__version__)
