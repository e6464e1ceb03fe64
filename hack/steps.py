#!/usr/bin/env python3
"""Build what `make demo` or `make test` needs, independent steps at the same time.

    hack/steps.py demo|test [--times FILE]

Each step is a make target of its own (its output cached per version as before); a step
starts once the steps it needs are done. Go builds are CPU-bound and use both cores each, so
at most two run at once; the image build (debootstrap, pip, packing: mostly I/O and network)
and the Python installs run beside them. Every step's output goes to .cache/build/STEP.log;
the terminal gets one progress line (running steps with their time so far, what remains),
a CI log one line per start and end and a heartbeat. The wall and CPU time of every step
goes to .cache/build/times.json (bench/cold_start.py reads it). Plain Python: it runs
before the venv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / ".cache" / "build"
GO_SLOTS = 2  # concurrent Go builds: more would only share the same two cores


@dataclass
class Step:
    name: str
    target: str  # the make target
    after: tuple[str, ...] = ()
    go: bool = False
    # filled in while running
    state: str = "waiting"
    started: float = 0.0
    wall: float = 0.0
    user: float = 0.0
    sys: float = 0.0
    status: int = 0
    _done: threading.Event = field(default_factory=threading.Event, repr=False)


# In start order when free to start: helm and Kubernetes first (the images wait for helm;
# Kubernetes is the longest), the image root and TensorFlow beside them.
DEMO = [
    Step("venv", "install-venv"),
    Step("apt", "node-deps"),
    Step("helm", "helm", go=True),
    Step("kubernetes", "kubernetes", go=True),
    Step("image-root", "image-root", after=("apt",)),
    Step("wheel", "wheel", after=("venv",)),
    Step("pause", "pause", after=("apt",)),
    Step("etcd", "etcd", go=True),
    Step("containerd", "containerd", go=True),
    Step("coredns", "coredns", go=True),
    Step("kube-router", "kube-router", go=True),
    Step("kwok", "kwok", go=True),
    Step("kwok-stages", "kwok-stages", after=("kubernetes", "kwok")),
    Step("images", "images", after=("image-root", "helm", "wheel", "pause")),
]
# The test-only tools, after the demo's (a test run needs every step anyway).
TEST = DEMO + [
    Step("tensorflow", "tf-deps", after=("venv",)),
    Step("helm-docs", "helm-docs", go=True),
    Step("helm3", "helm3", go=True),
    Step("registry", "registry", go=True),
    Step("gitops-crds", "gitops-crds", go=True),  # controller-gen and the CRDs the GitOps tests check
    Step("prometheus", "prometheus", go=True),  # promtool and the server, one `go install`
    Step("kueue", "kueue", go=True),  # the queue tests' Kueue manager and its manifests
]
PLANS = {"demo": DEMO, "test": TEST}


def _run(step: Step, env: dict[str, str]) -> None:
    log = LOGS / f"{step.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["make", "--no-print-directory", "-C", str(ROOT), step.target],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        # wait4: the step's CPU time, its children's included (make waits for them).
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    step.wall = time.monotonic() - step.started
    step.user, step.sys, step.status = usage.ru_utime, usage.ru_stime, proc.returncode
    step._done.set()


def _fmt(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


class Progress:
    """One redrawn line on a terminal; start/end lines and a heartbeat in a log."""

    def __init__(self, steps: list[Step]):
        self.steps, self.t0 = steps, time.monotonic()
        self.tty = sys.stdout.isatty()
        self.last_beat = self.t0

    def line(self) -> str:
        now = time.monotonic()
        running = [f"{s.name} {_fmt(now - s.started)}" for s in self.steps if s.state == "running"]
        left = [s.name for s in self.steps if s.state == "waiting"]
        done = sum(s.state == "done" for s in self.steps)
        return (f"[{_fmt(now - self.t0)}] {done}/{len(self.steps)} done; running: {', '.join(running) or '-'}"
                + (f"; then: {', '.join(left)}" if left else ""))

    def event(self, text: str) -> None:
        if self.tty:
            sys.stdout.write("\r\033[K")
        print(f"[{_fmt(time.monotonic() - self.t0)}] {text}", flush=True)

    def tick(self) -> None:
        if self.tty:
            cols = os.get_terminal_size().columns
            sys.stdout.write("\r\033[K" + self.line()[: cols - 1])
            sys.stdout.flush()
        elif time.monotonic() - self.last_beat >= 60:
            self.last_beat = time.monotonic()
            print(self.line(), flush=True)


def build(steps: list[Step]) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MAKEFLAGS": ""}  # each step is a make of its own, not a sub-make
    by_name = {s.name: s for s in steps}
    progress = Progress(steps)
    failed: list[Step] = []
    while any(s.state in ("waiting", "running") for s in steps):
        for s in steps:
            if s.state == "running" and s._done.is_set():
                s.state = "done" if s.status == 0 else "failed"
                progress.event(f"{'done' if s.status == 0 else 'FAILED'}: {s.name} "
                               f"({_fmt(s.wall)} wall, {_fmt(s.user + s.sys)} CPU)")
                if s.status:
                    failed.append(s)
        if not failed:
            go_busy = sum(s.go and s.state == "running" for s in steps)
            for s in steps:
                ready = s.state == "waiting" and all(by_name[a].state == "done" for a in s.after)
                if ready and (not s.go or go_busy < GO_SLOTS):
                    s.state, s.started = "running", time.monotonic()
                    go_busy += s.go
                    progress.event(f"start: {s.name}")
                    threading.Thread(target=_run, args=(s, env), daemon=True).start()
        elif not any(s.state == "running" for s in steps):
            break
        progress.tick()
        time.sleep(0.2)
    if progress.tty:
        sys.stdout.write("\r\033[K")
    for s in failed:
        log = LOGS / f"{s.name}.log"
        tail = log.read_text(errors="replace").splitlines()[-40:]
        print(f"\n{s.name} failed (make {s.target}, exit {s.status}); the end of {log}:", file=sys.stderr)
        print("\n".join(tail), file=sys.stderr)
    return 1 if failed else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("plan", choices=sorted(PLANS))
    a = p.parse_args()
    steps = PLANS[a.plan]
    t0 = time.monotonic()
    rc = build(steps)
    wall = time.monotonic() - t0
    record = {"plan": a.plan, "wall": round(wall, 1), "load": os.getloadavg(),
              "steps": {s.name: {"wall": round(s.wall, 1), "user": round(s.user, 1), "sys": round(s.sys, 1),
                                 "status": s.status} for s in steps if s.state in ("done", "failed")}}
    (LOGS / "times.json").write_text(json.dumps(record, indent=1) + "\n")
    cpu = sum(s.user + s.sys for s in steps)
    print(f">> {a.plan} prerequisites: {_fmt(wall)} wall, {_fmt(cpu)} CPU; per step in {LOGS}/times.json")
    sys.exit(rc)


if __name__ == "__main__":
    main()
