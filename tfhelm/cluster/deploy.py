"""Install, upgrade and remove a TF cluster: the side-effect layer under `tfhelm up/down`.

A cluster with parameter servers is two releases of the same chart: `<name>-ps`
(components=ps) and `<name>` (components=workload), so the PS can be uninstalled alone
once training is done. Both get the same values, hence the same TF_CONFIG and the same
generation (the hash in the Job names: a changed cluster gets new Jobs).

Both releases install at once (one Helm process each). A `tfhelm up` killed meanwhile can
leave one without the other: `up` again finishes either; a PS release without its workload
is what `installed.find()` reports as interrupted, and `down` and `reap` remove it. (A workload
release without its PS release is also what the reaper leaves once training is done.)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from tfhelm import releases, yamlio
from tfhelm.cluster import code_configmap, manifests, objects, spec
from tfhelm.cluster.installed import Change, Installed, ReplaceRefused, change_of, find
from tfhelm.cluster.values import ClusterOptions, ClusterValues, cluster_values
from tfhelm.errors import SpecError, TfhelmError

if TYPE_CHECKING:  # the clients are passed in; importing them costs the kubernetes client
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube


@dataclass
class Release:
    name: str
    values: dict


@dataclass
class Plan:
    """A cluster to install: its values held once (`cluster`), the releases made from them."""
    name: str
    namespace: str
    cluster: ClusterValues  # the user's values (what Helm gets), normalized once

    @property
    def values(self) -> dict:
        return self.cluster.user

    @property
    def shape(self) -> spec.Shape:
        return self.cluster.shape

    @property
    def releases(self) -> list[Release]:
        """The workload release, after the PS release when there are PS (it is installed first)."""
        workload = Release(self.name, {**self.values, "components": "workload"})
        if not self.shape.ps:
            return [workload]
        return [Release(spec.ps_release(self.name), {**self.values, "components": "ps"}), workload]


def plan(opts: ClusterOptions) -> Plan:
    """Pure: validated values and the releases that carry them."""
    return Plan(opts.name, opts.namespace, cluster_values(opts))


def check_queue(p: Plan, kube: Kube) -> None:
    """A queued cluster (`queue.name`) needs Kueue, its LocalQueue in the namespace and its
    WorkloadPriorityClass: else a usage error, before anything is made (Kueue itself would
    keep the cluster waiting for ever, saying why only in its Workload)."""
    q = p.cluster.effective.get("queue") or {}
    if not q.get("name"):
        return
    from tfhelm.errors import Forbidden

    if not kube.serves_kueue():
        raise SpecError("queue.name", f"'{q['name']}' is set, but this cluster has no Kueue "
                        "(kueue.x-k8s.io is not served)", "install Kueue, or leave --queue out")
    if kube.read_local_queue(p.namespace, q["name"]) is None:
        raise SpecError("queue.name", f"no Kueue LocalQueue '{q['name']}' in namespace {p.namespace}",
                        f"see `kubectl get localqueues -n {p.namespace}`")
    if q.get("priorityClass"):
        try:
            found = kube.read_workload_priority_class(q["priorityClass"])
        except Forbidden:
            return  # a tenant may not read them; Kueue says it in the Workload if it is wrong
        if found is None:
            raise SpecError("queue.priorityClass", f"no Kueue WorkloadPriorityClass '{q['priorityClass']}'",
                            "see `kubectl get workloadpriorityclasses`")


def render(p: Plan, helm: Helm) -> dict[str, list[dict]]:
    """Every release's manifests, rendered by the real chart: schema and template
    checks run here, before anything touches the cluster."""
    return helm.templates({r.name: r.values for r in p.releases}, p.namespace)


def manifests_yaml(rendered: dict[str, list[dict]], code: dict | None = None) -> str:
    shipped = f"---\n# shipped beside the releases\n{yamlio.dump(code, sort_keys=False)}" if code else ""
    return shipped + "".join(f"---\n# release: {release}\n" + yamlio.dump(doc, sort_keys=False)
                             for release, docs in rendered.items() for doc in docs)


def ship_code(p: Plan) -> tuple[Plan, dict | None]:
    """The plan `up` installs: inline code moved out of the releases into its own ConfigMap
    (tfhelm/cluster/code_configmap.py), which `up` creates and the workload release owns."""
    values, code = code_configmap.split(p.name, p.values)
    if code is None:
        return p, None
    return Plan(p.name, p.namespace, ClusterValues.from_release(values)), code


Notify = Callable[[str], None]
Mounted = Callable[[str, str], str | None]  # (namespace, claim) -> where the user sees it


class Rendering:
    """The plan `up` installs (`ship_code`) and its render, begun at once in a thread of its
    own: Helm renders while the caller loads the API client and `up` reads the cluster."""

    def __init__(self, p: Plan, helm: Helm):
        self.plan, self.code = ship_code(p)
        pool = ThreadPoolExecutor(1, thread_name_prefix="tfhelm-render")
        self._rendered = pool.submit(render, self.plan, helm)
        pool.shutdown(wait=False)  # the thread ends with the render

    def result(self) -> dict[str, list[dict]]:
        return self._rendered.result()


def up(p: Plan, helm: Helm, kube: Kube, notify: Notify = lambda _: None,
       replace: bool = False, rendering: Rendering | None = None, force: bool = False) -> Change:
    """Install or upgrade both releases, without ever leaving a half-made cluster:

    1. render (schema, templates) and meanwhile read what exists (the releases, the Jobs,
       the PVCs): a bad value is refused before anything touches the cluster; then take the
       cluster's install lock (one `up` of a name at a time, tfhelm/cluster/lock.py; `force`
       takes it over) as it was before those reads, or take it and read again; a change that
       replaces Jobs that ran or run is refused unless `replace` (their pods and status
       would go), and so is an existing release whose stored record names objects its chart
       never makes there (Helm's upgrade would delete them: tfhelm/releases.py);
    2. a server-side dry run of every object, and of one pod of each workload: nothing
       changes before the API server admitted the whole cluster (quota, GPUs, limits, Pod
       Security, policies). It also names what was edited by hand since (drift), which the
       install sets back to the chart's values;
    3. with `replace`, delete the Jobs the change replaces and wait until their pods are gone
       (old and new tasks side by side would register twice in the TF cluster);
    4. create the shipped code's ConfigMap (inline code, `ship_code`), then install/upgrade
       both releases at once. A failure undoes what this call made: Helm rolls back a
       failed release; releases, the code ConfigMap, PVCs and the namespace this call
       created are removed. PVCs that existed before (data) are never touched;
    5. the workload release's config ConfigMap becomes the code ConfigMap's owner (any
       uninstall, `helm uninstall` too, deletes it), and earlier code ConfigMaps go.
    """
    from tfhelm.cluster import lock

    rendering = rendering or Rendering(p, helm)
    p, code = rendering.plan, rendering.code
    try:  # meanwhile, reads only: the Lease as it is, then what the cluster has
        kube.ping()
        check_queue(p, kube)
        seen = lock.peek(kube, p.namespace, p.name)
        found = _look(p, helm, kube)
    except Exception:
        rendering.result()  # bad input is said first
        raise
    rendered = rendering.result()
    made_namespace = kube.ensure_namespace(p.namespace)  # the lock lives in it
    try:
        with lock.InstallLock(kube, p.namespace, p.name, seen, force=force) as held:
            if held.taken_from:
                notify(f"took the install lock (Lease {p.namespace}/{held.name}) over from "
                       f"{held.taken_from} (--force)")
            if not held.fenced:  # another `up` took the Lease since: look again
                found = _look(p, helm, kube)
            return _install(p, code, rendered, found, helm, kube, notify, replace, made_namespace)
    except Exception:
        if made_namespace:
            notify(f"removing namespace {p.namespace} again")
            kube.delete_namespace(p.namespace)
        raise


@dataclass
class _Found:
    """What `up` reads of a cluster before changing it."""
    installed: Installed
    jobs: list  # the cluster's Jobs (JsonObjects)
    pvcs: set[str]


def _look(p: Plan, helm: Helm, kube: Kube) -> _Found:
    """The cluster's releases (Helm), Jobs and PVCs, read at once."""
    with ThreadPoolExecutor(2, thread_name_prefix="tfhelm-read") as pool:
        jobs = pool.submit(lambda: objects.of(kube, p.namespace, p.name).jobs)
        pvcs = pool.submit(objects.pvc_names, kube, p.namespace, p.name)
        installed = find(p.name, p.namespace, helm, field="--name")  # refuses other charts' releases
        return _Found(installed, jobs.result(), pvcs.result())


def _install(p: Plan, code: dict | None, rendered: dict[str, list[dict]], found: _Found, helm: Helm, kube: Kube,
             notify: Notify, replace: bool, made_namespace: bool) -> Change:
    installed, pvcs_before = found.installed, found.pvcs
    existing = {p.name} if installed.workload else set()
    existing |= {spec.ps_release(p.name)} if installed.ps else set()
    kinds = frozenset(RELEASE_KINDS) - releases.CLUSTER_SCOPED
    for r in p.releases:  # Helm's upgrade deletes what the stored record names: check it first
        if r.name in existing:
            releases.check_records(kube, p.namespace, r.name, kinds,
                                   frozenset((o["kind"], o["metadata"]["name"]) for o in rendered[r.name]))
    change = change_of(p.values, rendered[p.name], installed, found.jobs)
    rerun = replace and change.current and not (change.values or change.replaced)
    for line in [] if rerun else change.lines():
        notify(line)
    if change.replaced and not replace:
        running = [j.name for j in change.replaced]
        raise ReplaceRefused(f"--replace: this change replaces Job(s) {', '.join(running)} of "
                             f"{p.namespace}/{p.name} (their pods and status go; the training "
                             "restarts from its last checkpoint); nothing was changed. Rerun with "
                             "--replace to do it, or `tfhelm down` first")
    created: list[str] = []
    made_code = False
    # A ConfigMap under the shipped code's name is trusted by its content, not its name.
    found_code = kube.read("ConfigMap", p.namespace, code["metadata"]["name"]) if code else None
    try:
        shipped = [code] if code and found_code is None else []
        in_releases = [o for r in p.releases for o in rendered[r.name]]
        drift = kube.dry_run_apply(p.namespace, shipped + in_releases + _probes(kube, p.namespace, in_releases))
        notify(f"the API server admits every object of {p.namespace}/{p.name} (server-side dry run)")
        for d in drift:
            notify(f"drift: {d}; set back to the chart's value")
        if rerun or change.replaced:  # asked to replace: stop the old tasks before new ones start
            notify("stopping the replaced Jobs' tasks (their pods stop on SIGTERM) before the new ones start")
            for name in objects.delete_jobs(kube, p.namespace, p.name,
                                            None if rerun else [j.name for j in change.replaced]):
                notify(f"deleted Job {p.namespace}/{name}{' for a new run' if rerun else ''}; its pods are gone")
        if code:
            made_code = _ship(kube, p.namespace, code, found_code, notify)
        for r in p.releases:
            notify(f"{'upgrading' if r.name in existing else 'installing'} release {p.namespace}/{r.name}")
        # Both at once, neither waits: the PS mount the volumes the workload release makes,
        # and workers retry until the PS answer. `--wait` watches training.
        results = helm.install_all({r.name: (r.values, r.name in existing) for r in p.releases}, p.namespace)
        created += [r for r, rev in results.items() if r not in existing and not isinstance(rev, Exception)]
        for rev in results.values():
            if isinstance(rev, Exception):
                raise rev
    except Exception:
        if made_code:
            kube.delete_configmap(p.namespace, code["metadata"]["name"])
        _undo(p, helm, kube, created, pvcs_before, made_namespace, notify)
        raise
    _tidy(p, code, rendered, installed, helm, kube, notify)
    return change


def _probes(kube: Kube, namespace: str, objects: list[dict]) -> list[dict]:
    """One trial pod per workload (manifests.pod_probes) whose ServiceAccount exists already:
    the API server admits no pod of an account that does not (a new namespace's `default`, an
    account this install makes), and a new namespace has no quota or limits to try anyway."""
    probes = manifests.pod_probes(objects)
    accounts = {p["spec"].get("serviceAccountName") or "default" for p in probes}
    present = {a for a in accounts if kube.read("ServiceAccount", namespace, a) is not None}
    return [p for p in probes if (p["spec"].get("serviceAccountName") or "default") in present]


def _ship(kube: Kube, namespace: str, code: dict, found: dict | None, notify: Notify) -> bool:
    """Create the shipped code's ConfigMap, named by its content. One of that name that holds
    other content, or could be changed (not immutable), is someone else's: replaced, not run.
    True when this call made it."""
    name = code["metadata"]["name"]
    for _ in range(3):
        if found is not None and code_configmap.holds(found, code):
            return False
        if found is not None:
            notify(f"ConfigMap {namespace}/{name} did not hold the code its name says "
                   f"({code_configmap.mismatch(found, code)}); replaced with yours")
            kube.delete_configmap(namespace, name)
        if kube.create_configmap(namespace, code):
            notify(f"shipped the code in ConfigMap {namespace}/{name}")
            return True
        found = kube.read("ConfigMap", namespace, name)
    raise TfhelmError(f"ConfigMap {namespace}/{name} is made again with other content as soon as it "
                      "is replaced: someone writes it in the namespace; nothing was installed")


def _tidy(p: Plan, code: dict | None, rendered: dict[str, list[dict]], installed: Installed,
          helm: Helm, kube: Kube, notify: Notify) -> None:
    """After the install, at once: the code ConfigMap gets its owner, an earlier run's code
    ConfigMaps go (their Jobs are gone), and so does a PS release the cluster no longer has."""
    keep = code["metadata"]["name"] if code else None

    def own() -> None:
        if code:
            kube.set_configmap_owner(p.namespace, keep, manifests.config_map(rendered[p.name])["metadata"]["name"])

    def sweep() -> None:
        for name in kube.configmap_names(p.namespace, code_configmap.selector(p.name)) - {keep}:
            kube.delete_configmap(p.namespace, name)

    stale_ps = spec.ps_release(p.name)
    with ThreadPoolExecutor(2, thread_name_prefix="tfhelm-tidy") as pool:
        done = [pool.submit(own), pool.submit(sweep)]
        if not p.shape.ps and installed.ps and remove_release(kube, p.namespace, p.name, stale_ps).found:
            notify(f"removed release {p.namespace}/{stale_ps} (no parameter servers any more)")
        for f in done:
            f.result()


def _undo(p: Plan, helm: Helm, kube: Kube, created: list[str], pvcs_before: set[str],
                made_namespace: bool, notify: Notify) -> None:
    """Remove what a failed `up` made: its new releases, the PVCs they left (Helm keeps
    PVCs on uninstall) and the namespace, if this call created it."""
    for name in reversed(created):
        notify(f"removing release {p.namespace}/{name} again")
        remove_release(kube, p.namespace, p.name, name)
    if made_namespace:
        return  # up() deletes it, with everything in it, once the lock is released
    for pvc in sorted(objects.pvc_names(kube, p.namespace, p.name) - pvcs_before):
        notify(f"removing PersistentVolumeClaim {p.namespace}/{pvc} again (made by this attempt)")
        kube.delete_pvc(p.namespace, pvc)


# A tf-cluster release's kinds, in the order they go: the tasks first, RBAC last.
RELEASE_KINDS = ("Job", "Deployment", "Pod", "PodGroup", "Service", "ConfigMap", "NetworkPolicy",
                 "PodMonitor", "PrometheusRule", "PersistentVolumeClaim", "StorageClass", "RoleBinding", "Role",
                 "ServiceAccount")


def remove_release(kube: Kube, namespace: str, name: str, release: str) -> releases.Removed:
    """One release of cluster `name` removed by its labels, never by its record (whoever may
    write Secrets in the namespace may rewrite that: tfhelm/releases.py). PVCs stay (Helm's
    keep), unless `storage.keepOnUninstall` was false."""
    return releases.remove(kube, namespace, release, RELEASE_KINDS, selector=objects.selector(name))


def down(name: str, namespace: str, helm: Helm, kube: Kube, purge: bool = False,
               notify: Notify = lambda _: None, mounted: Mounted = lambda namespace, claim: None) -> bool:
    """Remove both releases (an interrupted install's PS release too) by their labels,
    without running any hook; PVCs (data, logs, checkpoints) stay unless `purge`. Returns
    False when there was nothing to remove. `mounted`: see kept_volumes."""
    find(name, namespace, helm, values=False)  # refuses another chart's release of that name
    volumes = claims_of(kube, namespace, name)  # what the tasks mount, as they run now
    found = False
    for release in (spec.ps_release(name), name):
        if remove_release(kube, namespace, name, release).found:
            found = True
            notify(f"uninstalled release {namespace}/{release} (its objects, by their labels; no hooks run)")
    released = kube.release_tracking_finalizers(namespace, objects.selector(name))
    if released:  # its Jobs are gone: nothing to count, and nothing must keep the pods
        notify(f"released {len(released)} pod(s) of its deleted Jobs from the Job controller's finalizer")
    # Its owner's deletion removes it too, but in the background (and an `up` killed before
    # setting the owner left it ownerless).
    for configmap in kube.configmap_names(namespace, code_configmap.selector(name)):
        kube.delete_configmap(namespace, configmap)
    from tfhelm.cluster import lock

    lock.remove(kube, namespace, name)  # the install lock's Lease, released by the last `up`
    if purge:
        for pvc in objects.delete_pvcs(kube, namespace, name):
            found = True
            notify(f"deleted PersistentVolumeClaim {namespace}/{pvc}")
        for line in kept_volumes(name, namespace, volumes, mounted):
            notify(line)
    return found


def claims_of(kube: Kube, namespace: str, name: str) -> dict:
    """The volumes a cluster mounts but did not make (a user's logs and data volumes), as
    the `storage.*.existingClaim` values they came from, read from its running objects (not
    from its release's stored values, which whoever writes Secrets there may rewrite)."""
    found = objects.of(kube, namespace, name)
    own = {p.metadata.name for p in found.pvcs}
    storage: dict = {}
    for workload in [*found.jobs, *found.deployments]:
        for volume in workload.spec.template.spec.volumes or []:
            claim = volume.persistent_volume_claim
            if volume.name in ("logs", "data") and claim and claim.claim_name not in own:
                storage[volume.name] = {"existingClaim": claim.claim_name}
    return {"storage": storage}


def kept_volumes(name: str, namespace: str, values: dict,
                 mounted: Mounted = lambda namespace, claim: None) -> list[str]:
    """What `down --purge` does not delete, and why: volumes the cluster mounts but did not
    make (`existingClaim`, e.g. a user's logs and data volumes, shared by all their runs).
    `mounted(namespace, claim)`: where the user sees a logs volume (a workspace's notebook:
    workspace.userspec.notebook_path), to say how to start over there."""
    storage = values.get("storage") or {}
    lines = []
    for volume in ("logs", "data"):
        claim = (storage.get(volume) or {}).get("existingClaim")
        if not claim:
            continue
        line = (f"kept PersistentVolumeClaim {namespace}/{claim}: not this cluster's "
                f"(storage.{volume}.existingClaim)")
        if volume == "logs":
            line += (f"; the run's logs and checkpoints stay in its directory {name}/ there, and a "
                     f"new `tfhelm up --name {name}` resumes from them: delete the directory to start over")
            path = mounted(namespace, claim)
            if path:
                line += f" (in the notebook: rm -r {path}/{name})"
        lines.append(line)
    return lines


def remove_interrupted(name: str, namespace: str, helm: Helm, kube: Kube) -> bool:
    """Remove the PS release of an interrupted install (no workload release, no Jobs):
    nothing trains, so nothing is lost. False when the cluster is not in that state."""
    found = find(name, namespace, helm, values=False)
    if not found.interrupted or objects.of(kube, namespace, name).jobs:
        return False
    return remove_release(kube, namespace, name, spec.ps_release(name)).found


def cluster_config(name: str, namespace: str, helm: Helm) -> tuple[dict, dict]:
    """TF_CONFIG `cluster` and values of an installed cluster, read from its release (the
    chart computed the hosts and their generation; nothing is recomputed here)."""
    found = find(name, namespace, helm)
    for release in (name, spec.ps_release(name)) if found.workload else (spec.ps_release(name),):
        docs = helm.manifest(release, namespace)
        if docs:
            return manifests.cluster_config(docs)[0], helm.get_values(release, namespace) or {}
    raise SpecError("NAME", f"no TF cluster '{name}' in namespace {namespace}",
                    "pass the shape (--workers, --ps, -f ...) to compute it offline")
