# tfhelm/errors.py without its prose (make chart-files)
from __future__ import annotations
import re
TRAINING_FAILED, BAD_INPUT, NO_CLUSTER, TIMED_OUT, REFUSED = 1, 2, 3, 4, 5
class TfhelmError(Exception):
    exit_code = REFUSED
class UsageError(TfhelmError):
    exit_code = BAD_INPUT
class SpecError(UsageError, ValueError):
    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" ({fix})" if fix else ""))
class RenderError(UsageError):
    pass
class NoCluster(TfhelmError):
    exit_code = NO_CLUSTER
class ClusterUnreachable(NoCluster):
    def __init__(self, detail: str):
        super().__init__(f"no reachable Kubernetes cluster ({detail}); start the local one with "
                         "`tfhelm cluster up` and export the KUBECONFIG it prints")
class Forbidden(NoCluster):
    pass
class TimedOut(TfhelmError):
    exit_code = TIMED_OUT
class TrainingFailed(TfhelmError):
    exit_code = TRAINING_FAILED
class Refused(TfhelmError):
    exit_code = REFUSED
class Gone(Exception):
    pass
class ReleaseError(TfhelmError):
    def __init__(self, namespace: str, release: str, action: str, reason: str):
        self.namespace, self.release = namespace, release
        self.exit_code = _helm_exit_code(reason)
        super().__init__(f"{action} {namespace}/{release} failed: {reason}")
class AdmissionRefused(TfhelmError):
    def __init__(self, namespace: str, kind: str, name: str, reason: str):
        self.namespace, self.kind, self.name, self.reason = namespace, kind, name, reason
        super().__init__(one_line(f"the API server refuses {kind} {namespace}/{name}: {reason}"))
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
EXCEPTIONS: dict[int, type[TfhelmError]] = {TRAINING_FAILED: TrainingFailed, BAD_INPUT: UsageError,
                                            NO_CLUSTER: NoCluster, TIMED_OUT: TimedOut, REFUSED: Refused}
