"""What tfhelm writes as YAML is read back the same by Go's YAML (Helm, kubectl, Argo CD)."""

from __future__ import annotations

import pytest
import yaml

from tfhelm import yamlio

# Strings Go's YAML reads as numbers, where PyYAML's reader keeps them strings: a cluster's
# generation (six hex digits: 6e1234 about once in 40 clusters) or an image tag.
GO_FLOATS = ["6e1234", "1e10", "1E5", "12e3", "+1e5", "-2e4", "1.5e3"]


@pytest.mark.parametrize("text", GO_FLOATS)
def test_a_string_go_reads_as_a_number_is_quoted(text):
    dumped = yamlio.dump({"tfhelm.io/generation": text})
    assert dumped.strip() in (f"tfhelm.io/generation: '{text}'", f'tfhelm.io/generation: "{text}"'), dumped
    assert yamlio.load(dumped) == {"tfhelm.io/generation": text}


def test_other_scalars_are_written_as_before():
    data = {"tag": "2.16.1", "name": "a1e2", "n": 3, "x": 1.5, "on": True, "hex": "abc123"}
    assert yamlio.dump(data, sort_keys=False) == yaml.safe_dump(data, sort_keys=False)
    assert yamlio.load_docs(yamlio.dump_all([data, data])) == [data, data]
