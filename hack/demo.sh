#!/usr/bin/env bash
# `make demo`: real training on the local cluster's real node, the way a user works.
#   1. the local cluster (a real node: kubelet, containerd; kwok nodes beside it)
#   2. user `demo`'s workspace: Jupyter, TensorBoard and the algorithm-file server
#   3. the example's code copied into the workspace (as if written in the notebook)
#   4. `tfhelm up --user demo`: 8 workers and 2 PS download it from the file server
#   5. their loss lines as they train, then the reaper removes the parameter servers
# Shape: DEMO_WORKERS / DEMO_PS (default 8 and 2; about a minute on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DEMO_WORKERS:-8} ps=${DEMO_PS:-2} user=demo name=mnist
ns=tfhelm-user-$user

eval "$(tfhelm cluster up)"
tfhelm user add "$user"
notebook=$(kubectl -n "$ns" get pod -l app.kubernetes.io/component=notebook -o name | head -1)
workdir=$(kubectl -n "$ns" get "$notebook" -o jsonpath='{.spec.containers[0].args}' |
  python3 -c 'import json,sys; print(next(a.split("=",1)[1] for a in json.load(sys.stdin) if a.startswith("--notebook-dir=")))')
for f in examples/ps_between_graph.py examples/tfhelm_example.py; do
  kubectl -n "$ns" cp "$f" "${notebook#pod/}:$workdir/$(basename "$f")"
done
echo ">> copied the example into $user's notebook ($workdir): the workers fetch it from the file server"

# A rerun trains again from the kept checkpoint; --replace keeps nothing of the old Jobs.
tfhelm down "$name" -n "$ns" >/dev/null 2>&1 || true
tfhelm up --user "$user" --name "$name" --workers "$workers" --ps "$ps" --script ps_between_graph.py \
  -- --steps 2000 --checkpoint-every 200

echo ">> the workers' output (loss lines) as they train:"
selector="tfhelm.io/cluster=$name,app.kubernetes.io/component=worker"
until [ "$(kubectl -n "$ns" get pods -l "$selector" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
           grep -cE 'Running|Succeeded|Failed')" -ge "$workers" ]; do sleep 1; done
kubectl -n "$ns" logs -f --prefix --max-log-requests "$workers" -l "$selector" -c tensorflow | grep --line-buffered -E 'loss|session ready|done at|Error' || true

tfhelm reap "$name" -n "$ns" --grace 5
tfhelm status "$name" -n "$ns"
echo
echo "Trained for real on the local cluster's real node. Open the run:"
tfhelm user url "$user"
echo "  (TensorBoard shows the run '$name'; the notebook holds its code)"
echo "Explore with:  export KUBECONFIG=$KUBECONFIG"
echo "Stop the local cluster:  make cluster-down"
