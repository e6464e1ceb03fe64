"""What `tfhelm render --values-only` prints for a GitOps repo: each release's values,
complete for a controller that only runs Helm (Argo CD, Flux). Pure."""

from __future__ import annotations

from tfhelm import yamlio
from tfhelm.chart import deep_merge
from tfhelm.cluster.deploy import Plan, Release


def releases(p: Plan, one: bool = False) -> list[Release]:
    """The plan's releases, with the in-cluster reaper on in the workload release when there
    are parameter servers (the chart's default, written out so the repository says it: no
    `tfhelm up --reap` runs beside a GitOps controller, and PS never exit by themselves). An
    explicit `reaper.enabled` in the values wins.

    `one`: a single release holding everything (`components: all`), for controllers that
    would reinstall a separately uninstalled PS release (Flux); the reaper then deletes the
    PS objects itself."""
    wants_reaper = p.shape.ps > 0 and "enabled" not in (p.values.get("reaper") or {})
    out = []
    for r in [Release(p.name, {**p.values, "components": "all"})] if one else p.releases:
        values = r.values
        if wants_reaper and values.get("components") != "ps":
            values = deep_merge(values, {"reaper": {"enabled": True}})
        out.append(Release(r.name, values))
    return out


def values_yaml(p: Plan, one: bool = False) -> str:
    return "".join(f"---\n# release: {r.name} (namespace {p.namespace})\n"
                   + yamlio.dump(r.values, sort_keys=False) for r in releases(p, one))
