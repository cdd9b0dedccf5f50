"""`python -m crl ...` (and `torchrun -m crl ...`) runs the command-line app."""

from crl.cli import app

app()
