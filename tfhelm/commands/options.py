"""The options and arguments the commands share, each defined once as an `Annotated` type,
and the few steps that turn them into values.

Imports here stay light (typer only): every command module imports this one when the CLI
starts, `tfhelm --help` included. What a step needs beyond that, it imports when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from tfhelm.cluster.values import ClusterOptions

ClusterName = Annotated[str, typer.Argument(help="Cluster name.")]
Namespace = Annotated[Optional[str], typer.Option(
    "--namespace", "-n", help="Namespace (default: the kubeconfig's).")]
Output = Annotated[str, typer.Option("--output", "-o", help="table, json or yaml.")]

# The cluster's shape and contents (up, render, tfconfig).
Workers = Annotated[Optional[int], typer.Option("--workers", "-w", help="Worker tasks (an Indexed Job).")]
Ps = Annotated[Optional[int], typer.Option(
    "--ps", help="Parameter server tasks (a Deployment + Service each).")]
Chief = Annotated[Optional[bool], typer.Option("--chief/--no-chief", help="Add a chief that drives the cluster.")]
Evaluator = Annotated[Optional[bool], typer.Option("--evaluator/--no-evaluator", help="Add an evaluator task.")]
InGraph = Annotated[Optional[bool], typer.Option(
    "--in-graph/--between-graph", help="in-graph: the chief runs the script, workers and PS only serve.")]
Image = Annotated[Optional[str], typer.Option(
    "--image", help="Image of every task, e.g. tensorflow/tensorflow:2.21.0.")]
Script = Annotated[Optional[str], typer.Option(
    "--script", help="http(s) URL of the script, a local file, or an absolute path in the image.")]
Gpus = Annotated[Optional[int], typer.Option("--gpus", help="GPUs per worker (nvidia.com/gpu).")]
User = Annotated[Optional[str], typer.Option(
    "--user", help="Run in this user's workspace (tfhelm user add): their namespace and volumes; "
    "a relative --script is a file on their code volume.")]
Keras = Annotated[Optional[str], typer.Option(
    "--keras", help="Keras the scripts get: 2 (TF_USE_LEGACY_KERAS=1 in every task; the image needs "
    "tf-keras), 3, or auto (the image and the script decide).")]
Pip = Annotated[Optional[list[str]], typer.Option(
    "--pip", help="An extra package for the run, e.g. pandas==2.2.3 (repeatable): installed once "
    "into the data volume that every task shares.")]
PipIndexUrl = Annotated[Optional[str], typer.Option(
    "--pip-index-url", help="The package index for --pip (default: the image's pip settings).")]
PipFindLinks = Annotated[Optional[str], typer.Option(
    "--pip-find-links", help="A directory of wheels for --pip: an http(s) URL or an absolute path "
    "in the tasks; with --user, a directory on the user's code volume. Without --pip-index-url, "
    "only these wheels are used (works offline).")]
ValuesFiles = Annotated[Optional[list[Path]], typer.Option("--values", "-f", help="Values file (repeatable).")]
Sets = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Set a chart value, e.g. worker.backoffLimitPerIndex=1 (repeatable; Helm's rules).")]
SetStrings = Annotated[Optional[list[str]], typer.Option(
    "--set-string", help="Set a chart value as a string (repeatable).")]
SetJsons = Annotated[Optional[list[str]], typer.Option(
    "--set-json", help="Set a chart value to JSON, e.g. worker.env='[...]' (repeatable).")]
ScriptArgs = Annotated[Optional[list[str]], typer.Argument(
    help="Arguments for the script, after `--`.", show_default=False)]


def namespace_of(namespace: str | None) -> str:
    """`-n NAMESPACE`, else the kubeconfig's. Only the latter loads the kubernetes client,
    so offline commands given `-n` start fast."""
    from tfhelm.cluster.spec import validate_namespace

    if namespace is not None:
        return validate_namespace(namespace)
    from tfhelm.kube import current_namespace

    return validate_namespace(current_namespace(), "namespace of the kubeconfig's context")


def cluster_options(*, name: str, namespace: str | None, workers: int | None = None,
                    ps: int | None = None, chief: bool | None = None, evaluator: bool | None = None,
                    in_graph: bool | None = None, image: str | None = None, script: str | None = None,
                    gpus: int | None = None, user: str | None = None, keras: str | None = None,
                    pip: list[str] | None = None, pip_index_url: str | None = None,
                    pip_find_links: str | None = None,
                    values_files: list[Path] | None = None, sets: list[str] | None = None,
                    set_strings: list[str] | None = None, set_jsons: list[str] | None = None,
                    script_args: list[str] | None = None) -> ClusterOptions:
    """The options of a cluster command as ClusterOptions: values files and --set* merged by
    Helm's rules; with --user, the user's namespace, volumes and file server underneath."""
    from tfhelm import valueflags
    from tfhelm.cluster.values import ClusterOptions
    from tfhelm.errors import SpecError
    from tfhelm.workspace import rules

    files = [valueflags.load_file(f) for f in values_files or []]
    if user:  # the user's namespace, volumes and file server; -f and --set still override
        user_ns = rules.user_namespace(user)
        if namespace and namespace != user_ns:
            raise SpecError("--namespace", f"user {user}'s clusters run in {user_ns}", "drop --namespace")
        if name == rules.RELEASE:
            raise SpecError("--name", f"'{name}' is the user's workspace release", "choose another name")
        files.insert(0, rules.cluster_values_for_user(user, script))
        namespace, script = user_ns, None
        if pip_find_links:  # a directory on their code volume, through their file server
            pip_find_links = rules.files_dir_url(user, pip_find_links, "--pip-find-links")
    flags = valueflags.SetFlags(list(sets or []), list(set_strings or []), list(set_jsons or []))
    return ClusterOptions(
        name=name, namespace=namespace_of(namespace), workers=workers, ps=ps, chief=chief,
        evaluator=evaluator, in_graph=in_graph, image=image, script=script, gpus=gpus, keras=keras,
        packages=list(pip or []), pip_index_url=pip_index_url, pip_find_links=pip_find_links,
        value_files=[valueflags.merge(files, flags)], script_args=list(script_args or []))
