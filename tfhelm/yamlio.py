"""YAML through libyaml where PyYAML has it: parsing a rendered N=10,000 cluster takes
0.04 s instead of 1.4 s, printing it 0.05 s instead of 2 s. The pure-Python classes are
the fallback, with the same results (the C emitter only folds long strings differently)."""

from __future__ import annotations

import yaml

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loading where a plain `=` is the string "=" (YAML 1.1's `value` tag is unused;
    SafeLoader would refuse it, as pyhelm3's loader works around too)."""


Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def load(text: str | bytes):
    return yaml.load(text, Loader=Loader)


def load_docs(text: str | bytes) -> list[dict]:
    """Every non-empty document of a multi-document stream (`helm template` output)."""
    return [d for d in yaml.load_all(text, Loader=Loader) if d]


def dump(data, **options) -> str:
    return yaml.dump(data, Dumper=_Dumper, **options)
