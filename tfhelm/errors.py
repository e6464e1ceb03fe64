"""Typed errors and the exit codes they end a command with; the CLI edge turns each into
one red line (tfhelm/console.py), the Python API (tfhelm.api) raises them as they are, one
class per exit code (`EXCEPTIONS`). The same table holds for every command:

    0  done (for `status`: training succeeded or is still running)
    1  training failed
    2  bad input: an option, a value, a file or a name; nothing was touched
    3  no cluster: none configured, unreachable, or access forbidden (401/403)
    4  timed out
    5  the cluster or Helm refused or failed an action (the line names the object)
  130  interrupted
"""

from __future__ import annotations

import re

TRAINING_FAILED, BAD_INPUT, NO_CLUSTER, TIMED_OUT, REFUSED = 1, 2, 3, 4, 5


class TfhelmError(Exception):
    """A failure to carry out a valid request."""

    exit_code = REFUSED


class UsageError(TfhelmError):
    """Bad input, caught before anything touches the cluster."""

    exit_code = BAD_INPUT


class SpecError(UsageError, ValueError):
    """Bad option: names the field, the problem and how to fix it."""

    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" ({fix})" if fix else ""))


class RenderError(UsageError):
    """The chart refused the values (its schema or a `fail` in a template)."""


class NoCluster(TfhelmError):
    """No cluster: none configured, unreachable, or access forbidden."""

    exit_code = NO_CLUSTER


class ClusterUnreachable(NoCluster):
    def __init__(self, detail: str):
        super().__init__(f"no reachable Kubernetes cluster ({detail}); start the local one with "
                         "`tfhelm cluster up` and export the KUBECONFIG it prints")


class Forbidden(NoCluster):
    """The API server (or Helm through it) said 401/403."""


class TimedOut(TfhelmError):
    """A wait ran out of time (what was waited for is named)."""

    exit_code = TIMED_OUT


class TrainingFailed(TfhelmError):
    """The training failed (the tasks' errors are named)."""

    exit_code = TRAINING_FAILED


class Refused(TfhelmError):
    """The cluster or Helm refused or failed an action (the message names the object)."""

    exit_code = REFUSED


class Gone(Exception):
    """A watch's resourceVersion is too old (HTTP 410): list again."""


class ReleaseError(TfhelmError):
    """Helm failed for one release; names namespace/release and Helm's reason."""

    def __init__(self, namespace: str, release: str, action: str, reason: str):
        self.namespace, self.release = namespace, release
        self.exit_code = _helm_exit_code(reason)
        super().__init__(f"{action} {namespace}/{release} failed: {reason}")


class AdmissionRefused(TfhelmError):
    """The API server refused an object (a server-side dry run): names it and why."""

    def __init__(self, namespace: str, kind: str, name: str, reason: str):
        self.namespace, self.kind, self.name, self.reason = namespace, kind, name, reason
        super().__init__(one_line(f"the API server refuses {kind} {namespace}/{name}: {reason}"))


# RBAC says `User "..." cannot <verb> ...`; admission (Pod Security, quota, policies) also
# answers "is forbidden", but that is an object refused (5), not access denied (3).
RBAC_DENIED = re.compile(r'User "[^"]*" cannot ')
_HELM_NO_CLUSTER = re.compile(RBAC_DENIED.pattern + r"|unauthorized|cluster unreachable|connection refused|"
                              r"no such host|i/o timeout|dial tcp", re.I)
_HELM_TIMEOUT = re.compile(r"context deadline exceeded|timed out waiting", re.I)


def _helm_exit_code(reason: str) -> int:
    if _HELM_NO_CLUSTER.search(reason):
        return NO_CLUSTER
    if _HELM_TIMEOUT.search(reason):
        return TIMED_OUT
    return REFUSED


def exit_code(err: Exception) -> int:
    return getattr(err, "exit_code", REFUSED)


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The class the Python API raises for each exit code (its message is the CLI's line).
EXCEPTIONS: dict[int, type[TfhelmError]] = {TRAINING_FAILED: TrainingFailed, BAD_INPUT: UsageError,
                                            NO_CLUSTER: NoCluster, TIMED_OUT: TimedOut, REFUSED: Refused}
