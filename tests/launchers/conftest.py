"""Fixtures for tests that drive real schedulers: a private Slurm cluster and Open MPI."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.launchers.slurm_cluster import SlurmCluster, available, start_cluster


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A one-node Slurm cluster (partitions `debug`, default, and `short`) for the session.

    Skips when one cannot be started here (not root, Slurm/munge not installed).
    """
    reason = available()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def mpirun() -> str:
    """The path of `mpirun`; skips unless it is on PATH and mpi4py imports."""
    path = shutil.which("mpirun")
    if path is None:
        pytest.skip("mpirun not on PATH (run .ci/install-schedulers)")
    try:
        import mpi4py  # noqa: F401
    except ImportError as err:
        pytest.skip(f"mpi4py does not import: {err}")
    return path
