from tests.helpers.pods import expand_env

INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def test_references_expand_only_to_earlier_variables():
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "3"}]
    assert expand_env(env, {}) == {"A": "1", "B": "1-$(C)", "C": "3"}


def test_escaped_dollar_and_field_refs():
    env = [{"name": "I", "valueFrom": {"fieldRef": {"fieldPath": INDEX}}},
           {"name": "X", "value": "$$(I) $(I)"}]
    assert expand_env(env, {INDEX: "7"}) == {"I": "7", "X": "$(I) 7"}
