"""NCCL config files in provenance: they set variables silently, so a run records them."""

from __future__ import annotations

import os

import pytest

from collbench.bench.provenance import CONF_FILE_MAX_BYTES, nccl_conf_files
from collbench.core.tune_grid import conf_variables
from collbench.store.meta import RunMeta


@pytest.fixture
def dirs(tmp_path):
    home, etc = tmp_path / "home", tmp_path / "etc"
    home.mkdir()
    etc.mkdir()
    return home, etc


def test_no_files_no_entries(dirs):
    home, etc = dirs
    assert nccl_conf_files({}, home, etc) == {}
    assert nccl_conf_files({}, None, etc) == {}


def test_user_and_system_files_in_nccl_order(dirs):
    home, etc = dirs
    (home / ".nccl.conf").write_text("NCCL_ALGO=Tree\n")
    (etc / "nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    (etc / "rccl.conf").write_text("NCCL_PROTO=LL\n")
    files = nccl_conf_files({}, home, etc)
    assert list(files) == [str(home / ".nccl.conf"), str(etc / "nccl.conf"), str(etc / "rccl.conf")]
    assert files[str(home / ".nccl.conf")] == "NCCL_ALGO=Tree\n"


def test_nccl_conf_file_replaces_the_user_file(dirs, tmp_path):
    # NCCL reads ${NCCL_CONF_FILE} instead of ~/.nccl.conf (src/misc/param.cc).
    home, etc = dirs
    (home / ".nccl.conf").write_text("NCCL_ALGO=Tree\n")
    chosen = tmp_path / "site.conf"
    chosen.write_text("NCCL_IB_HCA=mlx5_0\n")
    files = nccl_conf_files({"NCCL_CONF_FILE": str(chosen)}, home, etc)
    assert files == {str(chosen): "NCCL_IB_HCA=mlx5_0\n"}
    assert conf_variables(files[str(chosen)]) == {"NCCL_IB_HCA": "mlx5_0"}


def test_missing_nccl_conf_file_is_no_entry(dirs, tmp_path):
    home, etc = dirs
    assert nccl_conf_files({"NCCL_CONF_FILE": str(tmp_path / "absent")}, home, etc) == {}


def test_unreadable_file_is_a_note_not_a_crash(dirs):
    home, etc = dirs
    (home / ".nccl.conf").mkdir()  # unreadable as a file, whoever runs the test (root too)
    files = nccl_conf_files({}, home, etc)
    note = files[str(home / ".nccl.conf")]
    assert note.startswith("# collbench: not read:")
    assert conf_variables(note) == {}  # a comment line, as NCCL would read it


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_file_without_permission_is_a_note(dirs):
    home, etc = dirs
    path = etc / "nccl.conf"
    path.write_text("NCCL_ALGO=Ring\n")
    path.chmod(0)
    assert nccl_conf_files({}, home, etc)[str(path)].startswith("# collbench: not read:")


def test_large_file_is_bounded(dirs):
    home, etc = dirs
    (etc / "nccl.conf").write_text("NCCL_ALGO=Ring\n" + "#" * (2 * CONF_FILE_MAX_BYTES))
    text = nccl_conf_files({}, home, etc)[str(etc / "nccl.conf")]
    assert len(text) < CONF_FILE_MAX_BYTES + 100
    assert text.endswith(f"# collbench: truncated after {CONF_FILE_MAX_BYTES} bytes")
    assert conf_variables(text) == {"NCCL_ALGO": "Ring"}


def test_run_meta_records_conf_files_and_old_meta_still_loads():
    files = {"/etc/nccl.conf": "NCCL_ALGO=Tree\n"}
    meta = RunMeta(run_id="r", nccl_conf_files=files)
    data = meta.to_dict()
    assert data["nccl_conf_files"] == files
    assert RunMeta.from_dict(data).nccl_conf_files == files
    # Written only when a file existed: an older run's meta.json keeps its keys.
    assert "nccl_conf_files" not in RunMeta(run_id="r").to_dict()
    old = {"schema_version": 1, "run_id": "r", "state": "completed", "knobs": {}}
    assert RunMeta.from_dict(old).nccl_conf_files == {}
    assert RunMeta.from_dict(old).to_dict()["run_id"] == "r"
