"""Shared fixture of the distributed tests: one process-based LocalCluster
(2 workers, 1 thread each), started once for the session."""

import pytest

pytest.importorskip("dask")


@pytest.fixture(scope="session")
def process_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as cluster:
        with distributed.Client(cluster) as client:
            yield client
