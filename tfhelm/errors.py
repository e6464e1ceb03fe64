"""Typed errors; the CLI edge turns each into one red line and an exit code."""

from __future__ import annotations


class TfhelmError(Exception):
    """A failure to carry out a valid request (exit code 1)."""


class UsageError(TfhelmError):
    """Bad input, caught before anything touches the cluster (exit code 2)."""


class SpecError(UsageError, ValueError):
    """Bad option: names the field, the problem and how to fix it."""

    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" ({fix})" if fix else ""))


class RenderError(UsageError):
    """The chart refused the values (its schema or a `fail` in a template)."""


class ClusterUnreachable(TfhelmError):
    def __init__(self, detail: str):
        super().__init__(f"no reachable Kubernetes cluster ({detail}); start the local one with "
                         "`tfhelm cluster up` and export the KUBECONFIG it prints")


class ReleaseError(TfhelmError):
    """Helm failed for one release; names namespace/release and Helm's reason."""

    def __init__(self, namespace: str, release: str, action: str, reason: str):
        self.namespace, self.release = namespace, release
        super().__init__(f"{action} {namespace}/{release} failed: {reason}")


class AdmissionRefused(TfhelmError):
    """The API server refused an object (a server-side dry run): names it and why."""

    def __init__(self, namespace: str, kind: str, name: str, reason: str):
        self.namespace, self.kind, self.name = namespace, kind, name
        super().__init__(f"the API server refuses {kind} {namespace}/{name}: {reason}")


def exit_code(err: Exception) -> int:
    return 2 if isinstance(err, UsageError) else 1
