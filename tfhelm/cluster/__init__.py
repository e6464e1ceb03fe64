"""One TF cluster (charts/tf-cluster): its names, values and releases, its state and logs.

Pure, no I/O:
- `spec`: names, hosts and TF_CONFIG, as the chart computes them.
- `values`: options -> chart values; a release's values normalized once (ClusterValues).
- `code_configmap`: a local script as a ConfigMap of its own, named by its content.
- `manifests`: what a rendered release holds (the cluster spec, Job names).
- `training`: when a training is done, the one rule (status, `up --wait`, the reaper).
- `report`: the rows and summary `tfhelm status` and `tfhelm list` show.

Through Helm and Kube:
- `objects`: which of the API's objects are the cluster's (by its labels): its pods (JSON),
  Jobs, Deployments, PVCs and the reaper's Events (read like models), where its pods ran.
- `deploy`: install, upgrade, undo, remove (`tfhelm up`, `down`); `lock`: its install lock.
- `installed`: a cluster's releases as Helm lists them, and what an upgrade changes.
- `gitops`: the same values as files for Argo CD and Flux (`tfhelm render`).
- `feed`: a list-then-watch of one kind of object in a thread (`up --wait`, the reaper).
- `progress`: `up --wait` at a console; `tasklogs`: every task's log (`tfhelm logs`).
- `localrun`: the cluster's tasks as processes on this machine (`tfhelm run --local`).
"""
