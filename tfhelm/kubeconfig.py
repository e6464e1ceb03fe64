"""Which cluster and namespace the API client talks to: the kubeconfig (KUBECONFIG or
~/.kube/config, its context or `--kube-context`'s), else the in-cluster ServiceAccount."""

from __future__ import annotations

import os

from kubernetes import client, config

from tfhelm.errors import ClusterUnreachable, SpecError

# The kubeconfig context, shared with Helm: `tfhelm --kube-context` sets it, and Helm itself
# reads it, so the API client and every helm call talk to the same cluster.
CONTEXT_ENV = "HELM_KUBECONTEXT"


def _kubeconfig(kubeconfig: str | None) -> str | None:
    return kubeconfig or os.environ.get("KUBECONFIG")


def _context() -> str | None:
    return os.environ.get(CONTEXT_ENV) or None


def _named_context(kubeconfig: str | None) -> dict | None:
    """The kubeconfig entry of the context asked for (--kube-context); a usage error when the
    kubeconfig has no such context. None when none was asked for or there is no kubeconfig."""
    if not _context():
        return None
    try:
        contexts, _ = config.list_kube_config_contexts(config_file=_kubeconfig(kubeconfig))
    except (config.ConfigException, FileNotFoundError, TypeError):
        return None
    found = next((c for c in contexts if c["name"] == _context()), None)
    if found is None:
        raise SpecError("--kube-context", f"no context '{_context()}' in the kubeconfig",
                        f"one of: {', '.join(c['name'] for c in contexts)}")
    return found


def load_config(kubeconfig: str | None = None) -> client.ApiClient:
    """The kubeconfig (KUBECONFIG or ~/.kube/config), else the in-cluster ServiceAccount."""
    _named_context(kubeconfig)
    try:
        # KUBECONFIG read now, not when the kubernetes package was imported.
        return config.new_client_from_config(config_file=_kubeconfig(kubeconfig), context=_context())
    except (config.ConfigException, FileNotFoundError, TypeError) as err:
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except config.ConfigException:
            raise ClusterUnreachable(f"no kubeconfig: {err}") from err


def current_namespace(kubeconfig: str | None = None) -> str:
    try:
        active = _named_context(kubeconfig) or config.list_kube_config_contexts(
            config_file=_kubeconfig(kubeconfig))[1]
        return active.get("context", {}).get("namespace") or "default"
    except (config.ConfigException, FileNotFoundError, TypeError):
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                return f.read().strip()
        except OSError:
            return "default"
