"""`tfhelm` sub-commands that live in their own modules; tfhelm/cli.py registers them."""
