"""The options and arguments the commands share, and the few steps that turn them into values.

The cluster's options are declared once, in tfhelm/cluster/options.py (ClusterOptions: type,
flag, help, the chart value): `cluster_flags` gives a command those flags, so `up`, `render`,
`tfconfig` and `run --local` (and `tfhelm.up()` in Python) take the same ones.

Imports here stay light (typer only): every command module imports this one when the CLI
starts, `tfhelm --help` included. What a step needs beyond that, it imports when it runs."""

from __future__ import annotations

import functools
import inspect
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any, Optional, get_type_hints

import typer

from tfhelm.cluster.options import ClusterOptions, declared

if TYPE_CHECKING:
    from tfhelm.cluster.options import Flag

ClusterName = Annotated[str, typer.Argument(help="Cluster name.")]
Output = Annotated[str, typer.Option("--output", "-o", help="table, json or yaml.")]
# The options of ClusterOptions a command takes, as `flags: o.ClusterFlags` (see cluster_flags).
ClusterFlags = dict[str, Any]


_HINTS = get_type_hints(ClusterOptions)
_LISTS = {f.name for f in fields(ClusterOptions) if f.default_factory is list}


def _annotated(name: str, flag: Flag):
    """One declared option as a Typer parameter type."""
    hint = _HINTS[name]
    if getattr(hint, "__origin__", None) is list:  # a repeatable flag; None when not given
        hint = Optional[hint]
    if flag.argument:
        return Annotated[hint, typer.Argument(help=flag.help, show_default=False)]
    return Annotated[hint, typer.Option(*flag.decls, help=flag.help)]


Namespace = _annotated("namespace", dict(declared())["namespace"])


def cluster_flags(*names: str, **defaults):
    """Give a command the declared options (all, or those named) in place of its parameter
    `flags: ClusterFlags`, which then receives them as a dict (repeatable flags not given are
    left out). `defaults` overrides the default of an option for this command."""
    chosen = [(n, f) for n, f in declared() if not names or n in names]

    def decorate(fn):
        sig = inspect.signature(fn, eval_str=True)
        params = []
        for p in sig.parameters.values():
            if p.name != "flags":
                params.append(p)
                continue
            params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=defaults.get(n),
                                         annotation=_annotated(n, f)) for n, f in chosen]

        @functools.wraps(fn)
        def command(*args, **kwargs):
            flags = {n: kwargs.pop(n) for n, _ in chosen}
            kwargs["flags"] = {n: v for n, v in flags.items() if v is not None or n not in _LISTS}
            return fn(*args, **kwargs)
        command.__signature__ = sig.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command
    return decorate
