"""`collbench topo list|show|validate|detect` end to end, as a real `python -m collbench`.

Bad input follows tests/cli/test_bad_input.py: exit 2 and exactly one stderr line naming the
field and the value.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from collbench.topologies.loader import catalog_names
from tests.helpers import collbench

GOOD = {
    "name": "my-fabric",
    "nodes": 2,
    "accelerators_per_node": 8,
    "accelerator": {"name": "NVIDIA H100 80GB HBM3", "peak_bf16_tflops": 989},
    "scale_up": {"kind": "nvlink", "bandwidth_gbytes_s": 450, "latency_us": 0.6, "domain_size": 8},
    "scale_out": {"kind": "roce", "nics_per_node": 8, "nic_gbits_s": 400, "latency_us": 2.7},
    "sources": {
        "nodes": "our cluster plan",
        "accelerators_per_node": "HGX baseboard",
        "accelerator.peak_bf16_tflops": "NVIDIA H100 datasheet, dense BF16",
        "scale_up.bandwidth_gbytes_s": "NVIDIA H100 datasheet, 900 GB/s both ways",
        "scale_up.latency_us": "NCCL tuning.cc",
        "scale_up.domain_size": "HGX",
        "scale_out.nics_per_node": "server spec",
        "scale_out.nic_gbits_s": "CX-7",
    },
}


def _write(tmp_path, data, name="fabric.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def _refused(done, needle):
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("collbench: error: ") and needle in lines[0], lines[0]


def test_list_shows_every_catalog_entry():
    done = collbench("topo", "list")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.strip().splitlines()
    assert header.split()[:2] == ["NAME", "ACCELERATOR"]
    assert [row.split()[0] for row in rows] == catalog_names()
    h100 = next(row for row in rows if row.startswith("dgx-h100 "))
    for text in ("989", "32 x 8", "nvlink 450 GB/s, domain 8", "8 x 400 Gb/s infiniband"):
        assert text in h100
    gb200 = next(row for row in rows if row.startswith("gb200-nvl72 "))
    assert "144 x 4" in gb200 and "domain 72" in gb200


def test_list_json_holds_whole_topologies():
    done = collbench("topo", "list", "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    assert [entry["name"] for entry in entries] == catalog_names()
    mi300x = next(entry for entry in entries if entry["name"] == "mi300x")
    assert mi300x["scale_up"] == {
        "kind": "xgmi",
        "bandwidth_gbytes_s": 448.0,
        "latency_us": 2.3,
        "domain_size": 8,
        "fabric": "mesh",
    }
    assert "accelerator.peak_bf16_tflops" in mi300x["sources"]


def test_show_lists_fields_with_units_and_sources():
    done = collbench("topo", "show", "dgx-h100")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("dgx-h100  (catalog)")
    assert "scale_up.bandwidth_gbytes_s      450 GB/s" in text
    assert "accelerator.peak_bf16_tflops     989 TFLOP/s" in text
    assert text.count("source: ") >= 12
    assert "derived: world size 256" in text


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_show_output_is_a_file_validate_accepts(tmp_path, fmt):
    args = ("--json",) if fmt == "json" else ("--format", "yaml")
    shown = collbench("topo", "show", "gb200-nvl72", *args)
    assert shown.returncode == 0, shown.stderr
    path = _write(tmp_path, shown.stdout, f"copy.{'yaml' if fmt == 'yaml' else 'json'}")
    done = collbench("topo", "validate", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: gb200-nvl72: 144 x 4 NVIDIA B200")
    assert done.stderr == ""  # every figure of a catalog entry has its source


def test_show_a_file_by_path(tmp_path):
    done = collbench("topo", "show", _write(tmp_path, GOOD))
    assert done.returncode == 0, done.stderr
    assert "my-fabric" in done.stdout and "source: our cluster plan" in done.stdout


def test_validate_ok_and_warns_about_unsourced_figures(tmp_path):
    done = collbench("topo", "validate", _write(tmp_path, GOOD))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ok: my-fabric: 2 x 8 NVIDIA H100 80GB HBM3, scale-up nvlink "
        "450 GB/s (domain 8), scale-out 8 x 400 Gb/s roce"
    )
    assert done.stderr.strip() == (
        "collbench: warning: scale_out.latency_us has no entry in sources"
    )


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"scale_up": {**GOOD["scale_up"], "bandwidth_gbytes_s": -3}},
            "scale_up.bandwidth_gbytes_s: -3 must be from 0.001 to 1e+06",
        ),
        (
            {"scale_out": {**GOOD["scale_out"], "kind": "token-ring"}},
            "scale_out.kind: 'token-ring' must be one of infiniband, roce, ethernet, tcp",
        ),
        ({"nodes": "two"}, "nodes: 'two' must be an integer from 1 to 1,000,000"),
        ({"gpus": 8}, "gpus: 8 is not a known field"),
        (
            {"scale_out": {**GOOD["scale_out"], "nic_gbit_s": 400, "nic_gbits_s": None}},
            "scale_out.nic_gbit_s: 400 is not a known field of scale_out "
            "(did you mean scale_out.nic_gbits_s?)",
        ),
        (
            {"scale_out": None},
            "scale_out: is required and missing from the file: 2 nodes do not fit",
        ),
        (
            {"scale_up": {**GOOD["scale_up"], "domain_size": 3}},
            "scale_up.domain_size: 3 must divide",
        ),
    ],
)
def test_validate_bad_file_is_one_line_and_exit_2(tmp_path, change, needle):
    _refused(collbench("topo", "validate", _write(tmp_path, {**GOOD, **change})), needle)


def test_validate_malformed_yaml_and_missing_file(tmp_path):
    path = _write(tmp_path, "name: x\n  nodes: [\n", "broken.yaml")
    _refused(collbench("topo", "validate", path), f"topology file: '{path}' is not valid YAML")
    _refused(collbench("topo", "validate", str(tmp_path / "gone.yaml")), "FILE: ")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    _refused(collbench("topo", "validate", str(latin)), f"topology file: '{latin}' is not UTF-8")


def test_detect_to_an_unwritable_place_is_refused(tmp_path):
    _refused(
        collbench("topo", "detect", "--out", str(tmp_path / "no" / "dir" / "x.yaml")),
        "cannot be written",
    )


def test_unknown_name_and_format_are_refused():
    _refused(
        collbench("topo", "show", "dgx-z900"),
        "topology: 'dgx-z900' is neither a file nor a catalog name (a3-mega, cpu-local",
    )
    _refused(
        collbench("topo", "show", "dgx-h100", "--format", "xml"),
        "--format: 'xml' is not one of text, yaml, json",
    )
    _refused(collbench("topo", "frobnicate"), "No such command 'frobnicate'")


def test_detect_writes_a_file_that_validates(tmp_path):
    out = tmp_path / "here.yaml"
    done = collbench("topo", "detect", "--out", str(out))
    assert done.returncode == 0, done.stderr
    notes = done.stderr.strip().splitlines()
    assert notes[-1] == f"wrote {out}"
    assert all(line.startswith("collbench: detect: ") for line in notes[:-1])
    assert any(": found:" in line or ": not found:" in line for line in notes)
    checked = collbench("topo", "validate", str(out))
    assert checked.returncode == 0, checked.stderr
    data = yaml.safe_load(out.read_text())
    assert data["nodes"] == 1 and data["name"].startswith("detected-")
    if shutil.which("nvidia-smi") is None and shutil.which("rocm-smi") is None:
        assert data["scale_up"]["kind"] == "shm"  # a CPU box comes out like cpu-local
        assert data["accelerator"]["name"].startswith("CPU")
        assert any("not found: nvidia-smi" in line for line in notes)


def test_detect_prints_yaml_without_out():
    done = collbench("topo", "detect")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Written by `collbench topo detect`")
    assert yaml.safe_load(done.stdout)["accelerators_per_node"] >= 1


def test_topo_is_listed_in_help():
    done = collbench("--help")
    assert done.returncode == 0 and "topo" in done.stdout
    sub = collbench("topo", "--help")
    for command in ("list", "show", "validate", "detect"):
        assert command in sub.stdout
