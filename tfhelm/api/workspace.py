"""The workspace this process runs in, if any: a user's notebook (charts/user-env) says who
it is in its environment (TFHELM_USER), mounts the code volume its file server serves, and
holds the ServiceAccount the API client and Helm use when there is no kubeconfig."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

USER_ENV = "TFHELM_USER"  # set by the user-env chart in the notebook's container
CODE_DIR_ENV = "TFHELM_CODE_DIR"  # where the code volume is mounted (default: the chart's)


@dataclass(frozen=True)
class Workspace:
    user: str
    code_dir: Path  # the notebook's work directory: the code volume its file server serves

    def script_path(self, script: str) -> str:
        """A script as `tfhelm up --user` takes it: a file under the work directory as its
        path there (the file server serves it as it is); anything else unchanged (a URL, a
        path in the image, a local file elsewhere, which is shipped with the cluster)."""
        if "://" in script:
            return script
        path = Path(script).expanduser()
        local = path if path.is_absolute() else Path.cwd() / path
        try:
            return local.resolve().relative_to(self.code_dir.resolve()).as_posix()
        except ValueError:
            return str(local) if local.is_file() else script


def current() -> Workspace | None:
    """The workspace of this process (a user's notebook), else None."""
    user = os.environ.get(USER_ENV)
    if not user:
        return None
    code_dir = os.environ.get(CODE_DIR_ENV)
    if not code_dir:
        from tfhelm.chart import default_values

        code_dir = default_values("user-env")["storage"]["code"]["mountPath"]
    return Workspace(user, Path(code_dir))


def pod_address() -> str:
    """This process's address as the cluster's pods reach it: in a pod, the pod's IP (its
    hostname resolves to it)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def free_port() -> int:
    """A TCP port nobody listens on now (the in-graph chief's server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]
