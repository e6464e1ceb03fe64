"""TF clusters from Python: `up`, `get`, `render`, `list_clusters` and the `Cluster` handle,
the one core the CLI's commands call too (they add only the printing). `tf_config`:
tfhelm/api/ingraph.py.

Errors are the CLI's, one class per exit code (tfhelm.errors.EXCEPTIONS) with the same
one-line message; nothing is printed unless asked (`progress=`). Helm, the kubernetes
client, rich and TensorFlow are imported when first used."""

from __future__ import annotations

import importlib
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

from tfhelm.api import display, workspace
from tfhelm.api.edge import raises_api_errors, with_cluster_options
from tfhelm.api.ingraph import tf_config
from tfhelm.api.options import in_workspace, namespace_of, resolve
from tfhelm.cluster.options import ClusterOptions

if TYPE_CHECKING:
    from tfhelm.api.status import Status
    from tfhelm.cluster.report import ClusterRow
    from tfhelm.cluster.values import ClusterValues
    from tfhelm.reaper import Result

Notify = Callable[[str], None]


# ---------------------------------------------------------------- up, render, get, list

@raises_api_errors
@with_cluster_options
def up(name: str | None = None, *, replace: bool = False, progress: bool | None = False,
       **options) -> Cluster:
    """Create (or upgrade) a TF cluster, as `tfhelm up` does, and return its handle.

    `name`: the cluster's name (default: generated, e.g. `tf-k3x9q`). The other keywords
    are `tfhelm up`'s options (`workers=4`, `ps=1`, `script="train.py"`, `in_graph=True`,
    `values=[{"worker": {...}}]` or files, `set=["worker.gpus=1"]`, `script_args=[...]`...).
    Inside a user's workspace (a notebook) the cluster runs in the user's namespace with
    their volumes, and a script in the work directory is served to the tasks as it is
    (`user=None`: not in the workspace). `replace`: let a change replace Jobs that ran or
    run. `progress=True` shows each step.

    Use it as a context manager to remove the cluster when done:
    `with tfhelm.up("nb", in_graph=True, workers=2, ps=1) as cluster: ...`."""
    return prepare(name, **in_workspace(options)).install(replace=replace, notify=display.notes(progress))


@raises_api_errors
@with_cluster_options
def render(name: str, *, values_only: bool = False, one_release: bool = False, shipped: bool = False,
           **options) -> str:
    """The manifests of a TF cluster as YAML (`tfhelm render`), without touching a cluster;
    `values_only`: each release's values for GitOps instead (`one_release`: one release with
    everything); `shipped`: as `tfhelm up` installs them, a local script in a ConfigMap of
    its own (`up --dry-run`)."""
    from tfhelm.errors import SpecError

    if one_release and not values_only:
        raise SpecError("--one-release", "only goes with --values-only")
    prepared = prepare(name, load_kube=False, **options)
    if values_only:
        from tfhelm.cluster import gitops

        return gitops.values_yaml(prepared.plan, one=one_release)
    return prepared.manifests(shipped=shipped)


@raises_api_errors
def get(name: str, namespace: str | None = None) -> Cluster:
    """The TF cluster `name` (installed by tfhelm, Helm or a GitOps tool); a UsageError (exit
    code 2) when there is none. `namespace`: default the kubeconfig's (in a workspace, the
    user's)."""
    from tfhelm.errors import SpecError

    cluster = Cluster(name, namespace)
    installed = cluster._installed()
    if not (installed.ps or installed.workload or any(cluster._workloads())):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {cluster.namespace}",
                        "see `tfhelm list -n NAMESPACE`")
    return cluster


@raises_api_errors
def list_clusters(namespace: str | None = None, all_namespaces: bool = False) -> list[ClusterRow]:
    """The TF clusters of a namespace (or of all), however installed (`tfhelm list`): rows
    of namespace, name, workers (succeeded/total), ps (ready/total), chief, training."""
    from tfhelm.cluster import report
    from tfhelm.kube import Kube

    ns = None if all_namespaces else namespace_of(namespace)
    kube = Kube()
    kube.ping()
    return report.list_clusters(kube, ns)


def prepare(name: str | None = None, *, load_kube: bool = True, **options) -> Prepared:
    """The cluster `up` would install, validated and rendering (Helm) in a thread meanwhile:
    `.manifests()` for a dry run, `.install()` to install it."""
    return Prepared(name, options, load_kube)


class Prepared:
    """A cluster validated and being rendered, not installed yet (see `prepare`)."""

    def __init__(self, name: str | None, options: dict, load_kube: bool = True):
        if load_kube:  # the API client's import (~0.2 s of CPU) goes on while Helm renders
            threading.Thread(target=importlib.import_module, args=("tfhelm.kube",), name="tfhelm-import").start()
        from tfhelm.cluster import deploy
        from tfhelm.cluster.values import generate_name

        self.generated = name is None
        self.user = options.get("user")
        # A workspace's Kueue LocalQueue is its clusters' queue (under -f, --set and --queue);
        # offline (a render), none is looked up.
        user_queue = _workspace_queue(self.user) if self.user and load_kube else None
        self.plan = deploy.plan(resolve(ClusterOptions(name=name or generate_name(), **options), user_queue))
        self._helm = None
        # `up`: Helm renders from now on, while the API client loads.
        self._rendering = deploy.Rendering(self.plan, self.helm) if load_kube else None

    @property
    def helm(self):
        if self._helm is None:  # a values-only render needs no helm binary
            from tfhelm.helm import Helm

            self._helm = Helm()
        return self._helm

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def namespace(self) -> str:
        return self.plan.namespace

    @property
    def rendering(self):
        from tfhelm.cluster import deploy

        if self._rendering is None:
            self._rendering = deploy.Rendering(self.plan, self.helm)
        return self._rendering

    @raises_api_errors
    def manifests(self, shipped: bool = True) -> str:
        from tfhelm.cluster import deploy

        if not shipped:
            return deploy.manifests_yaml(deploy.render(self.plan, self.helm))
        return deploy.manifests_yaml(self.rendering.result(), self.rendering.code)

    @raises_api_errors
    def install(self, replace: bool = False, notify: Notify = lambda _: None, force: bool = False) -> Cluster:
        """Install or upgrade both releases (tfhelm.cluster.deploy.up: nothing half made);
        `force` takes over the install lock another `up` holds (one that died)."""
        from tfhelm.cluster import deploy
        from tfhelm.kube import Kube

        rendering = self.rendering  # begun before the API client loads
        kube = Kube()
        if self.user:
            from tfhelm.workspace.actions import require_workspace

            kube.ping()
            require_workspace(self.user, kube)
        deploy.up(self.plan, self.helm, kube, notify=notify, replace=replace, rendering=rendering, force=force)
        return Cluster(self.name, self.namespace, _values=self.plan.cluster, _helm=self.helm, _kube=kube)


def _workspace_queue(user: str) -> str | None:
    from tfhelm.kube import Kube
    from tfhelm.workspace.actions import workspace_queue
    from tfhelm.workspace.userspec import validate_user

    return workspace_queue(validate_user(user, "--user"), Kube())


# ---------------------------------------------------------------- a cluster

@dataclass(frozen=True)
class Outcome:
    """How a wait ended: `training` is Complete or Failed (Serving: every server of an
    in-graph cluster answers); `simulated`: the pods ran only on simulated (kwok) nodes,
    where no container runs; `errors`: the failed tasks' error lines."""

    training: str
    simulated: bool = False
    errors: tuple[str, ...] = ()


class Cluster:
    """A TF cluster by name: `status()`, `wait()`, `logs()`, `reap()`, `down()`, and for an
    in-graph cluster driven from this process `tf_config(client=True)` and `strategy()`.
    As a context manager, the cluster is removed (`down()`) on exit; its volumes stay."""

    def __init__(self, name: str, namespace: str | None = None, *, _values: ClusterValues | None = None,
                 _helm=None, _kube=None):
        from tfhelm.cluster import spec

        self.name = spec.validate_name(name, field="NAME")
        self.namespace = namespace_of(namespace)  # in a workspace's notebook: its ServiceAccount's
        self._values, self._helm, self._kube = _values, _helm, _kube

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, namespace={self.namespace!r})"

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        from tfhelm.errors import TfhelmError

        try:
            self.down()
        except TfhelmError:
            if error is None:  # else the block's own error is the one to see
                raise

    @property
    def helm(self):
        """The Helm client this handle uses (made on first use)."""
        if self._helm is None:
            from tfhelm.helm import Helm

            self._helm = Helm()
        return self._helm

    @property
    def kube(self):
        """The Kubernetes API client this handle uses (made on first use)."""
        if self._kube is None:
            from tfhelm.kube import Kube

            self._kube = Kube()
        return self._kube

    def _installed(self):
        from tfhelm.cluster import installed

        return installed.find(self.name, self.namespace, self.helm)

    def _workloads(self) -> tuple[list, list]:
        """The cluster's Jobs and Deployments, read like client models."""
        from tfhelm.cluster import objects

        return objects.workloads(self.kube, self.namespace, self.name)

    def values(self) -> ClusterValues:
        """The cluster's chart values (as installed), normalized."""
        if self._values is None:
            from tfhelm.cluster.values import ClusterValues
            from tfhelm.errors import SpecError

            installed = self._installed()
            if installed.values is None:
                raise SpecError("NAME", f"no release of TF cluster '{self.name}' in namespace "
                                f"{self.namespace}", "it was installed without Helm, or removed")
            self._values = ClusterValues.from_release(installed.values)
        return self._values

    @raises_api_errors
    def status(self) -> Status:
        """Tasks, Jobs, parameter servers and the reaper's decisions (`tfhelm status -o json`)."""
        from tfhelm.api.status import Status
        from tfhelm.cluster import report

        installed = self._installed()
        return Status.from_report(report.collect(self.kube, self.namespace, self.name, installed),
                                  installed.interrupted_line() if installed.interrupted else "")

    @raises_api_errors
    def training(self) -> str:
        """The training's state from its Jobs alone: Complete, Failed, Running or Serving."""
        from tfhelm.cluster.training import job_rows, training_state

        return training_state(job_rows(self._workloads()[0]))

    @raises_api_errors
    def wait(self, timeout: float = 3600, progress: bool | None | display.Bars = None,
             check: bool = True) -> Outcome:
        """Wait until the training is done (the reaper's rule), showing progress: a live bar in
        Jupyter or on a terminal (`progress=None`), lines anywhere (`True`), nothing (`False`).
        A failed training raises TrainingFailed with the tasks' error lines, unless `check=False`;
        TimedOut after `timeout` seconds. (The servers of an in-graph cluster without a chief
        never finish: wait for them with `wait_serving()`, or `strategy()`.)"""
        from tfhelm.cluster import objects, report
        from tfhelm.cluster import progress as waits
        from tfhelm.errors import TrainingFailed

        outcome, simulated = waits.wait_for_training(self.kube, self.namespace, self.name, self._shape(),
                                                     display.bars(progress), timeout=timeout,
                                                     queued=bool(self.queue_name()))
        errors = ()
        if outcome != "Complete" and not simulated:  # the tasks' own error lines: one read of the pods
            pods = objects.task_pods(self.kube, self.namespace, self.name)
            errors = tuple(report.error_lines(report.task_rows(pods)))
        if check and outcome != "Complete":
            raise TrainingFailed(f"{self.namespace}/{self.name}: training failed" + (f": {errors[0]}" if errors else ""))
        return Outcome(outcome, simulated, errors)

    @raises_api_errors
    def wait_serving(self, timeout: float = 600, progress: bool | None | display.Bars = None) -> None:
        """Wait until every task's server answers (pods ready): an in-graph cluster before its
        client connects."""
        from tfhelm.cluster import progress as waits

        waits.wait_for_training(self.kube, self.namespace, self.name, self._shape(), display.bars(progress),
                                timeout=timeout, until="serving")

    def _shape(self):
        return self.values().shape

    def queue_name(self) -> str | None:
        """The Kueue LocalQueue the cluster waits in and is admitted from (None: not queued)."""
        return (self.values().effective.get("queue") or {}).get("name") or None

    @raises_api_errors
    def stream_logs(self, write: Notify, note: Notify = lambda _: None, *, task: str | None = None,
                    follow: bool = False, tail: int | None = None) -> None:
        """Every task's log lines (or one task's, e.g. `worker:0`), each prefixed with its task,
        to `write`; `follow`: as they are written, until no task runs. `note`: why a task
        has no log (yet)."""
        from tfhelm.cluster import tasklogs
        from tfhelm.errors import SpecError

        task = task.replace("-", ":") if task else None
        self.kube.ping()
        if not tasklogs.tasks(self.kube, self.namespace, self.name, task):
            raise SpecError("NAME", f"no task pods of TF cluster '{self.name}' in namespace {self.namespace}"
                            + (f" for task {task}" if task else ""), "see `tfhelm list -n NAMESPACE`")
        if follow:
            tasklogs.follow(self.kube, self.namespace, self.name, write, note, tail=tail, task=task)
        else:
            tasklogs.show(self.kube, self.namespace, self.name, write, note, tail=tail, task=task)

    def logs(self, task: str | None = None, follow: bool = False, tail: int | None = None) -> str | Iterator[str]:
        """The tasks' logs (`tfhelm logs`), each line prefixed with its task (`[worker-0] ...`):
        as one text, or with `follow=True` as an iterator of lines as they are written, which
        ends when no task runs any more. `task`: one task, e.g. `worker:0`; `tail`: the last
        lines of each."""
        if not follow:
            lines: list[str] = []
            self.stream_logs(lines.append, task=task, tail=tail)
            return "\n".join(lines)
        return self._followed(task, tail)

    def _followed(self, task: str | None, tail: int | None) -> Iterator[str]:
        lines: queue.Queue = queue.Queue()
        end = object()
        failed: list[Exception] = []

        def stream() -> None:
            try:
                self.stream_logs(lines.put, task=task, follow=True, tail=tail)
            except Exception as e:  # noqa: BLE001 - raised in the caller's thread
                failed.append(e)
            finally:
                lines.put(end)
        threading.Thread(target=stream, daemon=True, name="tfhelm-logs").start()
        while (line := lines.get()) is not end:
            yield line
        if failed:
            raise failed[0]

    @raises_api_errors
    def down(self, purge: bool = False, progress: bool | None = False) -> None:
        """Remove the cluster (both releases). Its data, logs and checkpoints stay unless
        `purge`; a UsageError when there was nothing to remove."""
        from tfhelm.cluster import deploy
        from tfhelm.errors import SpecError
        from tfhelm.workspace.userspec import notebook_path

        if not deploy.down(self.name, self.namespace, self.helm, self.kube, purge=purge,
                           notify=display.notes(progress), mounted=notebook_path):
            raise SpecError("NAME", f"no TF cluster '{self.name}' in namespace {self.namespace}",
                            "see `tfhelm list -n NAMESPACE`")

    @raises_api_errors
    def reap(self, grace: int | None = None, completion: str | None = None, on_failure: str | None = None,
             progress: bool | None = False, check: bool = True, console=None) -> Result:
        """Wait until the training is done, then remove the parameter servers (`tfhelm reap`);
        the Jobs, their logs and the volumes stay. The settings default to the cluster's
        `reaper` values. A failed training raises TrainingFailed (the parameter servers are
        kept for debugging unless `on_failure="reap"`), unless `check=False`. `progress=True`
        prints the reaper's decisions (on `console`, a rich Console, if given)."""
        from dataclasses import replace

        from tfhelm.api.reaping import run_reaper
        from tfhelm.errors import TrainingFailed
        from tfhelm.reaper import ReapConfig

        config = ReapConfig.from_section(self.values().effective["reaper"])
        given = {k: v for k, v in (("grace", grace), ("completion", completion), ("on_failure", on_failure))
                 if v is not None}
        config = replace(config, **given).validate() if given else config
        if console is None and progress:
            from rich.console import Console

            console = Console(stderr=True)
        result = run_reaper(self.namespace, self.name, config, console, helm=self.helm, kube=self.kube)
        if check and result.outcome != "Complete":
            raise TrainingFailed(f"{self.namespace}/{self.name}: training failed; {result.message or 'reaped'}")
        return result

    @raises_api_errors
    def left_behind(self) -> str:
        """What still runs, in a few words (after an interrupted `tfhelm up --wait`)."""
        from tfhelm.cluster import report, training

        jobs, deployments = self._workloads()
        ps, ready = report.ps_counts(deployments)
        return (f"training {training.training_state(training.job_rows(jobs)).lower()}, "
                + (f"{ps} parameter server(s) ({ready} ready), which run until reaped" if ps
                   else "no parameter servers"))

    # ------------------------------------------------------------ in-graph, from this process

    @raises_api_errors
    def tf_config(self, client: bool | str = True, task: str | None = None) -> dict:
        """The TF_CONFIG of a task of the installed cluster (`task="worker:0"`), or with
        `client` that of the chief driving an in-graph cluster of servers: this process,
        at this pod's address and a free port (True), or at `HOST:PORT`."""
        return tf_config(self.name, self.namespace, task=task,
                         client=None if task else (client if isinstance(client, str) else
                                                   f"{workspace.pod_address()}:{workspace.free_port()}"))

    def strategy(self, timeout: float = 600, progress: bool | None | display.Bars = None):
        """A `tf.distribute.ParameterServerStrategy` whose chief is this process, driving this
        in-graph cluster's servers (`tfhelm.up(name, in_graph=True, ...)`), once every server
        answers. Imports TensorFlow."""
        from tfhelm.errors import UsageError

        if self.values().setting("mode", str) != "in-graph":
            raise UsageError(f"{self.namespace}/{self.name} is a between-graph cluster: its workers run "
                             "the script; strategy() drives the servers of one made with in_graph=True")
        config = self.tf_config(client=True)  # refuses a cluster with a chief of its own
        self.wait_serving(timeout, progress)
        import tensorflow as tf

        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(config["cluster"]), task_type="chief", task_id=0, rpc_layer="grpc")
        return tf.distribute.ParameterServerStrategy(resolver)
