#!/usr/bin/env bash
# `make demo`: real training on the local cluster's real nodes, the way a user works.
#   1. the local cluster: the user node and two training nodes (kubelet, containerd each;
#      kwok nodes beside them)
#   2. user `demo`'s workspace on the user node: Jupyter, TensorBoard, the algorithm-file server
#   3. the example's code copied into the workspace (as if written in the notebook)
#   4. `tfhelm up --user demo`: 8 workers spread over both training nodes and 2 PS download
#      it from the file server
#   5. their loss lines as they train, then the reaper removes the parameter servers
#   6. the notebook drives an in-graph cluster on the training nodes as its chief
# Shape: DEMO_WORKERS / DEMO_PS (default 8 and 2; about two minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DEMO_WORKERS:-8} ps=${DEMO_PS:-2} user=demo name=mnist
ns=tfhelm-user-$user

eval "$(tfhelm cluster up)"
tfhelm user add "$user"
notebook=$(kubectl -n "$ns" get pod -l app.kubernetes.io/component=notebook -o name | head -1)
workdir=$(kubectl -n "$ns" get "$notebook" -o jsonpath='{.spec.containers[0].args}' |
  python3 -c 'import json,sys; print(next(a.split("=",1)[1] for a in json.load(sys.stdin) if a.startswith("--notebook-dir=")))')
for f in examples/ps_between_graph.py examples/ps_in_graph.py examples/tfhelm_example.py; do
  kubectl -n "$ns" cp "$f" "${notebook#pod/}:$workdir/$(basename "$f")"
done
echo ">> copied the example into $user's notebook ($workdir): the workers fetch it from the file server"

# A rerun trains again from the kept checkpoint; --replace keeps nothing of the old Jobs.
tfhelm down "$name" -n "$ns" >/dev/null 2>&1 || true
# The workers prefer nodes with fewer of them: spread over both training nodes.
spread='{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{
  "labelSelector":{"matchLabels":{"tfhelm.io/cluster":"'$name'","app.kubernetes.io/component":"worker"}},
  "topologyKey":"kubernetes.io/hostname"}}]}}'
tfhelm up --user "$user" --name "$name" --workers "$workers" --ps "$ps" --script ps_between_graph.py \
  --set-json "worker.affinity=$spread" -- --steps 2000 --checkpoint-every 200

echo ">> the workers' output (loss lines) as they train:"
selector="tfhelm.io/cluster=$name,app.kubernetes.io/component=worker"
until [ "$(kubectl -n "$ns" get pods -l "$selector" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
           grep -cE 'Running|Succeeded|Failed')" -ge "$workers" ]; do sleep 1; done
kubectl -n "$ns" logs -f --prefix --max-log-requests "$workers" -l "$selector" -c tensorflow | grep --line-buffered -E 'loss|session ready|done at|Error' || true

tfhelm reap "$name" -n "$ns" --grace 5
tfhelm status "$name" -n "$ns"   # its NODE column: the workers ran on both training nodes

echo ">> in-graph from the notebook (user node): 2 worker and 1 PS servers on the training nodes"
tfhelm down nbig -n "$ns" >/dev/null 2>&1 || true
tfhelm up --user "$user" --name nbig --in-graph --workers 2 --ps 1 >/dev/null
until [ "$(kubectl -n "$ns" get pods -l tfhelm.io/cluster=nbig -o name | wc -l)" -ge 3 ]; do sleep 1; done
kubectl -n "$ns" wait --for=condition=Ready pod -l tfhelm.io/cluster=nbig --timeout=300s >/dev/null
kubectl -n "$ns" exec "$notebook" -- sh -c '
  me="$(python -c "import socket; print(socket.gethostbyname(socket.gethostname()))"):2222"
  TF_CONFIG="$(tfhelm tfconfig nbig --client "$me")" TFHELM_DATA_DIR=/data TFHELM_LOG_DIR=/log/nbig \
    python "$1/ps_in_graph.py" --steps 200 --checkpoint-every 50 2>&1' sh "$workdir" |
  grep --line-buffered -E '^(step|trained|Traceback|[A-Za-z]*Error)'
tfhelm down nbig -n "$ns" >/dev/null 2>&1
echo
echo "Trained for real on the local cluster's training nodes. Open the run:"
tfhelm user url "$user"
echo "  (TensorBoard shows the run '$name'; the notebook holds its code)"
echo "Explore with:  export KUBECONFIG=$KUBECONFIG"
echo "Stop the local cluster:  make cluster-down"
