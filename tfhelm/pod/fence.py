"""The launcher's fence: one live process per task, even when a lost node comes back.

Kubernetes cannot stop the pods of a node that no longer answers; it can only forget them.
When the in-cluster reaper has a task of such a node replaced (docs/nodes.md), the old pod's
processes may still be there, frozen or cut off, and come back: a node that thaws, a link
restored, a kubelet restarted. Until its kubelet catches up and kills them (seconds to a
minute), two processes of one task would talk to the cluster: two chiefs writing
checkpoints into one directory, two workers of one index pushing updates to the PS.

So every task claims its task at start, on the logs volume every task shares: the file
`<TFHELM_LOG_DIR>/.tfhelm/tasks/<type>-<index>` holds its pod's uid (written whole, by
rename). A thread of the launcher reads it back every POLL seconds (a fresh open: NFS
revalidates on open); once another pod owns the task, the launcher kills the script and
leaves - the container ends, and everything in it. A process that thawed finds its timer
overdue: the first thing it does is read the file.

Without a shared logs volume (`storage.logs.enabled: false`: each pod its own emptyDir) or a
pod uid (a local run) there is no fence; gRPC keepalive (a cut-off task's calls fail, so its
script exits) and the kubelet remain.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from tfhelm import contract

POD_UID, LOG_DIR, TASK_TYPE, TASK_INDEX = (contract.env(k) for k in ("podUid", "logDir", "taskType", "taskIndex"))
POLL = 2.0  # seconds between two reads of the claim (one small read per task)


def claim_path(environ=None) -> str | None:
    """This task's claim file; None where there is no fence (no pod uid or no log dir)."""
    env = os.environ if environ is None else environ
    if not all(env.get(k) for k in (POD_UID, LOG_DIR, TASK_TYPE, TASK_INDEX)):
        return None
    return os.path.join(env[LOG_DIR], ".tfhelm", "tasks", f"{env[TASK_TYPE]}-{env[TASK_INDEX]}")


def owner(path: str) -> str | None:
    """The pod uid the claim names; None when it cannot be read (a storage hiccup is no proof
    of anything: the fence acts only on another uid)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def claim(path: str, uid: str) -> None:
    """Name this pod the task's owner: a whole file by rename, never half-written."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    part = f"{path}.{uid}"
    with open(part, "w", encoding="utf-8") as f:
        f.write(uid + "\n")
    os.replace(part, path)


def guard(on_taken: Callable[[str], None], environ=None, poll: float = POLL) -> threading.Event | None:
    """Claim the task and watch the claim in a daemon thread: `on_taken(other_uid)` once
    another pod owns it (it should not return). Returns the thread's stop Event, or None where
    there is no fence or the claim cannot be written (the task runs unfenced, as before)."""
    env = os.environ if environ is None else environ
    path = claim_path(env)
    if path is None:
        return None
    uid = env[POD_UID]
    try:
        claim(path, uid)
    except OSError:
        return None
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(poll):
            other = owner(path)
            if other is not None and other != uid:
                on_taken(other)
                return
    threading.Thread(target=watch, name="tfhelm-fence", daemon=True).start()
    return stop
