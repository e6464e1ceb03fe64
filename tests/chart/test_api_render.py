"""The Python API renders with the real chart, as the CLI does, also where an event loop
already runs in the calling thread (a Jupyter kernel's cell): Helm's async calls are run to
their end in a thread of their own there."""

from __future__ import annotations

import asyncio

import yaml
from typer.testing import CliRunner

import tfhelm
from tfhelm.cli import app


def test_render_from_python_is_the_clis_render():
    options = ["--workers", "3", "--ps", "1", "-n", "team-a", "--set", "worker.backoffLimitPerIndex=2"]
    cli = CliRunner().invoke(app, ["render", "m", *options])
    assert cli.exit_code == 0, cli.output
    api = tfhelm.render("m", workers=3, ps=1, namespace="team-a", set=["worker.backoffLimitPerIndex=2"])
    assert api == cli.stdout


def test_helm_runs_inside_a_running_event_loop():
    async def cell():  # what a notebook cell is: code run while the kernel's loop runs
        return tfhelm.render("m", workers=2, ps=1, namespace="team-a")
    docs = [d for d in yaml.safe_load_all(asyncio.run(cell())) if d]
    assert {d["kind"] for d in docs} >= {"Job", "Deployment", "Service"}
