"""What the real nodes cost: `tfhelm cluster up` with 1 and 3 real nodes, side by side.

    python bench/nodes.py [--rounds 3] [--counts 1,3] [--cold]

For each round, each count in turn (interleaved, so the machine's load weighs on both
alike): stop the local cluster, time `localcluster.up(real=N)` with the images already in
the stores (the usual case), and read each real node's memory once it is Ready and idle: the
proportional set size (PSS: shared pages of the binaries split between the nodes that map
them) and the resident size of its own processes (kubelet, containerd, kube-proxy, CoreDNS,
kube-router). --cold first removes the image stores, so the first start imports the images
again (once per machine after `make images` changed them). Needs the lock of the local
cluster, like every run that starts it. Writes bench/results/nodes.{json,md}; prints them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tfhelm_dev import localcluster, localnode  # noqa: E402

RESULTS = REPO / "bench" / "results"


def node_memory(node: localnode.Node) -> dict[str, float]:
    """MiB of PSS and RSS over the node's own processes (its pods not included)."""
    pss = rss = 0
    for pid in localnode.daemon_pids(node):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            pass  # exited meanwhile
    return {"pss_mib": round(pss / 1024, 1), "rss_mib": round(rss / 1024, 1)}


def start(count: int) -> dict:
    localcluster.down()
    t0 = time.monotonic()
    localcluster.up(real=count)
    seconds = time.monotonic() - t0
    memory = {n.name: node_memory(n) for n in localcluster.real_nodes()}
    return {"real_nodes": count, "seconds": round(seconds, 1), "memory": memory}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--counts", default="1,3")
    parser.add_argument("--cold", action="store_true", help="remove the image stores first")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    started = localcluster.status() is not None
    runs, cold = [], None
    if args.cold:
        localcluster.down()
        for d in ("containerd-images", "containerd-nodes"):
            shutil.rmtree(localcluster.cache_dir() / d, ignore_errors=True)
        cold = start(max(counts))
        print(f"cold, {cold['real_nodes']} real nodes: {cold['seconds']} s", flush=True)
    for r in range(args.rounds):
        for c in counts:
            runs.append(start(c))
            print(f"round {r + 1}, {c} real node(s): {runs[-1]['seconds']} s", flush=True)
    if not started:
        localcluster.down()

    median = {c: statistics.median(x["seconds"] for x in runs if x["real_nodes"] == c) for c in counts}
    last = {c: next(x for x in reversed(runs) if x["real_nodes"] == c) for c in counts}
    result = {"rounds": args.rounds, "median_seconds": median, "cold": cold, "runs": runs,
              "ratio": round(median[max(counts)] / median[min(counts)], 2)}
    lines = ["| real nodes | `cluster up`, median of "
             f"{args.rounds} (s) | memory per node: PSS / RSS of its own processes (MiB) |", "|---|---|---|"]
    for c in counts:
        mem = "; ".join(f"{name.removeprefix('tfhelm-node-')} {m['pss_mib']:.0f} / {m['rss_mib']:.0f}"
                        for name, m in last[c]["memory"].items())
        lines.append(f"| {c} | {median[c]:.1f} | {mem} |")
    lines.append(f"\n{max(counts)} real nodes start in {result['ratio']}x the time of {min(counts)}"
                 + (f"; cold (images imported into the stores first): {cold['seconds']} s" if cold else "") + ".")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "nodes.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "nodes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
