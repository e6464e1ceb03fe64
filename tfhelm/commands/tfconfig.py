"""`tfhelm tfconfig NAME`: the exact TF_CONFIG one task gets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, out


@cli_errors
def tfconfig(name: o.ClusterName,
             task: Annotated[Optional[str], typer.Option(
                 "--task", "-t", help="TYPE:INDEX, e.g. worker:3.")] = None,
             client: Annotated[Optional[str], typer.Option(
                 "--client", help="HOST:PORT of an outside chief (e.g. a notebook) that drives an "
                 "in-graph cluster: prints the chief's TF_CONFIG with that address.")] = None,
             namespace: o.Namespace = None, workers: o.Workers = None, ps: o.Ps = None,
             chief: o.Chief = None, evaluator: o.Evaluator = None,
             values_files: o.ValuesFiles = None, sets: o.Sets = None,
             set_strings: o.SetStrings = None, set_jsons: o.SetJsons = None):
    """The exact TF_CONFIG a task gets (offline with shape options, else from the release)."""
    from tfhelm.cluster import deploy, manifests, spec
    from tfhelm.cluster.values import shape_of
    from tfhelm.errors import SpecError

    if (task is None) == (client is None):
        raise SpecError("--task", "give either --task TYPE:INDEX or --client HOST:PORT")
    role, index = spec.parse_task(task) if task else ("chief", 0)
    ns = o.namespace_of(namespace)
    # The hosts come from the chart itself (rendered, or the installed release's manifest).
    if any(x is not None for x in (workers, ps, chief, evaluator)) or values_files or sets \
            or set_strings or set_jsons:
        p = deploy.plan(o.cluster_options(
            name=name, namespace=ns, workers=workers, ps=ps, chief=chief, evaluator=evaluator,
            values_files=values_files, sets=sets, set_strings=set_strings, set_jsons=set_jsons))
        cluster, _ = manifests.cluster_config(manifests.render(p.values, name, ns))
        shape = p.shape  # the values normalized once, by the plan
    else:
        from tfhelm.helm import Helm

        cluster, values = deploy.cluster_config(name, ns, Helm())
        shape = shape_of(values)
    if client:
        cluster = spec.with_client(cluster, client)
    else:
        spec.check_task(shape, role, index)
    out.print(spec.dumps(spec.tf_config(cluster, role, index)), markup=False, highlight=False,
              soft_wrap=True)
