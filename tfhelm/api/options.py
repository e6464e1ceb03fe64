"""The options of a cluster, read: the steps between what was asked (ClusterOptions, declared
in tfhelm/cluster/options.py) and the values (tfhelm/cluster/values.py) that need a file,
Helm or the kubeconfig: values files, --set*, a user's workspace, the namespace."""

from __future__ import annotations

from tfhelm.cluster.options import ClusterOptions


def namespace_of(namespace: str | None) -> str:
    """`-n NAMESPACE`, else the kubeconfig's. Only the latter loads the kubernetes client,
    so offline commands given `-n` start fast."""
    from tfhelm.cluster.spec import validate_namespace

    if namespace is not None:
        return validate_namespace(namespace)
    from tfhelm.kubeconfig import current_namespace

    return validate_namespace(current_namespace(), "namespace of the kubeconfig's context")


def resolve(o: ClusterOptions, user_queue: str | None = None) -> ClusterOptions:
    """ClusterOptions ready for the values: values files (paths, or dicts from Python) and
    --set* merged by Helm's rules; with --user, the user's namespace, volumes and file server
    (and `user_queue`, the workspace's Kueue LocalQueue) underneath."""
    from dataclasses import replace

    from tfhelm import valueflags
    from tfhelm.errors import SpecError
    from tfhelm.workspace import userspec

    files = [f if isinstance(f, dict) else valueflags.load_file(f) for f in o.values]
    namespace, script, find_links = o.namespace, o.script, o.pip_find_links
    if o.user:  # the user's namespace, volumes and file server; -f and --set still override
        user_ns = userspec.user_namespace(o.user)
        if namespace and namespace != user_ns:
            raise SpecError("--namespace", f"user {o.user}'s clusters run in {user_ns}", "drop --namespace")
        if o.name == userspec.RELEASE:
            raise SpecError("--name", f"'{o.name}' is the user's workspace release", "choose another name")
        files.insert(0, userspec.cluster_values_for_user(o.user, script, user_queue))
        namespace, script = user_ns, None
        if find_links:  # a directory on their code volume, through their file server
            find_links = userspec.files_dir_url(o.user, find_links, "--pip-find-links")
    sets = valueflags.SetFlags(list(o.set), list(o.set_string), list(o.set_json))
    return replace(o, namespace=namespace_of(namespace), script=script, pip_find_links=find_links,
                   user=None, values=[], set=[], set_string=[], set_json=[],
                   value_files=[*o.value_files, valueflags.merge(files, sets)])


def in_workspace(options: dict) -> dict:
    """The Python API's options inside a user's workspace (a notebook): the user is theirs
    unless `user` is given (None: no workspace), and a script in the work directory is
    taken from there as it is (tfhelm/api/workspace.py)."""
    from tfhelm.api import workspace

    ws = workspace.current()
    if ws is None or "user" in options:
        return options
    found = {**options, "user": ws.user}
    if found.get("script"):
        found["script"] = ws.script_path(found["script"])
    return found
