"""Rank discovery reads exactly one launcher's environment, and refuses to guess."""

import pytest

from collbench.bench.rank_env import RunEnv, expand_tasks_per_node, first_host, started_as_rank
from collbench.core.errors import SpecError

TORCH = {
    "RANK": "3",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "node0",
    "MASTER_PORT": "29500",
    "GROUP_RANK": "1",
}
SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_ID": "42",
    "SLURM_STEP_NODELIST": "gpu[003-005,009]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x4)",
}
OMPI = {
    "OMPI_COMM_WORLD_RANK": "2",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
}


def test_torch_environment():
    env = RunEnv.detect(TORCH)
    assert (
        env.source,
        env.rank,
        env.world_size,
        env.local_rank,
        env.local_world_size,
        env.master_addr,
        env.master_port,
        env.node_rank,
    ) == ("torch", 3, 8, 1, 2, "node0", 29500, 1)


def test_slurm_step_environment():
    env = RunEnv.detect(SLURM)
    assert (
        env.source,
        env.rank,
        env.world_size,
        env.local_rank,
        env.local_world_size,
        env.node_rank,
        env.master_addr,
    ) == ("slurm", 5, 8, 1, 2, 2, "gpu003")
    # every task derives the same port from the job and step ids, in the documented range
    assert env.master_port == RunEnv.detect({**SLURM, "SLURM_PROCID": "0"}).master_port
    assert 20000 <= env.master_port < 32768  # below the kernel's ephemeral ports
    assert RunEnv.detect({**SLURM, "SLURM_STEP_ID": "1"}).master_port != env.master_port


def test_a_batch_script_is_not_a_slurm_rank():
    batch = {**SLURM, "SLURM_PROCID": "0", "SLURM_STEP_ID": "batch"}
    with pytest.raises(SpecError, match="not started as a rank"):
        RunEnv.detect(batch)
    without_step = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_ID"}
    assert not started_as_rank(without_step)


def test_mpi_environment_has_no_address_until_rank_0_sends_it():
    env = RunEnv.detect(OMPI)
    assert (
        env.source,
        env.rank,
        env.world_size,
        env.local_rank,
        env.local_world_size,
        env.node_rank,
    ) == ("mpi", 2, 4, 0, 2, 1)
    assert env.master_addr is None and env.master_port is None
    pmi = RunEnv.detect({"PMI_RANK": "1", "PMI_SIZE": "2"})
    assert (pmi.source, pmi.rank, pmi.world_size) == ("mpi", 1, 2)


def test_hand_set_master_address_wins():
    env = RunEnv.detect({**OMPI, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"})
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 1234)


def test_agreeing_environments_are_fine():
    both = {**SLURM, "SLURM_PROCID": "3", **TORCH}
    assert RunEnv.detect(both).source == "torch"


def test_disagreeing_environments_stop_with_how_to_choose():
    # torchrun inside an srun step: Slurm counts nodes' torchruns, torch counts ranks
    both = {**TORCH, **SLURM}
    with pytest.raises(SpecError) as error:
        RunEnv.detect(both)
    message = str(error.value)
    assert "torchrun says rank 3 of 8" in message and "Slurm says rank 5 of 8" in message
    assert "--rank-env torch|slurm" in message
    assert RunEnv.detect(both, choice="slurm").rank == 5
    assert RunEnv.detect(both, choice="torch").rank == 3


def test_naming_an_absent_environment_fails():
    with pytest.raises(SpecError, match="no MPI rank environment"):
        RunEnv.detect(TORCH, choice="mpi")
    with pytest.raises(SpecError, match="--rank-env"):
        RunEnv.detect(TORCH, choice="pbs")


@pytest.mark.parametrize(
    "environ, message",
    [
        ({}, "not started as a rank"),
        ({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR, MASTER_PORT is not"),
        ({**TORCH, "RANK": "8"}, "rank 8 is not a rank of world size 8"),
        ({**TORCH, "RANK": "x"}, "RANK: 'x' is not an integer"),
        ({**OMPI, "OMPI_COMM_WORLD_SIZE": "0"}, "world size 0"),
    ],
)
def test_bad_environments(environ, message):
    with pytest.raises(SpecError, match=message):
        RunEnv.detect(environ)


@pytest.mark.parametrize(
    "nodelist, first",
    [
        ("node7", "node7"),
        ("gpu[003-010,012],cpu01", "gpu003"),
        ("a,b", "a"),
        ("rack1-n[12,15]", "rack1-n12"),
        ("n[5]", "n5"),
    ],
)
def test_first_host(nodelist, first):
    assert first_host(nodelist) == first


@pytest.mark.parametrize(
    "text, counts",
    [
        ("2(x3),1", [2, 2, 2, 1]),
        ("8", [8]),
        ("4,4", [4, 4]),
        ("", []),
    ],
)
def test_tasks_per_node(text, counts):
    assert expand_tasks_per_node(text) == counts


def test_started_as_rank():
    assert started_as_rank(TORCH)
    assert started_as_rank(OMPI)
    assert started_as_rank(SLURM)
    assert not started_as_rank(
        {**SLURM, "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}
    )
    assert not started_as_rank({})
