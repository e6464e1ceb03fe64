"""In-graph training driven from outside the cluster (a notebook): the TF_CONFIG of a task or
of the client that acts as the chief. `Cluster.tf_config()` and `Cluster.strategy()` build on it."""

from __future__ import annotations

from tfhelm.api.edge import raises_api_errors
from tfhelm.api.options import namespace_of, resolve
from tfhelm.cluster.options import ClusterOptions


@raises_api_errors
def tf_config(name: str, namespace: str | None = None, *, task: str | None = None, client: str | None = None,
              **options) -> dict:
    """The exact TF_CONFIG a task gets (`task="worker:3"`), or the chief's at `client`
    (HOST:PORT) driving an in-graph cluster; from the installed release, or offline when
    shape options are given (`workers=`, `ps=`, `values=`, `set=`...)."""
    from tfhelm.cluster import deploy, manifests, spec
    from tfhelm.cluster.values import shape_of
    from tfhelm.errors import SpecError

    if (task is None) == (client is None):
        raise SpecError("--task", "give either --task TYPE:INDEX or --client HOST:PORT")
    role, index = spec.parse_task(task) if task else ("chief", 0)
    ns = namespace_of(namespace)
    # The hosts come from the chart itself (rendered, or the installed release's manifest).
    if any(v is not None and v != [] for v in options.values()):
        p = deploy.plan(resolve(ClusterOptions(name=name, namespace=ns, **options)))
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
    return spec.tf_config(cluster, role, index)
