"""`python -m crl ...` (and `torchrun -m crl ...`) runs the command-line app."""

from crl.commands import app

app()
