"""Hostile input against the real charts and CLI: each case is refused in one line with
exit 2 before anything touches a cluster, or renders safely (a value stays one value)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from tfhelm.chart import chart_path
from tfhelm.cli import app
from tfhelm.cluster.manifests import by_kind, job_names
from tfhelm.errors import RenderError
from tests.helpers.pods import task_tf_configs

from .conftest import helm, render

runner = CliRunner()
TF, ENV = str(chart_path("tf-cluster")), str(chart_path("user-env"))
SHA = "a" * 64


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


# Every probe of the issue (and a few more): exit 2, one line, naming the key.
@pytest.mark.parametrize("args,message", [
    (["--set", "worker.replicas=abc"], "worker.replicas: must be an integer, got 'abc'"),
    (["--set", "worker.replicas=1.5"], "worker.replicas: must be an integer, got '1.5'"),
    (["--set", "worker.replicas=null"], "worker.replicas: is missing"),
    (["--set", "worker.replicas=0x10"], "worker.replicas: must be an integer, got '0x10'"),
    (["--set", "worker=3"], "worker: must be a map of settings, got 3"),
    (["--set", "chief=null"], "chief.enabled: is missing"),
    (["-n", "Bad_NS"], "--namespace: 'Bad_NS' is not a valid namespace"),
    (["-n", "team\"a"], "is not a valid namespace"),
    (["--set", 'clusterDomain=c"x'], "clusterDomain: 'c\"x' is not empty or a DNS-1123 subdomain"),
    (["--set", "code.source=url,code.url=http://f/t.py", "--set-string", 'code.script=t.py\\"\\, \\"000'],
     "code.script: 't.py\", \"000' is not a file name usable as a ConfigMap key"),
    (["--set", "code.source=url,code.url=http://f/t.py x"], "code.url: 'http://f/t.py x' is not empty or an http(s) URL"),
    (["--image", "tensorflow/tensorflow :2.21.0"], "--image: 'tensorflow/tensorflow :2.21.0' is not an image reference"),
    (["--set", "image.repository=tensor flow"], "image.repository: 'tensor flow' is not an image reference"),
    (["--set", "image.tag=2.21 0"], "image.tag: '2.21 0' is not an image tag"),
    (["--set", "reaper.image.repository=Evil Image"], "reaper.image.repository: 'Evil Image' is not an image reference"),
    (["--set", "worker.env[0].name=EPOCHS,worker.env[0].value=123"], "worker.env.0.value: got number, want string"),
    (["--set-json", 'worker.resources={"limits":{"nvidia.com/gpu":-1}}'],
     "worker.resources.limits.nvidia.com/gpu: minimum: got -1, want 0"),
    (["--set", "ps.resources.requests.cpu=-1"], "ps.resources.requests.cpu: minimum: got -1, want 0"),
    (["--set", "worker.resources.requests.memory=lots"], "is not a Kubernetes quantity"),
    (["--set", "worker.gpus=-1"], "worker.gpus: minimum: got -1, want 0"),
    (["--set", "code.source=inline,code.inline=x", "--set", "code.extraFiles.my\\ util\\.py=x"],
     "code.extraFiles: additional properties 'my util.py' not allowed"),
    (["--set", "worker.podLabels.team=not a valid label!"], "worker.podLabels.team: 'not a valid label!' is not a label value"),
    (["--set", "worker.nodeSelector.bad key=x"], "worker.nodeSelector: additional properties 'bad key' not allowed"),
    (["--set", "storage.data.existingClaim=My Claim"], "storage.data.existingClaim: 'My Claim' is not empty or a DNS-1123"),
    (["--set", "worker.priorityClassName=high priority"], "worker.priorityClassName: 'high priority' is not"),
    (["--set", "storage.logs.mountPath=log"], "storage.logs.mountPath: 'log' is not an absolute path"),
    (["--set", "worker.replicas"], 'failed parsing --set data: key "replicas" has no value'),
    (["--set", "a[99999999]=1"], "index of 99999999 is greater than maximum supported index"),
    (["--set-json", "worker.env=[{"], "--set-json: 'worker.env=[{': the value of worker.env is not JSON"),
    (["--workers", "abc"], "Invalid value for '--workers'"),
    (["--no-such-option"], "No such option: --no-such-option"),
])
def test_hostile_cli_input_is_one_line_and_exit_2(args, message):
    result = runner.invoke(app, ["up", "--name", "m", "--dry-run", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.output and not result.stdout


def test_bad_values_and_script_files_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_bytes(b"worker: {replicas: 2}\n\xff\n")
    (tmp_path / "my train.py").write_text("pass\n")
    (tmp_path / "train.py").write_text("pass\n")
    cases = [(["-f", "bad.yaml"], "--values: bad.yaml is not UTF-8 text"),
             (["--script", "my train.py"], "--script: 'my train.py' cannot be a ConfigMap key")]
    for args, message in cases:
        result = runner.invoke(app, ["render", "m", *args])
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.stderr
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    result = runner.invoke(app, ["render", "m", "--script", "train.py"])
    assert result.exit_code == 2 and "latin1.py is not UTF-8 text" in result.stderr


# ----------------------------------------------------------------------------- plain helm

def test_the_chart_refuses_a_namespace_that_would_break_its_json():
    for ns in ('te"am', "Team"):
        result = helm("template", "m", TF, "-n", ns)
        assert result.returncode != 0 and "is not a valid namespace name" in result.stderr
        result = helm("template", "user-env", ENV, "-n", ns)
        assert result.returncode != 0 and "is not a valid namespace name" in result.stderr


@pytest.mark.parametrize("values,message", [
    ({"code": {"source": "url", "url": "http://f/t.py", "script": "t.py", "sha256": SHA + '", "x'}},
     "code.sha256"),
    ({"code": {"source": "url", "url": "http://f/t.py", "script": "t.py", "url ": "x"}}, "additional properties"),
    ({"worker": {"env": [{"name": "A", "value": 123}]}}, "worker.env.0.value: got number, want string"),
    ({"worker": {"env": [{"name": "A=B", "value": "x"}]}}, "worker.env.0.name"),
    ({"worker": {"env": [{"name": "A", "valu": "x"}]}}, "additional properties 'valu' not allowed"),
    ({"imagePullSecrets": [{"name": "Reg Cred"}]}, "imagePullSecrets.0.name"),
    ({"storage": {"storageClass": {"create": True, "name": "x y", "provisioner": "p"}}}, "storage.storageClass.name"),
    # The conventions block is as strict as the rest.
    ({"nameOverride": "my name"}, "nameOverride: 'my name' is not a label value"),
    ({"fullnameOverride": "My-Cluster"}, "fullnameOverride: 'My-Cluster' is not a cluster name"),
    ({"global": {"imageRegistry": "my registry:5000"}}, "global.imageRegistry: 'my registry:5000' is not empty or an image registry"),
    ({"commonAnnotations": {"bad key": "x"}}, "commonAnnotations: additional properties 'bad key' not allowed"),
    ({"podAnnotations": {"a": 1}}, "podAnnotations.a: got number, want string"),
    ({"nodeSelector": {"disk": "fast ssd"}}, "nodeSelector.disk: 'fast ssd' is not a label value"),
    ({"serviceAccount": {"create": True, "name": "Task_SA"}}, "serviceAccount.name: 'Task_SA' is not empty or a DNS-1123"),
    ({"serviceAccount": {"annotations": {"iam": 5}}}, "serviceAccount.annotations.iam: got number, want string"),
    ({"test": {"timeout": 0}}, "test.timeout: minimum: got 0, want 1"),
    ({"test": {"enabled": True, "timout": 5}}, "additional properties 'timout' not allowed"),
])
def test_schema_refuses_what_kubernetes_would(values, message):
    with pytest.raises(RenderError, match=message):
        render(values)


def test_every_value_placed_in_json_yaml_or_argv_stays_one_value(tmp_path):
    """Legal values full of quotes, backslashes, `$`, newlines and unicode: every one
    arrives byte for byte as one value (one argument, one env value, valid JSON)."""
    weird = 'a "b" \\c\' $(X) {{ .Values }} ✓\nline2'
    mount = '/opt/my "code" dir'
    values = {"code": {"source": "url", "url": "http://files/t.py?a=1&b=$(X)", "script": "dir/t-1.py",
                       "sha256": SHA, "args": [weird, "--flag=x y"], "mountPath": mount},
              "storage": {"logs": {"mountPath": "/log $HOME"}, "data": {"mountPath": "/data'x"}},
              "worker": {"replicas": 2, "env": [{"name": "W", "value": weird}]}, "ps": {"replicas": 1}}
    manifests = render(values)
    (job,) = [m for m in by_kind(manifests, "Job")]
    pod = job["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["command"] == [
        "python3", "/etc/tfhelm/fetch.py", values["code"]["url"], f"{mount}/t-1.py", SHA]
    (c,) = pod["containers"]
    assert c["args"] == ["script", f"{mount}/t-1.py", weird, "--flag=x y"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["W"] == weird and env["TFHELM_DATA_DIR"] == "/data'x"
    assert env["TFHELM_LOG_DIR"] == "/log $HOME/mnist"
    assert task_tf_configs(manifests)[("worker", 1)]["task"] == {"type": "worker", "index": 1}
    (config,) = [m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"] == "mnist-tfconfig"]
    assert json.loads(config["data"]["cluster-spec.json"])["ps"] == {
        "count": 1, "host": "mnist-ps-{index}.team-a.svc.cluster.local:2222"}


def test_inline_code_reaches_the_configmap_byte_for_byte():
    text = 'print("hi")\n# \\n \' " {{ x }} $(Y) ✓ \t tab\n' * 3
    manifests = render({"code": {"source": "inline", "script": "t.py", "inline": text,
                                 "extraFiles": {"u-1.py": text, ".hidden.py": "x"}}})
    (code,) = [m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"] == "mnist-code"]
    assert code["data"] == {"t.py": text, "u-1.py": text, ".hidden.py": "x"}


def test_a_cluster_domain_and_image_by_digest_render_valid_json():
    digest = "reg.example:5000/team/tf@sha256:" + "b" * 64
    manifests = render({"clusterDomain": "cluster.local", "image": {"repository": digest, "tag": ""},
                        "worker": {"replicas": 2}})
    assert task_tf_configs(manifests)[("worker", 0)]["cluster"]["worker"][1] == \
        f"{job_names(manifests)['worker']}-1.mnist-worker.team-a.svc.cluster.local:2222"
    (job,) = by_kind(manifests, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == digest


def test_user_env_values_land_quoted(tmp_path):
    result = helm("template", "user-env", ENV, "-n", "tfhelm-user-a", "-f", "-",
                  stdin=yaml.safe_dump({"storage": {"code": {"mountPath": "/home/jovyan/my work"},
                                                    "logs": {"mountPath": "/log 'x'"}},
                                        "notebook": {"env": [{"name": "A", "value": "1 2"}]}}))
    assert result.returncode == 0, result.stderr
    deps = {d["metadata"]["name"]: d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Deployment"}
    nb = deps["user-env-notebook"]["spec"]["template"]["spec"]["containers"][0]
    assert "--notebook-dir=/home/jovyan/my work" in nb["args"]
    tb = deps["user-env-tensorboard"]["spec"]["template"]["spec"]["containers"][0]
    assert tb["command"][1] == "--logdir=/log 'x'"
    bad = helm("template", "user-env", ENV, "-n", "tfhelm-user-a", "--set", "notebook.env[0].name=A",
               "--set", "notebook.env[0].value=1", "--set", "quota.cpu=-2")
    assert bad.returncode != 0 and "got number, want string" in bad.stderr and "quota/cpu" in bad.stderr
    for args, message in [(["--set", "nameOverride=a b"], "nameOverride"),
                          (["--set", "global.imageRegistry=a b"], "global/imageRegistry"),
                          (["--set-json", 'commonAnnotations={"bad key":"x"}'], "bad key"),
                          (["--set", "podAnnotations.a=1"], "got number, want string")]:
        bad = helm("template", "user-env", ENV, "-n", "tfhelm-user-a", *args)
        assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)


# ----------------------------------------------------------------------------- no cluster

@pytest.fixture
def unreachable(monkeypatch, tmp_path):
    """A kubeconfig whose API server does not answer (nothing listens on port 1)."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x", "namespace": "team-a"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kc))


@pytest.mark.parametrize("args", [["status", "mnist"], ["user", "list"], ["user", "url", "alice"],
                                  ["reap", "mnist", "--grace", "0"], ["up", "--name", "m"], ["down", "m"],
                                  ["list"], ["logs", "mnist"], ["status", "mnist", "-o", "json"]])
def test_an_unreachable_cluster_is_one_line_and_exit_3(unreachable, args):
    result = runner.invoke(app, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 3, result.output
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert "127.0.0.1:1" in lines[0] or "no reachable Kubernetes cluster" in lines[0] or \
        "unreachable" in lines[0], lines[0]
