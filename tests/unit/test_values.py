import re

import pytest

from tfhelm.chart import default_values
from tfhelm.errors import SpecError
from tfhelm.reaper import ReapConfig
from tfhelm.cluster.values import (ClusterOptions, ClusterValues, cluster_values, compute_values, generate_name,
                           script_values, setting, shape_of, split_image)


def test_options_become_values():
    v = compute_values(ClusterOptions(name="mnist", workers=8, ps=2, chief=True, gpus=1,
                                      image="tensorflow/tensorflow:2.21.0-gpu"))
    assert v["clusterName"] == "mnist"
    assert v["worker"] == {"replicas": 8, "gpus": 1}
    assert v["ps"] == {"replicas": 2}
    assert v["chief"] == {"enabled": True}
    assert v["image"] == {"repository": "tensorflow/tensorflow", "tag": "2.21.0-gpu"}
    assert "components" not in v


def test_precedence_files_then_options():
    # --set is merged into the files by Helm itself (tfhelm.valueflags; tests/chart/test_set_parity.py)
    v = compute_values(ClusterOptions(
        name="a", workers=4, value_files=[{"worker": {"replicas": 2, "gpus": 3}}, {"ps": {"replicas": 5}}]))
    assert v["worker"] == {"replicas": 4, "gpus": 3}
    assert v["ps"]["replicas"] == 5


def test_shape_uses_chart_defaults_for_what_is_not_set():
    assert shape_of({}).workers == 1 and shape_of({}).ps == 1


def test_cluster_values_hold_the_settings_read_from_the_values():
    cv = cluster_values(ClusterOptions(name="mnist", workers=3, chief=True,
                                       value_files=[{"reaper": {"grace": 5, "onFailure": "reap"}}]))
    assert (cv.shape.workers, cv.shape.ps, cv.shape.chief, cv.shape.evaluator) == (3, 1, True, False)
    assert cv.name == "mnist" and cv.user["clusterName"] == "mnist"
    assert ReapConfig.from_section(cv.effective["reaper"]) == ReapConfig(grace=5, completion="auto", on_failure="reap")
    assert cv.setting("clusterDomain", str) == default_values()["clusterDomain"]
    assert "reaper" not in cv.user.get("worker", {}) and "grace" not in cv.user.get("ps", {}), \
        "the defaults stay out of what Helm gets"


def test_a_null_removes_a_default_and_is_named():
    cv = ClusterValues.from_release({"ps": {"image": None}})
    assert cv.shape.ps == 1 and "image" not in cv.effective["ps"]
    with pytest.raises(SpecError, match="worker.replicas: is missing"):
        ClusterValues.from_release({"worker": {"replicas": None}})
    with pytest.raises(SpecError, match="chief: must be a map"):
        setting({"chief": True}, "chief.enabled", bool)


def test_a_bad_reaper_section_is_refused_when_read():
    cv = ClusterValues.from_release({"reaper": {"completion": "sometimes"}})
    assert cv.shape.workers == 1, "the shape does not depend on the reaper's settings"
    with pytest.raises(SpecError, match="'sometimes' is not a completion condition"):
        ReapConfig.from_section(cv.effective["reaper"])


@pytest.mark.parametrize("opts,field", [
    (ClusterOptions(name="a", workers=0), "--workers"),
    (ClusterOptions(name="a", ps=500), "--ps"),
    (ClusterOptions(name="A", workers=1), "--name"),
    (ClusterOptions(name="a", workers=1, gpus=-1), "--gpus"),
    (ClusterOptions(name="a", value_files=[{"worker": {"replicas": "abc"}}]), "worker.replicas"),
])
def test_bad_options_name_the_field(opts, field):
    with pytest.raises(SpecError) as exc:
        compute_values(opts)
    assert exc.value.field == field


@pytest.mark.parametrize("ref,expected", [
    ("tf", {"repository": "tf", "tag": "latest"}),
    ("reg:5000/team/tf", {"repository": "reg:5000/team/tf", "tag": "latest"}),
    ("reg:5000/team/tf:1.2", {"repository": "reg:5000/team/tf", "tag": "1.2"}),
    ("tf@sha256:" + "a" * 64, {"repository": "tf@sha256:" + "a" * 64, "tag": ""}),
])
def test_split_image(ref, expected):
    assert split_image(ref) == expected


def test_script_url_local_file_and_image_path(tmp_path):
    assert script_values("https://files.team-a/train.py") == {
        "source": "url", "url": "https://files.team-a/train.py", "script": "train.py"}
    (tmp_path / "train.py").write_text("import util\n")
    (tmp_path / "util.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    assert script_values("train.py", tmp_path) == {
        "source": "inline", "script": "train.py", "inline": "import util\n",
        "extraFiles": {"util.py": "X = 1\n"}}
    assert script_values("/app/train.py", tmp_path) == {"source": "image", "script": "/app/train.py"}


def test_too_much_local_code_is_refused(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    (tmp_path / "big.py").write_text("#" * (800 * 1024))
    with pytest.raises(SpecError, match="over the .* that fit in a ConfigMap"):
        script_values("train.py", tmp_path)


@pytest.mark.parametrize("script,problem", [
    ("ftp://host/train.py", "not an http(s) URL"),
    ("http://host/", "does not name a file"),
    ("missing.py", "not a local file"),
])
def test_bad_scripts(script, problem, tmp_path):
    with pytest.raises(SpecError, match=re.escape(problem)):
        script_values(script, tmp_path)


def test_generated_names_are_valid_and_differ():
    names = {generate_name() for _ in range(20)}
    assert len(names) > 1
    for n in names:
        compute_values(ClusterOptions(name=n, workers=1))


def test_keras_and_extra_packages_become_values():
    v = compute_values(ClusterOptions(name="m", keras="2", script="/opt/t.py", script_args=["--x"],
                                      packages=["pandas==2.2.3", "tqdm"], pip_find_links="/data/wheels"))
    assert v["keras"] == "2"
    assert v["code"] == {"source": "image", "script": "/opt/t.py", "args": ["--x"],
                         "packages": ["pandas==2.2.3", "tqdm"], "pip": {"findLinks": "/data/wheels"}}
    v = compute_values(ClusterOptions(name="m", packages=["six"], pip_index_url="https://pypi.internal/simple"))
    assert v["code"] == {"packages": ["six"], "pip": {"indexUrl": "https://pypi.internal/simple"}}
    assert "keras" not in compute_values(ClusterOptions(name="m"))


@pytest.mark.parametrize("opts, message", [
    ({"keras": "4"}, "--keras: must be one of 2, 3, auto, got '4'"),
    ({"packages": ["--pre"]}, "--pip: '--pre' is not a requirement"),
    ({"packages": [" "]}, "--pip: ' ' is not a requirement"),
    ({"pip_find_links": "/data/wheels"}, "--pip-find-links: needs the packages to install"),
    ({"packages": ["six"], "pip_index_url": "ftp://x/"}, "--pip-index-url: 'ftp://x/' is not an http"),
    ({"packages": ["six"], "pip_find_links": "wheels"}, "--pip-find-links: 'wheels' is neither"),
])
def test_bad_program_options_are_one_line(opts, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        compute_values(ClusterOptions(name="m", **opts))
