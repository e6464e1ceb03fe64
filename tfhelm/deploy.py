"""Install, upgrade and remove a TF cluster: the side-effect layer under `tfhelm up/down`.

A cluster with parameter servers is two releases of the same chart: `<name>-ps`
(components=ps) and `<name>` (components=workload), so the PS can be uninstalled alone
once training is done. Both get the same values, hence the same TF_CONFIG.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import yaml

from tfhelm import spec
from tfhelm.errors import SpecError
from tfhelm.helm import Helm
from tfhelm.kube import Kube
from tfhelm.values import ClusterOptions, compute_values, shape_of


@dataclass
class Release:
    name: str
    values: dict


@dataclass
class Plan:
    name: str
    namespace: str
    values: dict
    releases: list[Release]  # install order: PS first, so workers find them sooner

    @property
    def shape(self) -> spec.Shape:
        return shape_of(self.values)


def plan(opts: ClusterOptions) -> Plan:
    """Pure: validated values and the releases that carry them."""
    values = compute_values(opts)
    releases = [Release(opts.name, {**values, "components": "workload"})]
    if shape_of(values).ps:
        releases.insert(0, Release(spec.ps_release(opts.name), {**values, "components": "ps"}))
    return Plan(opts.name, opts.namespace, values, releases)


async def render(p: Plan, helm: Helm) -> dict[str, list[dict]]:
    """Every release's manifests, rendered by the real chart: schema and template
    checks run here, before anything touches the cluster."""
    return {r.name: await helm.template(r.name, r.values, p.namespace) for r in p.releases}


def manifests_yaml(rendered: dict[str, list[dict]]) -> str:
    return "".join(f"---\n# release: {release}\n" + yaml.safe_dump(doc, sort_keys=False)
                   for release, docs in rendered.items() for doc in docs)


Notify = Callable[[str], None]


async def up(p: Plan, helm: Helm, kube: Kube, notify: Notify = lambda _: None) -> None:
    """Install or upgrade both releases. A failure leaves nothing half-made: Helm rolls
    back a failed release, and a PS release this call created is removed again."""
    await render(p, helm)
    kube.ping()
    kube.ensure_namespace(p.namespace)
    installed = await helm.charts(p.namespace)
    for r in p.releases:
        if installed.get(r.name, "tf-cluster") != "tf-cluster":
            raise SpecError("--name", f"release {p.namespace}/{r.name} exists and holds chart "
                            f"{installed[r.name]}", "choose another name")
    if p.name in installed:
        replaced = kube.delete_jobs(p.namespace, p.name)
        if replaced:
            notify(f"replacing Jobs {', '.join(replaced)} (a Job's pod template cannot change in place)")
    created: list[str] = []
    try:
        for r in p.releases:
            existed = r.name in installed
            notify(f"{'upgrading' if existed else 'installing'} release {p.namespace}/{r.name}")
            # No wait between the releases: the PS mount the volumes the workload release
            # makes, and workers retry until the PS answer. `--wait` watches training.
            await helm.install_or_upgrade(r.name, r.values, p.namespace, wait=False)
            if not existed:
                created.append(r.name)
    except Exception:
        for name in created:
            notify(f"removing release {p.namespace}/{name} again")
            await helm.uninstall(name, p.namespace)
        raise
    stale_ps = spec.ps_release(p.name)
    if not p.shape.ps and await helm.uninstall(stale_ps, p.namespace):
        notify(f"removed release {p.namespace}/{stale_ps} (no parameter servers any more)")


async def down(name: str, namespace: str, helm: Helm, kube: Kube, purge: bool = False,
               notify: Notify = lambda _: None) -> bool:
    """Uninstall both releases; PVCs (data, logs, checkpoints) stay unless `purge`.
    Returns False when there was nothing to remove."""
    found = False
    for release in (spec.ps_release(name), name):
        if await helm.uninstall(release, namespace):
            found = True
            notify(f"uninstalled release {namespace}/{release}")
    if purge:
        for pvc in kube.delete_pvcs(namespace, name):
            found = True
            notify(f"deleted PersistentVolumeClaim {namespace}/{pvc}")
    return found
