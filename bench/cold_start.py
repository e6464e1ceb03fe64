"""A newcomer's first `make demo` and `make test`, from nothing cached.

    python bench/cold_start.py [--dir DIR] [--keep-modules]

Clones this checkout's HEAD into DIR (default: a new folder under /var/tmp), points the
binary and image cache (TFHELM_CACHE_DIR), pip's cache (XDG_CACHE_HOME) and Go's build cache
(GOCACHE; the module cache too unless --keep-modules) at empty folders inside it, then in
the clone:
  1. `make demo`, timed to its first training step (the first loss line a worker prints) and
     to its end;
  2. `make build-test`, what `make test` builds before its first test (the test-only tools
     and TensorFlow in the venv).
Each build step's wall and CPU time comes from hack/steps.py (.cache/build/times.json).
The machine's load is read before and after: other work on the machine slows every step.
Needs root and the machine's local cluster free (it starts and stops it). Writes
bench/results/cold-start.{json,md} in this checkout; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
# A worker's first training line as hack/demo.sh shows it ("[pod/...-worker-...] global step 0: loss ...").
FIRST_STEP = re.compile(r"^\[pod/\S*-worker-\S*\] global step \d+: loss")


def _mmss(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def timed_demo(clone: Path, env: dict[str, str]) -> dict:
    """`make demo`, its output passed through; seconds to the first loss line and to the end."""
    t0 = time.monotonic()
    first = None
    proc = subprocess.Popen(["make", "-C", str(clone), "demo"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout:
        sys.stdout.write(line)
        if first is None and FIRST_STEP.match(line):
            first = time.monotonic() - t0
    if proc.wait():
        sys.exit(f"make demo failed (exit {proc.returncode})")
    return {"first_step": round(first, 1) if first else None, "end": round(time.monotonic() - t0, 1),
            "build": json.loads((clone / ".cache/build/times.json").read_text())}


def timed_build_test(clone: Path, env: dict[str, str]) -> dict:
    t0 = time.monotonic()
    subprocess.run(["make", "-C", str(clone), "build-test"], env=env, check=True)
    return {"end": round(time.monotonic() - t0, 1),
            "build": json.loads((clone / ".cache/build/times.json").read_text())}


def table(result: dict) -> str:
    demo, test = result["demo"], result["test"]
    rows = ["| step | wall | CPU (user + sys) |", "|---|---|---|"]
    steps = dict(demo["build"]["steps"])  # the test plan repeats the demo's steps, built already
    steps.update({k: v for k, v in test["build"]["steps"].items() if v["wall"] > steps.get(k, v)["wall"] or k not in steps})
    for name, s in sorted(steps.items(), key=lambda kv: -kv[1]["wall"]):
        if s["wall"] >= 1:
            rows.append(f"| {name} | {_mmss(s['wall'])} | {_mmss(s['user'] + s['sys'])} |")
    first = demo["first_step"]
    summary = [
        f"`make demo` from nothing cached: its builds {_mmss(demo['build']['wall'])}, the first training step "
        f"at {_mmss(first) if first else '(not seen)'}, the demo done at {_mmss(demo['end'])}.",
        f"`make test` after it: {_mmss(test['end'])} of builds before its first test.",
        f"Load average (1, 5, 15 min) before {result['load_before']}, after {result['load_after']}; "
        f"{result['cores']} cores; Go modules {'cached' if result['keep_modules'] else 'downloaded too'}.",
    ]
    return "\n".join(["\n".join(summary), "", *rows]) + "\n"


def write(result: dict) -> str:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cold-start.json").write_text(json.dumps(result, indent=1) + "\n")
    text = table(result)
    (RESULTS / "cold-start.md").write_text(text)
    return text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, help="where to clone (default: a new folder under /var/tmp)")
    p.add_argument("--keep-modules", action="store_true", help="reuse Go's module cache (no downloads)")
    a = p.parse_args()
    work = a.dir or Path(tempfile.mkdtemp(prefix="tfhelm-cold-", dir="/var/tmp"))
    clone = work / "tfhelm"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True)
    # XDG_CACHE_HOME: pip's download cache too (TensorFlow's wheels are most of the bytes).
    env = {**os.environ, "TFHELM_CACHE_DIR": str(work / "cache"), "GOCACHE": str(work / "gocache"),
           "XDG_CACHE_HOME": str(work / "xdg")}
    if not a.keep_modules:
        env["GOMODCACHE"] = str(work / "gomod")
    env.pop("VIRTUAL_ENV", None)
    result = {"commit": subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True,
                                       text=True).stdout.strip(),
              "cores": os.cpu_count(), "keep_modules": a.keep_modules,
              "load_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        result["demo"] = timed_demo(clone, env)
        result["test"] = timed_build_test(clone, env)
    finally:
        subprocess.run(["make", "-C", str(clone), "cluster-down"], env=env, capture_output=True)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(write(result))
    print(f"(the clone and its caches stay in {work}: remove it when done)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
