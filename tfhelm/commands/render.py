"""`tfhelm render NAME`: a TF cluster's manifests (or its values, for GitOps), offline."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, write


@cli_errors
def render(name: o.ClusterName, namespace: o.Namespace = None, workers: o.Workers = None,
           ps: o.Ps = None, chief: o.Chief = None, evaluator: o.Evaluator = None,
           in_graph: o.InGraph = None, image: o.Image = None, script: o.Script = None,
           gpus: o.Gpus = None, user: o.User = None, keras: o.Keras = None, pip: o.Pip = None,
           pip_index_url: o.PipIndexUrl = None, pip_find_links: o.PipFindLinks = None,
           values_files: o.ValuesFiles = None,
           sets: o.Sets = None, set_strings: o.SetStrings = None, set_jsons: o.SetJsons = None,
           values_only: Annotated[bool, typer.Option(
               "--values-only", help="Print each release's values for GitOps instead "
               "(with the in-cluster reaper on when there are parameter servers).")] = False,
           one_release: Annotated[bool, typer.Option(
               "--one-release", help="With --values-only: one release holding everything "
               "(components: all), e.g. for a Flux HelmRelease.")] = False,
           script_args: o.ScriptArgs = None):
    """Print the manifests of a TF cluster (or its values) without touching a cluster."""
    from tfhelm.cluster import deploy
    from tfhelm.errors import SpecError

    if one_release and not values_only:
        raise SpecError("--one-release", "only goes with --values-only")
    p = deploy.plan(o.cluster_options(
        name=name, namespace=namespace, workers=workers, ps=ps, chief=chief, evaluator=evaluator,
        in_graph=in_graph, image=image, script=script, gpus=gpus, user=user, keras=keras, pip=pip,
        pip_index_url=pip_index_url, pip_find_links=pip_find_links, values_files=values_files, sets=sets, set_strings=set_strings, set_jsons=set_jsons,
        script_args=script_args))
    if values_only:
        from tfhelm.cluster import gitops

        text = gitops.values_yaml(p, one=one_release)
    else:
        from tfhelm.helm import Helm

        text = deploy.manifests_yaml(deploy.render(p, Helm()))
    write(text)
