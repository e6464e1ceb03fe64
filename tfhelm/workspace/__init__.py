"""A user's workspace: Jupyter, TensorBoard and the file server in a namespace of its own
(charts/user-env), and the TF clusters the user runs there.

- `rules`: names, namespaces, quotas and chart values, without any I/O.
- `actions`: what `tfhelm user` does on the cluster (add, remove, urls, list), through Kube
  and Helm.
"""
