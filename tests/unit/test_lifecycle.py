"""Upgrades replace Jobs by name (a new generation): the pure rules around that."""

from __future__ import annotations

from datetime import datetime, timedelta

from tfhelm.cluster import deploy, installed, training
from tfhelm.reaper import REAP, WAIT, decide, default_config
from tfhelm.workspace import userspec

from .test_reaper import T0, job


def aged(j, name: str, created: datetime, deleting: bool = False):
    j.metadata.name, j.metadata.uid = name, f"uid-{name}"
    j.metadata.creation_timestamp = created
    j.metadata.deletion_timestamp = created if deleting else None
    return j


def test_the_newest_job_of_a_role_decides_while_the_old_generation_is_still_there():
    old = aged(job(state="Complete", succeeded=2), "c-worker-aaaaaa", T0)
    new = aged(job(state="Running"), "c-worker-bbbbbb", T0 + timedelta(minutes=5))
    rows = [training.job_row(new), training.job_row(old)]  # list order must not matter
    assert training.current_jobs(rows)["worker"].name == "c-worker-bbbbbb"
    # The old generation finished, the new one runs: training is not done, the PS stay.
    assert training.training_done(rows) is None
    assert decide("c", rows, default_config(grace=0), (T0 + timedelta(hours=1)).timestamp()).action == WAIT


def test_a_job_being_deleted_never_decides():
    # A rollback re-creates the old name; the newer Job is being deleted.
    newer = aged(job(state="Complete", succeeded=2), "c-worker-bbbbbb", T0 + timedelta(minutes=5), True)
    back = aged(job(state="Complete", succeeded=2), "c-worker-aaaaaa", T0 + timedelta(minutes=1))
    rows = [training.job_row(newer), training.job_row(back)]
    assert training.current_jobs(rows)["worker"].name == "c-worker-aaaaaa"
    d = decide("c", rows, default_config(grace=0), (T0 + timedelta(hours=1)).timestamp())
    assert d.action == REAP and d.job.name == "c-worker-aaaaaa"


def test_value_changes_name_each_changed_key():
    old = {"worker": {"replicas": 2}, "image": {"repository": "tf", "tag": "2.20"}, "clusterName": "c"}
    new = {"worker": {"replicas": 5}, "image": {"repository": "tf", "tag": "2.21"}, "clusterName": "c",
           "chief": {"enabled": True}}
    assert installed.value_changes(old, new) == [
        "chief.enabled: (unset) -> true", "image.tag: '2.20' -> '2.21'", "worker.replicas: 2 -> 5"]
    assert installed.value_changes(new, new) == []


def test_interrupted_means_a_ps_release_without_its_workload():
    assert installed.Installed("c", "ns", workload=False, ps=True).interrupted
    assert not installed.Installed("c", "ns", workload=True, ps=True).interrupted
    assert not installed.Installed("c", "ns", workload=True, ps=False).interrupted
    line = installed.Installed("c", "ns", workload=False, ps=True).interrupted_line()
    assert "ns/c-ps" in line and "tfhelm up --name c" in line and "tfhelm down c" in line


def test_purge_names_the_volumes_it_keeps_and_why():
    values = {"storage": {"logs": {"existingClaim": "user-env-logs"}, "data": {"existingClaim": "user-env-data"}}}
    logs, data = deploy.kept_volumes("mnist", "tfhelm-user-alice", values, userspec.notebook_path)
    assert logs.startswith("kept PersistentVolumeClaim tfhelm-user-alice/user-env-logs: not this cluster's "
                           "(storage.logs.existingClaim)")
    assert "`tfhelm up --name mnist` resumes from them" in logs and logs.endswith("(in the notebook: rm -r /log/mnist)")
    assert data == ("kept PersistentVolumeClaim tfhelm-user-alice/user-env-data: not this cluster's "
                    "(storage.data.existingClaim)")
    assert deploy.kept_volumes("mnist", "team-a", {"storage": {"logs": {"existingClaim": "shared"}}},
                               userspec.notebook_path)[0].endswith(
        "delete the directory to start over")
    assert deploy.kept_volumes("mnist", "team-a", {}) == []  # its own PVCs: deleted, nothing kept
