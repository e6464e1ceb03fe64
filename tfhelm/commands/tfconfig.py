"""`tfhelm tfconfig NAME`: the exact TF_CONFIG one task gets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, out


@cli_errors
@o.cluster_flags("namespace", "workers", "ps", "chief", "evaluator", "values", "set", "set_string", "set_json")
def tfconfig(name: o.ClusterName,
             task: Annotated[Optional[str], typer.Option(
                 "--task", "-t", help="TYPE:INDEX, e.g. worker:3.")] = None,
             client: Annotated[Optional[str], typer.Option(
                 "--client", help="HOST:PORT of an outside chief (e.g. a notebook) that drives an "
                 "in-graph cluster: prints the chief's TF_CONFIG with that address.")] = None,
             flags: o.ClusterFlags = None):
    """The exact TF_CONFIG a task gets (offline with shape options, else from the release)."""
    from tfhelm.api import ingraph
    from tfhelm.cluster import spec

    config = ingraph.tf_config(name, task=task, client=client, **flags)
    out.print(spec.dumps(config), markup=False, highlight=False, soft_wrap=True)
