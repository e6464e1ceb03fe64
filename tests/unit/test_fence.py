"""The launcher's fence (tfhelm/pod/fence.py) where it has nothing to go by: no pod uid (a
local run), no log dir, a claim it cannot write or read. The fence acting is tested on the
launcher (tests/tf/test_launcher.py) and on the real nodes (tests/realpods/test_node_failure.py)."""

from __future__ import annotations

import threading

from tfhelm.pod import fence

TASK = {"TFHELM_TASK_TYPE": "worker", "TFHELM_TASK_INDEX": "3"}


def test_no_fence_without_a_pod_uid_or_a_log_dir(tmp_path):
    assert fence.claim_path({**TASK, "TFHELM_LOG_DIR": str(tmp_path)}) is None  # tfhelm run --local
    assert fence.claim_path({**TASK, "TFHELM_POD_UID": "u"}) is None
    assert fence.guard(lambda other: None, {**TASK, "TFHELM_LOG_DIR": str(tmp_path)}) is None


def test_an_unwritable_claim_leaves_the_task_unfenced(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the log directory should be
    env = {**TASK, "TFHELM_POD_UID": "u", "TFHELM_LOG_DIR": str(blocked / "log")}
    assert fence.guard(lambda other: None, env) is None


def test_only_another_uid_stops_the_task_never_a_claim_that_cannot_be_read(tmp_path):
    env = {**TASK, "TFHELM_POD_UID": "mine", "TFHELM_LOG_DIR": str(tmp_path)}
    taken = threading.Event()
    seen = []
    stop = fence.guard(lambda other: (seen.append(other), taken.set()), env, poll=0.01)
    path = fence.claim_path(env)
    assert fence.owner(path) == "mine"
    (tmp_path / ".tfhelm" / "tasks" / "worker-3").unlink()  # gone for a moment (storage hiccup)
    assert not taken.wait(0.2)
    fence.claim(path, "theirs")
    assert taken.wait(10) and seen == ["theirs"]
    stop.set()
