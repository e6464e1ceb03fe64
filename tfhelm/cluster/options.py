"""What a TF cluster is asked for, declared once: each option's type, default, command-line
flag and help, and the chart value it sets. `tfhelm up`, `render`, `tfconfig` and `run
--local` build their flags from these declarations (tfhelm/commands/options.py), the Python
API its keywords (`tfhelm.up(name, workers=...)`), tfhelm/cluster/values.py the values.

Adding an option that sets a chart value is one line here, e.g.

    cpu: str | None = option("--cpu", help="CPU per worker, e.g. 2.", value="worker.cpu")

plus, when the value needs checking or converting, its converter in values.py. Light on
purpose (no chart, no contract): the CLI reads it at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path


# `tfhelm run --local`: seconds the other script tasks get to finish once training is done,
# then SIGTERM (here, not in localrun.py, so the CLI starts without loading the local runner).
FINISH_GRACE = 10.0


@dataclass(frozen=True)
class Flag:
    """How one option of ClusterOptions is given and what it sets.

    `value`: the chart value it sets (a dotted path), or None when the option is read
    elsewhere (the namespace, --user, -f and --set*); `convert`: the name of a function in
    tfhelm/cluster/values.py, `f(value, options, flag)`, that makes the chart value from the
    option's and raises SpecError naming `flag` on bad input (None: leave the chart's value);
    `argument`: positional (the script's arguments)."""

    decls: tuple[str, ...]
    help: str
    value: str | None = None
    convert: str | None = None
    argument: bool = False

    @property
    def name(self) -> str:
        """The flag as error messages name it: `--workers`, `--in-graph`."""
        return self.decls[0].split("/")[0] if self.decls else "SCRIPT_ARGS"


def option(*decls: str, help: str, value: str | None = None, convert=None, list_: bool = False,
           argument: bool = False):
    """A field of ClusterOptions with its flag; None (or an empty list) means "not given"."""
    meta = {"flag": Flag(decls, help, value, convert, argument)}
    return field(default_factory=list, metadata=meta) if list_ else field(default=None, metadata=meta)


def declared(cls_or_options=None) -> list[tuple[str, Flag]]:
    """(field name, Flag) of every declared option, in declaration order (the CLI's order)."""
    return [(f.name, f.metadata["flag"]) for f in fields(cls_or_options or ClusterOptions) if "flag" in f.metadata]


# ---------------------------------------------------------------- the declaration

@dataclass
class ClusterOptions:
    """What a TF cluster is asked for; None (or nothing) means "leave the chart's value".

    `user`, `values` and `set*` are read before the values are computed (the API's and the
    CLI's `resolve` turn them into `value_files` and the user's namespace)."""

    name: str
    namespace: str | None = option("--namespace", "-n", help="Namespace (default: the kubeconfig's).")
    workers: int | None = option("--workers", "-w", help="Worker tasks (an Indexed Job).",
                                 value="worker.replicas")
    ps: int | None = option("--ps", help="Parameter server tasks (a Deployment + Service each).",
                            value="ps.replicas")
    chief: bool | None = option("--chief/--no-chief", help="Add a chief that drives the cluster.",
                                value="chief.enabled")
    evaluator: bool | None = option("--evaluator/--no-evaluator", help="Add an evaluator task.",
                                    value="evaluator.enabled")
    in_graph: bool | None = option(
        "--in-graph/--between-graph", help="in-graph: the chief runs the script, workers and PS only serve.",
        value="mode", convert="graph_mode")
    image: str | None = option("--image", help="Image of every task, e.g. tensorflow/tensorflow:2.21.0.",
                               value="image", convert="image_value")
    script: str | None = option(
        "--script", help="http(s) URL of the script, a local file, or an absolute path in the image.",
        value="code", convert="script_value")
    gpus: int | None = option("--gpus", help="GPUs per worker (nvidia.com/gpu).", value="worker.gpus",
                              convert="non_negative")
    user: str | None = option(
        "--user", help="Run in this user's workspace (tfhelm user add): their namespace and volumes; "
        "a relative --script is a file on their code volume.")
    keras: str | None = option(
        "--keras", help="Keras the scripts get: 2 (TF_USE_LEGACY_KERAS=1 in every task; the image needs "
        "tf-keras), 3, or auto (the image and the script decide).", value="keras", convert="keras_value")
    packages: list[str] = option(
        "--pip", help="An extra package for the run, e.g. pandas==2.2.3 (repeatable): installed once "
        "into the data volume that every task shares.", value="code.packages", convert="requirements",
        list_=True)
    pip_index_url: str | None = option(
        "--pip-index-url", help="The package index for --pip (default: the image's pip settings).",
        value="code.pip.indexUrl", convert="index_url")
    pip_find_links: str | None = option(
        "--pip-find-links", help="A directory of wheels for --pip: an http(s) URL or an absolute path "
        "in the tasks; with --user, a directory on the user's code volume. Without --pip-index-url, "
        "only these wheels are used (works offline).", value="code.pip.findLinks", convert="find_links")
    queue: str | None = option(
        "--queue", help="Kueue LocalQueue the whole cluster waits in and is admitted from as one "
        "(chart queue.name; with --user, the workspace's queue by default).", value="queue.name",
        convert="kueue_name")
    priority: str | None = option(
        "--priority", help="Kueue WorkloadPriorityClass of the queued cluster (chart queue.priorityClass).",
        value="queue.priorityClass", convert="kueue_name")
    values: list[Path] = option("--values", "-f", help="Values file (repeatable).", list_=True)
    set: list[str] = option(
        "--set", help="Set a chart value, e.g. worker.backoffLimitPerIndex=1 (repeatable; Helm's rules).",
        list_=True)
    set_string: list[str] = option("--set-string", help="Set a chart value as a string (repeatable).",
                                   list_=True)
    set_json: list[str] = option(
        "--set-json", help="Set a chart value to JSON, e.g. worker.env='[...]' (repeatable).", list_=True)
    script_args: list[str] = option(help="Arguments for the script, after `--`.", value="code.args",
                                    convert="script_arguments", list_=True, argument=True)
    # The user's chart values, lowest precedence first: -f files, and the result of
    # tfhelm.valueflags.merge() (files and --set* merged by Helm's rules). Made by `resolve`.
    value_files: list[dict] = field(default_factory=list)
