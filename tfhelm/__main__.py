"""`python -m tfhelm`: the same CLI as the `tfhelm` command."""

from tfhelm.cli import app

app(prog_name="tfhelm")
