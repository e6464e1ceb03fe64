"""The notebook image's Jupyter settings (hack/images/build.py installs this file as
/etc/jupyter/jupyter_server_config.py): tfhelm's example scripts and notebook (the wheel's
`tfhelm.examples`) are copied into the work directory's `examples/` when it has none, and
the kernels learn where the work directory is (TFHELM_CODE_DIR: the code volume the user's
file server serves, so `tfhelm.up(script=...)` finds a script's path there). Never stops
Jupyter from starting."""

import os
import sys
from pathlib import Path

ROOT_FLAGS = ("--notebook-dir=", "--ServerApp.root_dir=", "--ServerApp.notebook_dir=")


def work_dir() -> Path:
    """The directory Jupyter serves: the chart passes `--notebook-dir=`."""
    for arg in sys.argv[1:]:
        for flag in ROOT_FLAGS:
            if arg.startswith(flag):
                return Path(arg[len(flag):])
    return Path.cwd()


try:
    root = work_dir()
    os.environ.setdefault("TFHELM_CODE_DIR", str(root))  # the kernels inherit it
    from importlib.resources import files

    source, dest = files("tfhelm.examples"), root / "examples"
    if not dest.exists():
        dest.mkdir(parents=True)
        for item in source.iterdir():
            if item.is_file() and item.name.endswith((".py", ".ipynb", ".md")):
                (dest / item.name).write_bytes(item.read_bytes())
except Exception as err:  # noqa: BLE001 - Jupyter starts all the same
    print(f"tfhelm: the examples were not copied into the work directory: {err}", file=sys.stderr)
