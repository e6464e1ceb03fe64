"""What the pods of a rendered release see, computed the way Kubernetes and the launcher do.

Test-only: the package reads rendered releases through tfhelm.cluster.manifests (the cluster spec,
Job names); these follow every pod's environment and TF_CONFIG task by task.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tfhelm.pod import tfconfig
from tfhelm.cluster import localrun, spec
from tfhelm.cluster.manifests import by_kind
from tfhelm.contract import ROLE_LABEL

COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
CONFIG_MOUNT = "/etc/tfhelm"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand_env(env: list[dict], field_values: dict[str, str]) -> dict[str, str]:
    """A container's environment as Kubernetes builds it: `$(VAR)` expands only to
    variables defined earlier in the list, `$$` escapes, unknown references stay."""
    out: dict[str, str] = {}
    for item in env:
        if "value" in item:
            raw = str(item["value"])
            out[item["name"]] = _VAR_REF.sub(
                lambda m: "$" if m.group(0) == "$$" else out.get(m.group(1), m.group(0)), raw)
        elif "fieldRef" in item.get("valueFrom", {}):
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            if path in field_values:
                out[item["name"]] = field_values[path]
    return out


def pod_envs(obj: dict) -> Iterable[dict[str, str]]:
    """The main container's environment in each pod of a Job or Deployment."""
    container = obj["spec"]["template"]["spec"]["containers"][0]
    if obj["kind"] == "Deployment":
        yield expand_env(container.get("env", []), {})
        return
    for i in range(int(obj["spec"]["completions"])):
        yield expand_env(container.get("env", []), {COMPLETION_INDEX_FIELD: str(i)})


def compose_tf_config(env: dict[str, str], mount: Path) -> dict:
    """TF_CONFIG as the real launcher composes it in a pod with this environment and its
    config ConfigMap at `mount` (instead of /etc/tfhelm)."""
    spec_file = env.get("TFHELM_CLUSTER_SPEC_FILE", "")
    if spec_file.startswith(CONFIG_MOUNT + "/"):
        env = {**env, "TFHELM_CLUSTER_SPEC_FILE": str(mount / spec_file[len(CONFIG_MOUNT) + 1:])}
    return tfconfig.resolve_tf_config(dict(env))


def mount_config(data: dict[str, str], directory: Path) -> Path:
    """Write a ConfigMap's keys as files, as its volume would hold them."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, text in data.items():
        (directory / key).write_text(text)
    return directory


def task_workloads(manifests: list[dict]) -> list[dict]:
    """The Jobs and Deployments whose pods are TF tasks (not the reaper)."""
    return [m for m in manifests if m.get("kind") in ("Job", "Deployment")
            and m["metadata"]["labels"].get(ROLE_LABEL) in spec.ROLES]


def task_tf_configs(manifests: list[dict]) -> dict[tuple[str, int], dict]:
    """Every task's TF_CONFIG, as its pod gets it: the real launcher composes it from the
    pod's environment and its mounted config ConfigMap (written to a directory here)."""
    configmaps = {m["metadata"]["name"]: m["data"] for m in by_kind(manifests, "ConfigMap")}
    result: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for obj in task_workloads(manifests):
            name = config_volume(obj["spec"]["template"]["spec"])
            mount = Path(tmp, name)
            if not mount.exists():
                mount_config(configmaps[name], mount)
            for env in pod_envs(obj):
                config = compose_tf_config(env, mount)
                result[(config["task"]["type"], config["task"]["index"])] = config
    return result


def config_volume(pod: dict) -> str:
    """The config ConfigMap a pod spec mounts at /etc/tfhelm."""
    return next(v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "tfhelm-config")


def plan_from_manifests(manifests: list[dict], ports: Iterable[int] | None = None
                        ) -> tuple[list[localrun.LocalTask], list[str]]:
    """The tasks exactly as a rendered chart defines them: each pod's TF_CONFIG (hosts
    mapped to loopback) and the launcher mode of its container. Also returns the script
    arguments the chart passes (the script path itself is the pod's, not ours)."""
    configs = task_tf_configs(manifests)
    modes: dict[str, str] = {}
    script_args: list[str] = []
    for obj in task_workloads(manifests):
        container = obj["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        args = list(container.get("args") or [])
        if not args or args[0] not in (localrun.SERVER, localrun.SCRIPT):
            raise localrun.LocalRunError(f"{obj['metadata']['name']} does not run the tfhelm launcher")
        modes[env["TFHELM_TASK_TYPE"]] = args[0]
        if args[0] == localrun.SCRIPT:
            script_args = args[2:]
    local = localrun.localize_tf_configs(configs, ports)
    order = {role: i for i, role in enumerate(spec.ROLES)}
    keys = sorted(configs, key=lambda k: (order[k[0]], k[1]))
    return [localrun.LocalTask(t, i, modes[t], local[(t, i)]) for t, i in keys], script_args
