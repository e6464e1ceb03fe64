"""Hostile input, pure Python side: every case is one SpecError (exit 2) naming the thing
and the fix, or a typed error with its documented exit code; never a traceback."""

from __future__ import annotations

import json
import threading

import pytest
import typer
from kubernetes.client.rest import ApiException
from typer.testing import CliRunner
from urllib3.exceptions import MaxRetryError, NewConnectionError

from tfhelm import apierrors, errors, reaper, valueflags
from tfhelm.cluster import spec
from tfhelm.cluster.values import ClusterOptions, compute_values, script_values, shape_of
from tfhelm.console import OneLineErrors, cli_errors
from tfhelm.errors import SpecError
from tfhelm.reaper import default_config

from .test_reaper import FakeClient, fast, job


# ----------------------------------------------------------------------------- values files

def test_a_billion_laughs_values_file_is_refused_without_expanding_it(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]  # 10^10 leaves
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError, match=r"bomb.yaml expands to more than 200000 values") as exc:
        valueflags.load_file(bomb)
    assert exc.value.field == "--values"


def test_a_self_referencing_alias_is_refused(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.write_text("a: &x [*x]\n")
    with pytest.raises(SpecError, match="expands to more than"):
        valueflags.load_file(loop)


def test_aliases_in_an_ordinary_file_are_fine(tmp_path):
    f = tmp_path / "v.yaml"
    f.write_text("res: &r {requests: {cpu: 1}}\nworker: {resources: *r}\nps: {resources: *r}\n")
    assert valueflags.load_file(f)["ps"]["resources"] == {"requests": {"cpu": 1}}


@pytest.mark.parametrize("content,problem", [
    (b"worker: {replicas: 2}\n\xff\xfe\n", "is not UTF-8 text (byte 22)"),
    (b"- 1\n- 2\n", "is not a YAML mapping of chart values"),
    (b"worker: {replicas: 2\n", "is not valid YAML at line 2"),
    (b"x" * (valueflags.MAX_FILE_BYTES + 1), "is over 4 MiB"),
])
def test_bad_values_files_are_one_line(tmp_path, content, problem):
    f = tmp_path / "v.yaml"
    f.write_bytes(content)
    with pytest.raises(SpecError) as exc:
        valueflags.load_file(f)
    assert problem in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_values_file_names_it(tmp_path):
    with pytest.raises(SpecError, match=r"--values: cannot read .*absent.yaml: No such file"):
        valueflags.load_file(tmp_path / "absent.yaml")


# ----------------------------------------------------------------------------- mistyped values

@pytest.mark.parametrize("values,message", [
    ({"worker": {"replicas": "abc"}}, "worker.replicas: must be an integer, got 'abc'"),
    ({"worker": {"replicas": "1.5"}}, "worker.replicas: must be an integer, got '1.5'"),
    ({"worker": {"replicas": "0x10"}}, "worker.replicas: must be an integer, got '0x10'"),
    ({"worker": {"replicas": True}}, "worker.replicas: must be an integer, got True"),
    ({"worker": {"replicas": None}}, "worker.replicas: is missing (a null value removed"),
    ({"worker": 3}, "worker: must be a map of settings, got 3 (set worker.replicas=... rather than worker=...)"),
    ({"chief": None}, "chief.enabled: is missing"),
    ({"chief": {"enabled": "yes"}}, "chief.enabled: must be true or false, got 'yes'"),
])
def test_mistyped_values_name_the_key(values, message):
    with pytest.raises(SpecError) as exc:
        compute_values(ClusterOptions(name="m", value_files=[values]))
    assert message in str(exc.value)


def test_null_removes_a_default_like_helm_and_a_whole_float_is_an_integer():
    assert shape_of({"worker": {"replicas": 3.0}}).workers == 3
    assert shape_of({"ps": {"image": None}}).ps == 1  # a null elsewhere is harmless


# ----------------------------------------------------------------------------- local scripts

def test_a_script_name_that_is_no_configmap_key_is_refused(tmp_path):
    (tmp_path / "my train.py").write_text("pass\n")
    with pytest.raises(SpecError, match="'my train.py' cannot be a ConfigMap key") as exc:
        script_values("my train.py", tmp_path)
    assert exc.value.field == "--script" and "rename it" in str(exc.value)


def test_a_non_utf8_sibling_is_one_line(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    with pytest.raises(SpecError, match=r"latin1.py is not UTF-8 text \(byte 5\)"):
        script_values("train.py", tmp_path)


def test_siblings_that_cannot_be_modules_stay_behind(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    (tmp_path / "my helper.py").write_text("X = 1\n")
    (tmp_path / "util.py").write_text("Y = 2\n")
    assert script_values("train.py", tmp_path)["extraFiles"] == {"util.py": "Y = 2\n"}


# ----------------------------------------------------------------------------- names

@pytest.mark.parametrize("ns", ["Bad_NS", "a\"b", "-a", "a" * 64, "", "a.b"])
def test_bad_namespaces(ns):
    with pytest.raises(SpecError, match="is not a valid namespace"):
        spec.validate_namespace(ns)


# ----------------------------------------------------------------------------- exit codes

def api_exception(status: int, message: str) -> ApiException:
    e = ApiException(status=status, reason="Forbidden" if status == 403 else "Invalid")
    e.body = json.dumps({"kind": "Status", "message": message})
    return e


def test_the_exit_code_table_has_one_code_per_kind():
    assert (errors.TRAINING_FAILED, errors.BAD_INPUT, errors.NO_CLUSTER, errors.TIMED_OUT,
            errors.REFUSED) == (1, 2, 3, 4, 5)
    assert errors.exit_code(SpecError("x", "y")) == 2
    assert errors.exit_code(errors.ClusterUnreachable("x")) == 3
    assert errors.exit_code(errors.TimedOut("x")) == 4
    assert errors.exit_code(errors.TrainingFailed("x")) == 1


def test_a_403_is_one_line_exit_3_naming_the_request():
    e = apierrors.user_facing(api_exception(
        403, 'pods is forbidden: User "system:serviceaccount:a:b" cannot list resource "pods" in the namespace "a"'))
    assert isinstance(e, errors.Forbidden) and errors.exit_code(e) == 3
    assert "cannot list resource \"pods\"" in str(e) and "\n" not in str(e)


def test_other_refusals_are_exit_5_and_unreachable_is_exit_3():
    assert errors.exit_code(apierrors.user_facing(api_exception(422, "Invalid value"))) == 5
    quota = api_exception(403, 'pods "m-ps-0" is forbidden: exceeded quota: q, requested: cpu=2')
    assert errors.exit_code(apierrors.user_facing(quota)) == 5 and "exceeded quota" in str(apierrors.user_facing(quota))
    down = MaxRetryError(None, "/api", NewConnectionError(None, "Connection refused"))
    e = apierrors.user_facing(down)
    assert isinstance(e, errors.ClusterUnreachable) and "tfhelm cluster up" in str(e)


def test_an_object_the_dry_run_refuses_is_one_line_exit_5():
    e = errors.AdmissionRefused("ns", "Job", "m-worker-abc123", 'Job.batch "m-worker-abc123" is invalid:\n  limits')
    assert errors.exit_code(e) == 5 and "\n" not in str(e) and "Job ns/m-worker-abc123" in str(e)


@pytest.mark.parametrize("reason,code", [
    ('secrets is forbidden: User "x" cannot list resource "secrets"', 3),
    ("Kubernetes cluster unreachable: Get \"https://127.0.0.1:1/version\": dial tcp", 3),
    ("context deadline exceeded", 4),
    ('Job.batch "m-worker" is invalid: spec.template...', 5),
    # Admission answers "forbidden" too, but refuses an object: not access denied.
    ('jobs.batch "m-worker-abc123" is forbidden: ValidatingAdmissionPolicy \'p\' denied request: no', 5),
    ('pods "m-ps-0" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true', 5),
])
def test_helm_failures_get_the_code_of_their_kind(reason, code):
    assert errors.ReleaseError("ns", "m", "install", reason).exit_code == code


def test_an_unknown_failure_is_one_line_not_a_traceback(monkeypatch):
    monkeypatch.delenv("TFHELM_DEBUG", raising=False)
    app = typer.Typer(cls=OneLineErrors)

    @app.command()
    @cli_errors
    def boom(n: int = typer.Option(1, "--n")):
        raise KeyError("surprise")

    @app.command()
    def other():
        pass

    runner = CliRunner()
    result = runner.invoke(app, ["boom"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines() == [
        "error: internal error: KeyError: 'surprise' (TFHELM_DEBUG=1 shows the traceback; please report it)"]
    bad = runner.invoke(app, ["boom", "--n", "abc"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "'abc' is not a valid integer" in bad.stderr or "valid integer" in bad.stderr


# ----------------------------------------------------------------------------- the reaper and 403

def forbidden(what: str) -> ApiException:
    return api_exception(403, f'{what} is forbidden: User "system:serviceaccount:ns:c-reaper" cannot do it')


def test_the_reaper_stops_on_403_instead_of_retrying_forever():
    fc = FakeClient(job(rv="1"))
    fc.watch_failures = [forbidden("jobs.batch")] * 3
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast())
    with pytest.raises(errors.Forbidden, match="jobs.batch is forbidden"):
        r.run()


def test_a_403_on_delete_stops_the_reaper_too():
    fc = FakeClient(job(rv="1", state="Complete", succeeded=2))

    def delete_ps(namespace, cluster):
        raise forbidden("deployments.apps")
    fc.delete_ps = delete_ps
    box = {}
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), forever=True, **fast())
    t = threading.Thread(target=lambda: box.setdefault("e", _run(r)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "a 403 must end the reaper, even with --forever"
    assert isinstance(box["e"], errors.Forbidden)


def _run(r):
    try:
        r.run()
    except Exception as e:  # noqa: BLE001
        return e
    return None
