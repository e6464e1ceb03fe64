"""The chaos bench's pure parts (bench/chaos.py injects the faults): the plan of faults, what
each one cost the training (read from the chief's metrics lines), and the tables. No cluster,
no TensorFlow: tests/unit/test_bench_chaos.py checks them."""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass, field

# Each fault: what it is, and what recovered means for it.
KINDS = {
    "pod-kill": "a random task's pod deleted with no grace (SIGKILL, no notice)",
    "node-freeze": "the training node holding most tasks lost: link cut, every process frozen; thawed once recovered",
    "link-cut": "that node's link cut (its processes run on, unreachable); restored once recovered",
    "apiserver-restart": "kube-apiserver SIGKILLed and started again 3 s later",
    "reaper-kill": "the in-cluster reaper's pod deleted with no grace",
}
# Training goes on through these: recovered is their own part back (the API, the reaper).
CONTROL_PLANE = ("apiserver-restart", "reaper-kill")


def plan(count: int, seed: int) -> list[str]:
    """Every kind once in a random order, then random kinds up to `count`."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    return kinds + [rng.choice(list(KINDS)) for _ in range(max(0, count - len(kinds)))]


@dataclass
class Fault:
    kind: str
    target: str  # the pod or node hit
    at: float  # epoch seconds the fault was injected
    back: float | None = None  # its own part back: a replacement Running, the API ready, the reaper Running
    restored: float | None = None  # node faults: thawed / plugged again
    notes: list[str] = field(default_factory=list)


def progress(lines: list[dict]) -> list[tuple[float, int]]:
    """(time, step) of every checkpoint the chief reported (a `step` line follows each save, a
    `preempted` line a save on SIGTERM), in time order."""
    return sorted((e["time"], e["step"]) for e in lines if e["event"] in ("step", "preempted"))


def outcome(fault: Fault, lines: list[dict], until: float | None = None) -> dict:
    """What the fault cost, from the chief's metrics lines (`until`: the next fault).

    checkpoint: the last checkpoint before the fault; resumed: the lowest step a chief started
    after the fault restored (None: the chief ran on); lost: steps behind that checkpoint the
    training went back to (must be 0); recovered: seconds from the fault to the first
    checkpoint past it (the training back where it was and on), or to its own part back for a
    control-plane fault."""
    checkpoint = max((s for t, s in progress(lines) if t < fault.at), default=0)
    window = [e for e in lines if fault.at <= e["time"] and (until is None or e["time"] < until)]
    starts = [e["step"] for e in window if e["event"] == "start"]
    resumed = min(starts) if starts else None
    past = [t for t, s in progress(window) if s > checkpoint]
    end = fault.back if fault.kind in CONTROL_PLANE else min(past, default=None)
    return {"kind": fault.kind, "target": fault.target, "checkpoint": checkpoint, "resumed": resumed,
            "lost": 0 if resumed is None else max(0, checkpoint - resumed),
            "recovered": None if end is None else round(end - fault.at, 1),
            "back": None if fault.back is None else round(fault.back - fault.at, 1), "notes": fault.notes}


def summary(outcomes: list[dict]) -> list[dict]:
    """One row per kind: how often, seconds to recover (median, max), steps lost (max)."""
    rows = []
    for kind in KINDS:
        mine = [o for o in outcomes if o["kind"] == kind]
        if not mine:
            continue
        times = [o["recovered"] for o in mine if o["recovered"] is not None]
        rows.append({"kind": kind, "count": len(mine), "recovered": len(times),
                     "median": statistics.median(times) if times else None, "max": max(times, default=None),
                     "restarts": sum(o["resumed"] is not None for o in mine), "lost": max(o["lost"] for o in mine)})
    return rows


def _s(x) -> str:
    return "-" if x is None else f"{x:.0f} s"


def table(result: dict) -> str:
    """The README's chaos section (markdown) from a run's result."""
    m = result["machine"]
    t = result["training"]
    lines = [f"Measured {m['date']} at {m['commit']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
             f"Kubernetes {m['kubernetes']} (local: 2 real training nodes); load average "
             f"{m['load_average_at_start']:.1f} at start, {result['load_average_at_end']:.1f} at the end "
             f"(1-minute, {m['cores']} cores). Seed {result['seed']}.", "",
             f"One training under {len(result['faults'])} faults, one after the other, each once the training "
             f"was back where it had been: `examples/ps_in_graph.py --steps {t['steps']} --checkpoint-every "
             f"{t['checkpoint_every']}`, in-graph, chief + {t['workers']} workers + {t['ps']} PS, chart defaults "
             f"(`nodeFailure`) but `reaper.grace={t['grace']}`. Recovered: seconds from the fault to the "
             "chief's first checkpoint past the one it had (a control-plane fault, which training goes "
             "through: to the API server ready, to a new reaper Running); chief restarts: how many of the "
             "faults restarted the chief (it resumes from a checkpoint); steps lost: how far behind the last "
             "checkpoint before the fault a restart went back (0: nothing lost beyond it).", "",
             "| fault | what | recovered | time to recover, median / max | chief restarts | steps lost |",
             "|---|---|---:|---:|---:|---:|"]
    for r in summary(result["outcomes"]):
        lines.append(f"| {r['kind']} | {KINDS[r['kind']]} | {r['recovered']}/{r['count']} | "
                     f"{_s(r['median'])} / {_s(r['max'])} | {r['restarts']} | {r['lost']} |")
    end = result["end"]
    lines += ["", f"Training {'complete' if end['complete'] else 'NOT complete'} at step {end['step']} "
              f"(checkpoint {end['checkpoint']}); parameter servers left after the reap: {end['ps_left']}; "
              f"lines written by a thawed node's old tasks: {end['after_thaw']}. "
              f"Bench time: {result['seconds'] / 60:.1f} min.", ""]
    return "\n".join(lines)


def as_dict(fault: Fault) -> dict:
    return asdict(fault)
