#!/usr/bin/env bash
# `make demo`: real training on the local cluster's real nodes, the way a user works.
#   1. the local cluster: the user node and two training nodes (kubelet, containerd each;
#      kwok nodes beside them)
#   2. user `demo`'s workspace on the user node: Jupyter, TensorBoard, the algorithm-file server
#   3. the example's code copied into the workspace (as if written in the notebook)
#   4. `tfhelm up --user demo`: 8 workers spread over both training nodes and 2 PS download
#      it from the file server
#   5. their loss lines as they train, then the in-cluster reaper (on by default) removes the
#      parameter servers
#   6. the notebook drives an in-graph cluster on the training nodes as its chief
# Every run trains from step 0: a run starts by removing the clusters and checkpoints an
# earlier run left. A failing step says which, and nothing of the run stays running.
# Shape: DEMO_WORKERS / DEMO_PS (default 8 and 2; about two minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DEMO_WORKERS:-8} ps=${DEMO_PS:-2} user=demo name=mnist graph=nbig
ns=tfhelm-user-$user
step="starting the local cluster"

say() { step=$1; echo ">> $step"; }
failed() {
  local code=$?
  echo "make demo: FAILED while $step (exit $code)" >&2
  [ -n "${KUBECONFIG:-}" ] && tfhelm down "$graph" -n "$ns" >/dev/null 2>&1 || true
  exit "$code"
}
trap failed ERR

eval "$(tfhelm cluster up)"
say "adding user $user's workspace"
tfhelm user add "$user"
notebook=$(kubectl -n "$ns" get pod -l app.kubernetes.io/component=notebook -o name | head -1)
nb() { kubectl -n "$ns" exec "$notebook" -- "$@"; }
workdir=$(kubectl -n "$ns" get "$notebook" -o jsonpath='{.spec.containers[0].args}' |
  python3 -c 'import json,sys; print(next(a.split("=",1)[1] for a in json.load(sys.stdin) if a.startswith("--notebook-dir=")))')

say "removing what an earlier run left (its clusters, their logs and checkpoints)"
for cluster in "$name" "$graph"; do tfhelm down "$cluster" -n "$ns" >/dev/null 2>&1 || true; done
# Their servers go only after their grace, and while they stop they still answer on the
# cluster's names: a new client must not meet them ("Unable to parse request").
kubectl -n "$ns" wait --for=delete pod -l "tfhelm.io/cluster in ($name,$graph)" --timeout=180s >/dev/null 2>&1 || true
# TensorBoard may hold the old event files open: the volume (FUSE) then keeps each as a
# .fuse_hidden file until it is closed, and rmdir says "Directory not empty". What counts is
# that no file of the old run is left under its own name.
nb sh -c 'rm -rf "$1" "$2" 2>/dev/null; ! find "$1" "$2" -type f ! -name ".fuse_hidden*" 2>/dev/null | grep -q .' \
  sh "/log/$name" "/log/$graph"

say "copying the example into $user's notebook ($workdir)"
for f in examples/ps_between_graph.py examples/ps_in_graph.py examples/tfhelm_example.py; do
  kubectl -n "$ns" cp "$f" "${notebook#pod/}:$workdir/$(basename "$f")"
done
echo "   the workers fetch it from the file server"

say "installing $name: $workers workers and $ps PS on the training nodes"
# The workers prefer nodes with fewer of them: spread over both training nodes.
spread='{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{
  "labelSelector":{"matchLabels":{"tfhelm.io/cluster":"'$name'","app.kubernetes.io/component":"worker"}},
  "topologyKey":"kubernetes.io/hostname"}}]}}'
tfhelm up --user "$user" --name "$name" --workers "$workers" --ps "$ps" --script ps_between_graph.py \
  --set-json "worker.affinity=$spread" --set reaper.grace=5 -- --steps 2000 --checkpoint-every 200

say "following the workers' output (loss lines) as they train"
selector="tfhelm.io/cluster=$name,app.kubernetes.io/component=worker"
until [ "$(kubectl -n "$ns" get pods -l "$selector" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
           grep -cE 'Running|Succeeded|Failed')" -ge "$workers" ]; do sleep 1; done
kubectl -n "$ns" logs -f --prefix --max-log-requests "$workers" -l "$selector" -c tensorflow |
  grep --line-buffered -E 'loss|session ready|done at|Error' || true

say "waiting for the workers' Job to complete and the in-cluster reaper (grace 5 s) to remove the PS"
kubectl -n "$ns" wait --for=condition=Complete job -l "tfhelm.io/cluster=$name,tfhelm.io/role=worker" --timeout=600s
for _ in $(seq 300); do
  [ -z "$(kubectl -n "$ns" get deployments -l "tfhelm.io/cluster=$name,tfhelm.io/role=ps" -o name)" ] && break
  sleep 1
done
[ -z "$(kubectl -n "$ns" get deployments -l "tfhelm.io/cluster=$name,tfhelm.io/role=ps" -o name)" ]
tfhelm status "$name" -n "$ns"   # its NODE column: the workers ran on both training nodes

say "training in-graph from the notebook (user node): 2 worker and 1 PS servers on the training nodes"
tfhelm up --user "$user" --name "$graph" --in-graph --workers 2 --ps 1 >/dev/null
until [ "$(kubectl -n "$ns" get pods -l "tfhelm.io/cluster=$graph" -o name | wc -l)" -ge 3 ]; do sleep 1; done
kubectl -n "$ns" wait --for=condition=Ready pod -l "tfhelm.io/cluster=$graph" --timeout=300s >/dev/null
out=$(mktemp)
nb sh -c '
  me="$(python -c "import socket; print(socket.gethostbyname(socket.gethostname()))"):2222"
  TF_CONFIG="$(tfhelm tfconfig '"$graph"' --client "$me")" TFHELM_DATA_DIR=/data TFHELM_LOG_DIR=/log/'"$graph"' \
    python "$1/ps_in_graph.py" --steps 200 --checkpoint-every 50 2>&1' sh "$workdir" |
  tee "$out" | grep --line-buffered -E '^(step|trained|Traceback|[A-Za-z]*Error)' || true
if ! grep -q '^trained' "$out"; then
  echo "the notebook's in-graph training did not finish; its last lines:" >&2
  tail -n 20 "$out" >&2
  rm -f "$out"
  false
fi
rm -f "$out"
tfhelm down "$graph" -n "$ns" >/dev/null 2>&1
trap - ERR
echo
echo "Trained for real on the local cluster's training nodes. Open the run:"
tfhelm user url "$user"
echo "  (TensorBoard shows the run '$name'; the notebook holds its code)"
echo "Explore with:  export KUBECONFIG=$KUBECONFIG"
echo "Stop the local cluster:  make cluster-down"
