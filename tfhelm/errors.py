"""Typed errors and the exit codes they end a command with; the CLI edge turns each into
one red line (tfhelm/console.py). The same table holds for every command:

    0  done (for `status`: training succeeded or is still running)
    1  training failed
    2  bad input: an option, a value, a file or a name; nothing was touched
    3  no cluster: none configured, unreachable, or access forbidden (401/403)
    4  timed out
    5  the cluster or Helm refused or failed an action (the line names the object)
  130  interrupted
"""

from __future__ import annotations

import json
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


class ClusterUnreachable(TfhelmError):
    exit_code = NO_CLUSTER

    def __init__(self, detail: str):
        super().__init__(f"no reachable Kubernetes cluster ({detail}); start the local one with "
                         "`tfhelm cluster up` and export the KUBECONFIG it prints")


class Forbidden(TfhelmError):
    """The API server (or Helm through it) said 401/403."""

    exit_code = NO_CLUSTER


class TimedOut(TfhelmError):
    exit_code = TIMED_OUT


class TrainingFailed(TfhelmError):
    exit_code = TRAINING_FAILED


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
_RBAC_DENIED = re.compile(r'User "[^"]*" cannot ')
_HELM_NO_CLUSTER = re.compile(_RBAC_DENIED.pattern + r"|unauthorized|cluster unreachable|connection refused|"
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


def api_message(err) -> str:
    """The API server's message (a Status object's `message`), else the HTTP reason."""
    try:
        return json.loads(err.body or "{}").get("message") or err.reason or ""
    except (ValueError, AttributeError, TypeError):
        return err.reason or ""


def access_denied(err) -> bool:
    """401, or RBAC's 403; not admission's 403 (Pod Security, quota, policies refuse objects)."""
    return err.status == 401 or (err.status == 403 and bool(_RBAC_DENIED.search(api_message(err))))


def api_error(err, what: str = "") -> TfhelmError:
    """A kubernetes ApiException as one line; the API server's message names the object,
    `what` (e.g. "secret team-a/x") says what tfhelm was doing."""
    prefix, message = (f"{what}: " if what else ""), api_message(err)
    if access_denied(err):
        return Forbidden(one_line(f"{prefix}forbidden ({err.status}): {message}") +
                         "; use a kubeconfig with access, or ask the cluster's admin for it")
    return TfhelmError(one_line(f"{prefix}the API server refused ({err.status}): {message}"))


def user_facing(err: BaseException) -> TfhelmError | None:
    """Any failure a command can meet, as a TfhelmError; None for a bug (an unknown kind)."""
    if isinstance(err, TfhelmError):
        return err
    from kubernetes.client.rest import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    if isinstance(err, ApiException):
        return api_error(err)
    if isinstance(err, ConfigException):
        return ClusterUnreachable(one_line(f"kubeconfig: {err}", 200))
    if isinstance(err, HTTPError):  # connection refused, DNS, TLS, timeouts after retries
        reason = getattr(err, "reason", None) or err
        return ClusterUnreachable(one_line(f"{type(reason).__name__}: {reason}", 200))
    if isinstance(err, UnicodeDecodeError):
        return UsageError(one_line(f"a file is not UTF-8 text: {err}"))
    return None


def forbidden(err: BaseException) -> bool:
    """401/403 from the API server or from Helm: RBAC will not change by retrying."""
    known = user_facing(err)
    return isinstance(known, Forbidden) or (
        isinstance(known, ReleaseError) and any(w in str(known).lower() for w in ("forbidden", "unauthorized")))
