import pytest

from collbench.bench.capacity import (
    RANK_PROCESS_BYTES,
    check_memory,
    check_rank_processes,
    check_world_size,
    peak_buffer_bytes,
    sample_bytes,
)
from collbench.bench.distributed import RunEnv
from collbench.core.errors import SpecError
from collbench.core.spec import MAX_ITERS, SweepSpec

TORCH_ENV = {
    "RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
}


def test_run_env_reads_the_torch_launcher_variables():
    env = RunEnv.detect(TORCH_ENV)
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (1, 4, 1, 2)
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 29500)


@pytest.mark.parametrize(
    "change",
    [
        {"RANK": None},
        {"MASTER_PORT": None},
        {"RANK": "x"},
        {"RANK": "4"},
        {"WORLD_SIZE": "0"},
    ],
)
def test_run_env_rejects_incomplete_or_inconsistent_environments(change):
    environ = {k: v for k, v in {**TORCH_ENV, **change}.items() if v is not None}
    with pytest.raises(SpecError):
        RunEnv.detect(environ)


def test_peak_buffer_counts_both_buffers_out_of_place():
    spec = SweepSpec(collectives=("all_gather",), max_bytes=1 << 20, check=False)
    assert peak_buffer_bytes(spec.with_backend("gloo"), 4) == (1 << 20) + (1 << 20) // 4
    in_place = SweepSpec(collectives=("all_reduce",), max_bytes=1 << 20, check=False)
    assert peak_buffer_bytes(in_place.with_backend("gloo"), 4) == 1 << 20


def test_memory_check_refuses_before_allocating():
    spec = SweepSpec(max_bytes=1 << 30).with_backend("gloo")
    check_memory(spec, 2, 2, 64 << 30, "host")
    with pytest.raises(SpecError) as error:
        check_memory(spec, 2, 2, 1 << 30, "host")
    assert error.value.field == "--max-bytes" and "lower --max-bytes" in str(error.value)


def test_iters_are_bounded_and_their_samples_counted():
    with pytest.raises(SpecError) as error:
        SweepSpec(iters=10**10)
    assert error.value.field == "--iters" and f"{MAX_ITERS:,}" in str(error.value)
    with pytest.raises(SpecError) as error:
        SweepSpec(warmup=10**10)
    assert error.value.field == "--warmup"
    spec = SweepSpec(max_bytes=1024, iters=MAX_ITERS, check=False).with_backend("gloo")
    assert sample_bytes(spec, 64) > 100 * peak_buffer_bytes(spec, 64)
    with pytest.raises(SpecError) as error:  # the buffers alone would fit in 1 GiB
        check_memory(spec, 64, 64, 1 << 30, "host")
    assert error.value.field == "--iters" and "lower --iters" in str(error.value)


def test_local_rank_processes_are_counted_against_host_memory():
    from collbench.launchers.local import local_nproc

    check_rank_processes(8, 8 * RANK_PROCESS_BYTES * 2)
    with pytest.raises(SpecError) as error:
        check_rank_processes(8, 8 * RANK_PROCESS_BYTES)
    assert error.value.field == "--nproc" and "lower --nproc" in str(error.value)
    tiny = SweepSpec(max_bytes=8, check=False).with_backend("gloo")
    with pytest.raises(SpecError) as error:  # 100000 x 8 bytes of buffers would fit
        local_nproc(tiny, 100_000)
    assert error.value.field == "--nproc"


def test_sendrecv_needs_two_ranks():
    spec = SweepSpec(collectives=("sendrecv",))
    check_world_size(spec, 2)
    with pytest.raises(SpecError):
        check_world_size(spec, 1)
