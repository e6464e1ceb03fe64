"""The reaper run from here (`tfhelm reap`, `tfhelm up --reap`, `Cluster.reap()`): the
clients made once, the decisions and the console are tfhelm.reaper's."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from tfhelm.reaper import ReapConfig, Result


def run_reaper(namespace: str, name: str | None, config: ReapConfig, console: Console | None, *,
               forever: bool = False, log_format: str = "plain", metrics=None, helm=None,
               kube=None, gates: bool = False, reap: bool = True) -> Result | None:
    """Reap one cluster (or, with name None, every cluster of the namespace, forever); see
    tfhelm.reaper.console.run_reaper. No console: nothing is printed."""
    from tfhelm.kube import Kube
    from tfhelm.reaper.console import run_reaper as run

    return run(kube or Kube(), namespace, name, config, console, forever=forever, helm=helm,
               log_format=log_format, metrics=metrics, gates=gates, reap=reap)


def remove_interrupted(name: str, namespace: str) -> bool:
    """A release NAME-ps from another chart is refused (exit 2); an interrupted install (a PS
    release without workload release or Jobs: nothing trains) is removed at once. True when
    it was."""
    from tfhelm.cluster import deploy, installed
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube

    helm = Helm()
    found = installed.find(name, namespace, helm)
    return found.interrupted and deploy.remove_interrupted(name, namespace, helm, Kube())
