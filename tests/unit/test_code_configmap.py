"""Inline code out of the release (tfhelm/cluster/code_configmap.py): named by its content."""

from tfhelm.cluster import code_configmap


def inline(text: str, **extra) -> dict:
    return {"worker": {"replicas": 2}, "code": {"source": "inline", "script": "train.py", "inline": text,
                                                "extraFiles": extra, "args": ["--epochs", "3"]}}


def test_inline_code_becomes_a_configmap_the_values_name():
    values, cm = code_configmap.split("mnist", inline("print(1)\n", **{"util.py": "X = 1\n"}))
    assert cm["data"] == {"train.py": "print(1)\n", "util.py": "X = 1\n"}
    assert values["code"] == {"source": "configMap", "configMap": cm["metadata"]["name"], "script": "train.py",
                              "args": ["--epochs", "3"]}
    assert values["worker"] == {"replicas": 2}
    assert cm["metadata"]["labels"]["tfhelm.io/cluster"] == "mnist"
    assert code_configmap.selector("mnist") == "tfhelm.io/cluster=mnist,tfhelm.io/role=code"


def test_the_name_changes_with_the_content_only():
    name = lambda v: code_configmap.split("mnist", v)[1]["metadata"]["name"]  # noqa: E731
    assert name(inline("a")) == name(inline("a"))
    assert len({name(inline("a")), name(inline("b")), name(inline("a", **{"u.py": ""}))}) == 3


def test_other_sources_stay_as_they_are():
    for code in ({"source": "url", "url": "http://files/t.py", "script": "t.py"}, {"source": "image", "script": "/t.py"}):
        values = {"code": code}
        assert code_configmap.split("mnist", values) == (values, None)
    assert code_configmap.split("mnist", {}) == ({}, None)


def test_code_the_chart_refuses_stays_inline_for_the_chart_to_say_why():
    big = "x" * (code_configmap.contract.limit("inlineCodeBytes") + 1)
    for values in (inline("a", **{"my util.py": ""}), inline(big), {"code": {"source": "inline", "inline": "a"}}):
        assert code_configmap.split("mnist", values) == (values, None)
