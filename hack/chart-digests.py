#!/usr/bin/env python3
"""Record the digest of each chart's current version in charts/digests.json (the version
policy: a chart version, once recorded, always renders the same; a change needs a bump).
`make chart-digests` runs it; it refuses to re-record a version with a different digest,
unless CHANGELOG.md still calls that version unreleased (nobody can have it yet)."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tfhelm.chart import chart_digest, chart_version  # noqa: E402

LOCK = REPO / "charts" / "digests.json"


def unreleased(version: str) -> bool:
    return f"## {version} (unreleased)" in (REPO / "CHANGELOG.md").read_text()


def main() -> int:
    lock = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    for chart in ("tf-cluster", "user-env"):
        version, digest = chart_version(chart), chart_digest(chart, REPO / "charts")
        known = lock.setdefault(chart, {}).get(version)
        if known and known != digest and not unreleased(version):
            print(f"charts/{chart} changed since version {version} was recorded: bump `version` in "
                  f"charts/{chart}/Chart.yaml (and CHANGELOG.md), then run this again", file=sys.stderr)
            return 1
        lock[chart][version] = digest
    LOCK.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    print(f"recorded in {LOCK.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
