"""The failures a command can meet - the API server's answers (the kubernetes client's
ApiException), its absence, Helm's - as tfhelm's typed errors (tfhelm.errors), each one line
naming what was asked."""

from __future__ import annotations

import json

from tfhelm.errors import (EXCEPTIONS, RBAC_DENIED, ClusterUnreachable, Forbidden, Refused, ReleaseError,
                           TfhelmError, UsageError, exit_code, one_line)


def api_message(err) -> str:
    """The API server's message (a Status object's `message`), else the HTTP reason."""
    try:
        return json.loads(err.body or "{}").get("message") or err.reason or ""
    except (ValueError, AttributeError, TypeError):
        return err.reason or ""


def access_denied(err) -> bool:
    """401, or RBAC's 403; not admission's 403 (Pod Security, quota, policies refuse objects)."""
    return err.status == 401 or (err.status == 403 and bool(RBAC_DENIED.search(api_message(err))))


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


def refusal(err: BaseException) -> TfhelmError | None:
    """The error to stop with when retrying cannot help (401/403), else None (a watch's
    feed retries)."""
    return user_facing(err) if forbidden(err) else None


def as_exception(err: Exception) -> Exception:
    """A failure as the API raises it: an instance of EXCEPTIONS' class for its exit code
    (the error itself when it is one), the same message; a bug (no known kind) as it is."""
    known = user_facing(err)
    if known is None:
        return err
    cls = EXCEPTIONS.get(exit_code(known), Refused)
    if isinstance(known, cls):
        return known
    return cls(str(known))
