"""The per-task baseline: a TF cluster the way TFJob and the original templates lay it out.

One Pod and one Service per task (worker and PS alike), and TF_CONFIG inline in every pod
with the full host list (`<name>-<role>-<i>.<ns>.svc:<port>`, TFJob's scheme). The bench
compares tfhelm against it ("per-task" column).

    python bench/baseline.py NAME --workers N [--ps P] [-n NS] > manifests.yaml

The manifests are text templates, like Helm's: at large N the output is N² bytes (every pod
carries every host), so `measure()` streams them and, past a byte budget, extrapolates from
the part it generated (the documents differ only in their index).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Iterator

PORT = 2222
IMAGE = "tensorflow/tensorflow:2.21.0"

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {task}
  namespace: {ns}
  labels:
    app.kubernetes.io/name: tf-baseline
    app.kubernetes.io/instance: {name}
    training.kubeflow.org/replica-type: {role}
    training.kubeflow.org/replica-index: "{index}"
spec:
  restartPolicy: {restart}
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile: {{type: RuntimeDefault}}
  containers:
    - name: tensorflow
      image: {image}
      command: ["python", "/opt/train.py"]
      ports:
        - {{name: tfjob-port, containerPort: {port}}}
      env:
        - name: TF_CONFIG
          value: '{{"cluster":{cluster},"task":{{"type":"{role}","index":{index}}}}}'
      resources:
        requests: {{cpu: 100m, memory: 512Mi}}
        limits: {{memory: 2Gi}}
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {{drop: [ALL]}}
"""

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: {task}
  namespace: {ns}
  labels:
    app.kubernetes.io/name: tf-baseline
    app.kubernetes.io/instance: {name}
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/instance: {name}
    training.kubeflow.org/replica-type: {role}
    training.kubeflow.org/replica-index: "{index}"
  ports:
    - {{name: tfjob-port, port: {port}, targetPort: {port}}}
"""


def cluster_json(name: str, ns: str, workers: int, ps: int) -> str:
    hosts = {role: [f"{name}-{role}-{i}.{ns}.svc:{PORT}" for i in range(count)]
             for role, count in (("worker", workers), ("ps", ps)) if count}
    return json.dumps(hosts, separators=(",", ":"))


def tasks(workers: int, ps: int) -> Iterator[tuple[str, int]]:
    for i in range(ps):
        yield "ps", i
    for i in range(workers):
        yield "worker", i


def documents(name: str, ns: str, workers: int, ps: int) -> Iterator[str]:
    """Every object's YAML, in install order (each task: its Pod, then its Service)."""
    cluster = cluster_json(name, ns, workers, ps)
    for role, i in tasks(workers, ps):
        fields = dict(task=f"{name}-{role}-{i}", name=name, ns=ns, role=role, index=i, port=PORT,
                      image=IMAGE, cluster=cluster, restart="Always" if role == "ps" else "OnFailure")
        yield POD.format(**fields)
        yield SERVICE.format(**fields)


def b64_len(n: int) -> int:
    return 4 * -(-n // 3)


@dataclass
class Measured:
    seconds: float        # generating the manifests
    bytes: int            # rendered manifests (YAML, `---` separated)
    objects: int
    largest: int          # bytes of the largest object, as compact JSON (what the API receives)
    stored: int           # base64(gzip(JSON of the manifest)): Helm's encoding of a release
    exact: bool           # False: generated up to the budget, the rest extrapolated


def measure(name: str, ns: str, workers: int, ps: int, budget: int = 256 << 20) -> Measured:
    """Generate the manifests, counting what a Helm release of them would hold.

    Past `budget` bytes the rest is extrapolated linearly: by then every pod is larger than
    gzip's 32 KiB window, so each compresses on its own and the sizes add up.

    The stored size counts only the manifest (no chart, values or metadata): a lower
    bound for a Helm chart that renders it. Helm compresses with gzip's best level."""
    total_docs = 2 * (workers + ps)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    size = compressed = docs = 0
    largest_text = ""
    gen_seconds = 0.0
    t = time.perf_counter()
    for doc in documents(name, ns, workers, ps):
        text = "---\n" + doc
        gen_seconds += time.perf_counter() - t
        size += len(text)
        docs += 1
        if len(text) > len(largest_text):
            largest_text = text
        # The manifest is one JSON string in the release: escaped as json.dumps does.
        compressed += len(gz.compress(json.dumps(text)[1:-1].encode()))
        if size >= budget and docs % 2 == 0:
            break
        t = time.perf_counter()
    compressed += len(gz.flush())
    scale = total_docs / docs
    import yaml  # only for the one largest object

    largest = len(json.dumps(yaml.load(largest_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)),
                             separators=(",", ":")))
    stored = b64_len(round(compressed * scale))
    return Measured(gen_seconds * scale, round(size * scale), total_docs, largest, stored,
                    exact=docs == total_docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/baseline.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--workers", "-w", type=int, required=True)
    parser.add_argument("--ps", type=int, default=1)
    parser.add_argument("--namespace", "-n", default="default")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.ps < 0:
        parser.error("--workers must be at least 1 and --ps at least 0")
    out = sys.stdout
    for doc in documents(args.name, args.namespace, args.workers, args.ps):
        out.write("---\n")
        out.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
