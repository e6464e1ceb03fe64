"""Fixtures for the `programs` tier: programs written the way users write them (tests/
programs/scripts/), run on the local cluster's real training nodes through `tfhelm up` and through
plain `helm install`. The cluster and namespaces are the `realpods` tier's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.conftest import api_client, core, external_cluster, kubeconfig, wait_for  # noqa: F401
from tests.realpods.conftest import namespace, pod_logs, run, volume_dir  # noqa: F401
from tfhelm_dev import localcluster, localnode

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.programs)


@pytest.fixture(scope="session", autouse=True)
def real_nodes(request, kubeconfig, external_cluster):
    if not any(HERE in Path(i.path).parents for i in request.session.items):
        return
    if not external_cluster and len(localcluster.real_nodes()) < localnode.MAX_NODES:
        pytest.fail(f"the programs tier needs the local cluster's {localnode.MAX_NODES} real nodes "
                    "(`tfhelm cluster up --real-nodes 3`)", pytrace=False)
