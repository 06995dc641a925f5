"""Project-wide test settings: GPU-marked tests skip where no CUDA device exists."""
from __future__ import annotations

import os

import pytest

# Tests read their own outputs; progress bars would only clutter captured stderr.
os.environ.setdefault("GRAPHSTREAM_PROGRESS", "0")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (none here)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def dask_client():
    """A real multi-process LocalCluster (2 workers x 1 thread on 127.0.0.1), shared by the session's
    distributed tests (starting one costs ~2 s); tests that kill workers start their own."""
    from graphstream.cluster import ClusterConfig, open_client

    with open_client(ClusterConfig(workers=2)) as client:
        yield client
