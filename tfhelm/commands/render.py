"""`tfhelm render NAME`: a TF cluster's manifests (or its values, for GitOps), offline."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, write


@cli_errors
@o.cluster_flags()
def render(name: o.ClusterName, flags: o.ClusterFlags = None,
           values_only: Annotated[bool, typer.Option(
               "--values-only", help="Print each release's values for GitOps instead "
               "(with the in-cluster reaper on when there are parameter servers).")] = False,
           one_release: Annotated[bool, typer.Option(
               "--one-release", help="With --values-only: one release holding everything "
               "(components: all), e.g. for a Flux HelmRelease.")] = False):
    """Print the manifests of a TF cluster (or its values) without touching a cluster."""
    from tfhelm.api import clusters

    write(clusters.render(name, values_only=values_only, one_release=one_release, **flags))
