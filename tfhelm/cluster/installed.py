"""What of a TF cluster is installed (its releases, as Helm lists them) and what an upgrade of
it changes (values, Jobs): what `tfhelm up` shows before it replaces anything, and refuses
without `--replace`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tfhelm import yamlio
from tfhelm.cluster import manifests, spec, training
from tfhelm.errors import SpecError, UsageError

if TYPE_CHECKING:
    from tfhelm.helm import Helm

CHART = "tf-cluster"


@dataclass
class Installed:
    """The releases of one cluster as Helm lists them."""
    name: str
    namespace: str
    workload: bool
    ps: bool
    values: dict | None = None  # the user-supplied values (the workload release's, else the PS')

    @property
    def interrupted(self) -> bool:
        """A PS release without its workload release: an install that did not finish."""
        return self.ps and not self.workload

    def interrupted_line(self) -> str:
        return (f"interrupted install: release {self.namespace}/{spec.ps_release(self.name)} "
                f"(parameter servers) has no workload release {self.name}; `tfhelm up --name "
                f"{self.name}` finishes it, `tfhelm down {self.name}` or `tfhelm reap {self.name}` removes it")


def find(name: str, namespace: str, helm: Helm, field: str = "NAME", values: bool = True) -> Installed:
    """The cluster's releases; a release of that name from another chart is a usage error,
    so `down`, `status`, `reap` and `tfconfig` never act on, say, a user's workspace.
    `values`: also read their stored values (what the releases say; shown, never trusted)."""
    found = helm.releases(namespace, (name, spec.ps_release(name)), values=values)
    for release, stored in found.items():
        if stored.chart != CHART:
            raise SpecError(field, f"release {namespace}/{release} holds chart {stored.chart}, not a TF "
                            f"cluster ({CHART})", "tfhelm acts only on tf-cluster releases")
    first = found.get(name) or found.get(spec.ps_release(name))
    return Installed(name, namespace, name in found, spec.ps_release(name) in found,
                     first.values if first else None)


class ReplaceRefused(UsageError):
    """`tfhelm up` would replace a training that ran or runs, and was not told to."""


@dataclass
class Change:
    """What an upgrade changes: values (dotted keys) and the Jobs it replaces."""
    values: list[str]  # "worker.replicas: 2 -> 5"
    replaced: list[training.JobRow]  # current Jobs the new generation replaces
    new_jobs: dict[str, str]  # role -> new Job name
    current: list[training.JobRow]  # the cluster's Jobs now

    def lines(self) -> list[str]:
        if self.current and not (self.values or self.replaced):
            return [f"no value changed: Jobs {', '.join(j.name for j in self.current)} stay as they are"]
        out = [f"value {v}" for v in self.values]
        for j in self.replaced:
            new = self.new_jobs.get(j.role)
            out.append(f"Job {j.name} ({j.state}, {j.succeeded}/{j.total} succeeded) is replaced"
                       + (f" by {new}" if new else " and not recreated"))
        return out


def _flatten(d, prefix: str = "") -> dict[str, object]:
    if isinstance(d, dict) and d:
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): d}


def _short(flat: dict, key: str) -> str:
    """One value as YAML on one line, cut at 60 characters (an inline script is long)."""
    if key not in flat:
        return "(unset)"
    text = yamlio.dump(flat[key], default_flow_style=True).strip().removesuffix("...").strip()
    return text if len(text) <= 60 else text[:57] + "..."


def value_changes(old: dict, new: dict) -> list[str]:
    """Dotted keys whose value differs, e.g. "worker.replicas: 2 -> 5"."""
    a, b = _flatten(old), _flatten(new)
    return [f"{k}: {_short(a, k)} -> {_short(b, k)}"
            for k in sorted(set(a) | set(b)) if a.get(k, ...) != b.get(k, ...)]


def change_of(values: dict, workload: list[dict], installed: Installed, jobs: list) -> Change:
    """What an upgrade to `values` (rendered as the `workload` release's documents) would change
    (values, Jobs), from the releases and the cluster's Jobs."""
    old = installed.values
    new_jobs = manifests.job_names(workload)
    current = [training.job_row(j) for j in jobs if not j.metadata.deletion_timestamp]
    replaced = [j for j in current if j.name not in new_jobs.values()]
    olds = {k: v for k, v in (old or {}).items() if k != "components"}
    return Change(value_changes(olds, values) if old is not None else [], replaced, new_jobs, current)
