"""The ``crl`` command line: one thin typer front-end per command, each calling the library.

Every command lives in its own module here (``verify``, ``train``, ``evaluate``, ``config``) and reports expected errors
(bad input, a missing path, a full disk) as one line and exit status 2 (:mod:`crl.commands._errors`); the
library does the work. Heavy imports (torch, the claims) happen inside the commands, so ``crl --help`` is fast.
"""

import typer

from crl import __version__
from crl.commands._help import FlagsCommand, FlagsGroup
from crl.commands.advise import advise, advise_check
from crl.commands.config import config
from crl.commands.embed import embed
from crl.commands.evaluate import evaluate
from crl.commands.experiment import experiment
from crl.commands.index import index_app
from crl.commands.milvus import milvus_app
from crl.commands.power import power
from crl.commands.search import search
from crl.commands.serve import serve
from crl.commands.train import train
from crl.commands.verify import verify

app = typer.Typer(
    name="crl",
    help="Contrastive representation learning for similarity search, with its statistical theory built in.",
    no_args_is_help=True,
    add_completion=False,
    cls=FlagsGroup,
)


@app.command(cls=FlagsCommand)
def version() -> None:
    """Print crl's version."""
    typer.echo(__version__)


app.command(cls=FlagsCommand)(verify)
app.command(cls=FlagsCommand)(power)
app.command(cls=FlagsCommand)(train)
app.command("eval", cls=FlagsCommand)(evaluate)
app.command(cls=FlagsCommand)(config)
app.command(cls=FlagsCommand)(embed)
app.command(cls=FlagsCommand)(experiment)
app.command(cls=FlagsCommand)(advise)
app.command("advise-check", cls=FlagsCommand)(advise_check)
app.add_typer(index_app)
app.add_typer(milvus_app)
app.command(cls=FlagsCommand)(search)
app.command(cls=FlagsCommand)(serve)

__all__ = ["app"]
