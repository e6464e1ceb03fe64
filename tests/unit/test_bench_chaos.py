"""The chaos bench's pure parts (bench/chaoslib.py): its plan hits every kind of fault, each
fault's cost is read right from the chief's lines (a restart from the last checkpoint loses
nothing behind it; one from an older checkpoint is counted), and the table says so."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import chaoslib  # noqa: E402


def line(event: str, t: float, step: int) -> dict:
    return {"event": event, "time": t, "step": step, "task": "chief-0", "pod": "p"}


def test_the_plan_has_every_kind_once_then_random_ones_and_a_seed_repeats_it():
    first = chaoslib.plan(8, seed=7)
    assert len(first) == 8 and set(first[:len(chaoslib.KINDS)]) == set(chaoslib.KINDS)
    assert chaoslib.plan(8, seed=7) == first
    assert chaoslib.plan(2, seed=7) == first[:len(chaoslib.KINDS)], "never fewer than one of each"


LINES = [line("start", 0, 0), line("step", 10, 50), line("step", 20, 100),
         # fault at 25: the chief dies, restarts from checkpoint 100, is past it at 60
         line("start", 40, 100), line("step", 60, 150),
         # fault at 70 (the API server): the chief runs on
         line("step", 80, 200),
         # fault at 90: a restart from an older checkpoint (150, not 200) would lose 50 steps
         line("start", 95, 150), line("step", 120, 200), line("step", 130, 250)]


def test_a_restart_from_the_last_checkpoint_loses_nothing_and_recovery_is_the_first_checkpoint_past_it():
    killed = chaoslib.Fault("pod-kill", "chaos-chief-0-abc", at=25, back=35)
    o = chaoslib.outcome(killed, LINES, until=70)
    assert (o["checkpoint"], o["resumed"], o["lost"], o["recovered"], o["back"]) == (100, 100, 0, 35.0, 10.0)


def test_a_control_plane_fault_recovers_when_its_part_is_back_and_the_chief_runs_on():
    api = chaoslib.Fault("apiserver-restart", "kube-apiserver", at=70, back=74.2)
    o = chaoslib.outcome(api, LINES, until=90)
    assert (o["checkpoint"], o["resumed"], o["lost"], o["recovered"]) == (150, None, 0, 4.2)


def test_steps_lost_behind_the_last_checkpoint_are_counted_and_shown():
    frozen = chaoslib.Fault("node-freeze", "tfhelm-node-train1 (3 tasks)", at=90, back=110, restored=111)
    o = chaoslib.outcome(frozen, LINES)
    assert (o["checkpoint"], o["resumed"], o["lost"], o["recovered"]) == (200, 150, 50, 40.0)
    never = chaoslib.outcome(chaoslib.Fault("link-cut", "n", at=131), LINES)
    assert never["recovered"] is None


def test_the_table_has_a_row_per_kind_with_medians_and_the_machine_load():
    outcomes = [chaoslib.outcome(chaoslib.Fault("pod-kill", "a", at=25, back=35), LINES, 70),
                chaoslib.outcome(chaoslib.Fault("pod-kill", "b", at=90, back=100), LINES),
                chaoslib.outcome(chaoslib.Fault("apiserver-restart", "k", at=70, back=74.2), LINES, 90)]
    rows = {r["kind"]: r for r in chaoslib.summary(outcomes)}
    assert rows["pod-kill"] == {"kind": "pod-kill", "count": 2, "recovered": 2, "median": 37.5, "max": 40.0,
                                "restarts": 2, "lost": 50}
    result = {"machine": {"date": "2026-12-07 00:00 UTC", "commit": "abc1234", "cpu": "AMD EPYC", "cores": 2,
                          "memory_gib": 23.5, "kubernetes": "v1.36.3", "load_average_at_start": 1.25},
              "load_average_at_end": 7.5, "seed": 7, "seconds": 600, "faults": [{}, {}, {}], "outcomes": outcomes,
              "training": {"steps": 250, "checkpoint_every": 50, "workers": 2, "ps": 1, "grace": 5},
              "end": {"complete": True, "step": 250, "checkpoint": 250, "ps_left": 0, "after_thaw": 0}}
    md = chaoslib.table(result)
    assert "load average 1.2 at start, 7.5 at the end (1-minute, 2 cores)" in md
    assert "| pod-kill | a random task's pod deleted with no grace (SIGKILL, no notice) | 2/2 | 38 s / 40 s | 2 | 50 |" in md
    assert "| apiserver-restart |" in md and "| node-freeze |" not in md
    assert "parameter servers left after the reap: 0" in md and "Bench time: 10.0 min" in md
