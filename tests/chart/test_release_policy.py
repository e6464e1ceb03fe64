"""The release policy: one version for tfhelm and both charts, a recorded chart version
always renders the same (a change needs a bump), a CHANGELOG entry per version, and
Artifact Hub metadata that matches the chart."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tfhelm.chart import chart_digest, chart_path, default_values

REPO = Path(__file__).resolve().parents[2]
CHARTS = ("tf-cluster", "user-env")


def meta(chart: str) -> dict:
    return yaml.safe_load((chart_path(chart) / "Chart.yaml").read_text())


def package_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("-")[0].split("."))


@pytest.mark.parametrize("chart", CHARTS)
def test_chart_version_is_tfhelms(chart):
    assert meta(chart)["version"] == package_version()


@pytest.mark.parametrize("chart", CHARTS)
def test_templates_do_not_change_without_a_version_bump(chart):
    lock = json.loads((REPO / "charts" / "digests.json").read_text())[chart]
    version = meta(chart)["version"]
    assert version in lock, (f"charts/{chart} version {version} is not recorded: run `make chart-digests`")
    assert chart_digest(chart) == lock[version], (
        f"charts/{chart} changed since version {version} was recorded: bump `version` in "
        f"charts/{chart}/Chart.yaml, pyproject.toml and CHANGELOG.md, then run `make chart-digests`")
    assert semver(version) == max(semver(v) for v in lock), "the chart version went backwards"


def test_digest_sees_a_template_change(tmp_path):
    """The digest is not blind: one changed byte in a template changes it; README does not."""
    import shutil

    shutil.copytree(chart_path("tf-cluster"), tmp_path / "tf-cluster")
    before = chart_digest("tf-cluster", tmp_path)
    (tmp_path / "tf-cluster" / "README.md").write_text("edited")
    assert chart_digest("tf-cluster", tmp_path) == before
    job = tmp_path / "tf-cluster" / "templates" / "worker" / "job.yaml"
    job.write_text(job.read_text() + " ")
    assert chart_digest("tf-cluster", tmp_path) != before


def test_changelog_has_the_current_version():
    text = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(package_version())}\b", text, re.M)


@pytest.mark.parametrize("chart", CHARTS)
def test_artifact_hub_metadata(chart):
    m = meta(chart)
    assert m["icon"].startswith("https://") and m["sources"] and m["home"]
    assert all(x.get("name") and (x.get("email") or x.get("url")) for x in m["maintainers"])
    ann = m["annotations"]
    assert ann["artifacthub.io/category"] == "ai-machine-learning"
    changes = yaml.safe_load(ann["artifacthub.io/changes"])
    assert changes and all(c["kind"] in ("added", "changed", "deprecated", "removed", "fixed", "security")
                           for c in changes)
    for link in yaml.safe_load(ann["artifacthub.io/links"]):
        assert link["url"].startswith("https://")


def _default_images(chart: str) -> set[str]:
    v = default_values(chart)
    if chart == "tf-cluster":  # the reaper runs in the tasks' image
        assert not v["reaper"]["image"]
        return {f"{v['image']['repository']}:{v['image']['tag']}"}
    return {f"{v[k]['image']['repository']}:{v[k]['image']['tag']}" for k in ("notebook", "tensorboard", "codeServer")}


@pytest.mark.parametrize("chart", CHARTS)
def test_artifact_hub_images_are_the_default_images(chart):
    listed = {i["image"] for i in yaml.safe_load(meta(chart)["annotations"]["artifacthub.io/images"])}
    assert listed == _default_images(chart)
