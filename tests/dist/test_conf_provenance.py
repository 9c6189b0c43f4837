"""A sweep records the NCCL config files that silently set variables (issue 14, provenance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of

pytestmark = pytest.mark.slow  # each runs a real 2-rank sweep


def test_a_sweep_records_the_nccl_conf_file_it_ran_under(tmp_path):
    conf = tmp_path / "site-nccl.conf"
    conf.write_text("NCCL_ALGO=Ring\nNCCL_PROTO=Simple\n")
    out = tmp_path / "run"
    done = collbench(
        "sweep", "-c", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--repeats", "1", "-q",
        "--out", str(out),
        env={"NCCL_CONF_FILE": str(conf), "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    recorded = meta_of(out)["nccl_conf_files"]
    assert recorded[str(conf)] == conf.read_text()


@pytest.mark.skipif(
    any(Path(f"/etc/{name}.conf").exists() for name in ("nccl", "rccl")),
    reason="this machine has a system-wide NCCL/RCCL config file",
)
def test_a_sweep_without_config_files_records_none(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep", "-c", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--repeats", "1", "-q",
        "--out", str(out),
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not meta_of(out).get("nccl_conf_files")
