"""Put the checkout's development package (tfhelm_dev/, not in the wheel) on this Python's path
and register its `tfhelm cluster` commands with tfhelm: a `.pth` file naming the checkout, and
a minimal installed distribution `tfhelm-dev` whose one entry point (group `tfhelm.commands`,
which tfhelm's CLI reads) is tfhelm_dev.command:app. `make install` runs it with the venv's
Python; run again, it rewrites the same files."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAME, VERSION = "tfhelm_dev", "0"


def main() -> None:
    site = Path(sysconfig.get_paths()["purelib"])
    (site / "tfhelm-dev.pth").write_text(f"{REPO}\n")
    for old in site.glob(f"{NAME}-*.dist-info"):
        shutil.rmtree(old)
    info = site / f"{NAME}-{VERSION}.dist-info"
    info.mkdir()
    files = {"METADATA": f"Metadata-Version: 2.1\nName: tfhelm-dev\nVersion: {VERSION}\n"
                         "Summary: the development cluster of a tfhelm checkout\n",
             "entry_points.txt": "[tfhelm.commands]\ncluster = tfhelm_dev.command:app\n",
             "INSTALLER": "tfhelm make install\n"}
    for name, text in files.items():
        (info / name).write_text(text)
    (info / "RECORD").write_text("".join(f"{info.name}/{n},,\n" for n in [*files, "RECORD"]) + "tfhelm-dev.pth,,\n")
    print(f"tfhelm_dev: {REPO} on the path, `tfhelm cluster` registered ({info})")


if __name__ == "__main__":
    main()
