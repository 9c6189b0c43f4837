"""Topology catalog, schema and loader, and the pure half of `topo detect`.

The catalog files are checked as data (every one loads, every figure has a source, figures
agree with each other); bad files must raise a TopologyError that names the field path; the
detect parsers run on text in the format nvidia-smi, rocm-smi and sysfs print.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from collbench.render import topology as render
from collbench.topologies import detect
from collbench.topologies.detect import parse_cpuinfo
from collbench.topologies.loader import catalog_names, load_topology
from collbench.topologies.schema import (
    TopologyError,
    field_paths,
    numeric_figures,
    to_dict,
    topology_from_dict,
    unsourced_figures,
)

REQUIRED = {
    "dgx-a100",
    "dgx-h100",
    "hgx-h200",
    "dgx-b200",
    "gb200-nvl72",
    "mi300x",
    "mi355x",
    "pcie-8gpu",
    "cpu-local",
}
CATALOG = catalog_names()

GOOD = {
    "name": "fabric",
    "nodes": 4,
    "accelerators_per_node": 8,
    "accelerator": {"name": "X", "peak_bf16_tflops": 100.0},
    "scale_up": {"kind": "nvlink", "bandwidth_gbytes_s": 300, "latency_us": 1, "domain_size": 8},
    "scale_out": {"kind": "infiniband", "nics_per_node": 8, "nic_gbits_s": 200, "latency_us": 3},
}


# ---- the catalog -------------------------------------------------------------------------


def test_catalog_ships_every_required_system():
    assert REQUIRED <= set(CATALOG)


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_entry_loads_under_its_own_name(name):
    topology = load_topology(name)
    assert topology.name == name
    assert topology.origin == name
    assert topology.description.strip()


@pytest.mark.parametrize("name", CATALOG)
def test_every_figure_of_a_catalog_entry_has_a_source(name):
    topology = load_topology(name)
    missing = [path for path in numeric_figures(topology) if path not in topology.sources]
    assert missing == [], f"{name}: no source for {missing}"
    assert unsourced_figures(topology) == []
    for path, citation in topology.sources.items():
        assert len(citation) > 20, f"{name}: {path} cites too little: {citation!r}"


@pytest.mark.parametrize("name", CATALOG)
def test_every_number_written_in_a_catalog_file_has_a_source(name):
    path = next(Path(__file__).parents[3].joinpath("topologies").glob(f"{name}.*"))
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    written = [
        key
        for key, value in _leaves(raw)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    assert written and set(written) <= set(raw["sources"])


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_figures_agree_with_each_other(name):
    topology = load_topology(name)
    accelerator, up = topology.accelerator, topology.scale_up
    if accelerator.peak_fp8_tflops is not None:  # dense FP8 is twice dense BF16 on all of them
        assert accelerator.peak_fp8_tflops == pytest.approx(
            2 * accelerator.peak_bf16_tflops, rel=2e-3
        )
    assert up.domain_size % topology.accelerators_per_node == 0
    if up.fabric == "mesh":  # 7 equal links per GPU in an 8-GPU mesh
        assert up.bandwidth_gbytes_s / (up.domain_size - 1) in (64.0, pytest.approx(76.8))
    if topology.nodes > topology.nodes_per_domain:
        assert topology.scale_out is not None


@pytest.mark.parametrize(
    ("name", "bf16", "up_gbytes_s", "domain", "nics", "gbits"),
    [
        ("dgx-a100", 312, 300, 8, 8, 200),
        ("dgx-h100", 989, 450, 8, 8, 400),
        ("hgx-h200", 989, 450, 8, 8, 400),
        ("dgx-b200", 2250, 900, 8, 8, 400),
        ("gb200-nvl72", 2500, 900, 72, 4, 400),
        ("mi300x", 1307.4, 448, 8, 8, 400),
    ],
)
def test_catalog_holds_the_datasheet_figures(name, bf16, up_gbytes_s, domain, nics, gbits):
    topology = load_topology(name)
    assert topology.accelerator.peak_bf16_tflops == bf16
    assert topology.scale_up.bandwidth_gbytes_s == up_gbytes_s
    assert topology.scale_up.domain_size == domain
    assert (topology.scale_out.nics_per_node, topology.scale_out.nic_gbits_s) == (nics, gbits)


def test_gb200_nodes_are_trays_of_one_rack_domain():
    topology = load_topology("gb200-nvl72")
    assert topology.accelerators_per_node == 4
    assert topology.nodes_per_domain == 18
    assert topology.node_scale_out_gbytes_s == 200.0  # 4 x 400 Gb/s


def test_cpu_local_is_one_node_without_scale_out():
    topology = load_topology("cpu-local")
    assert (topology.nodes, topology.accelerators_per_node) == (1, 2)
    assert topology.scale_up.kind == "shm" and topology.scale_out is None
    assert "measured" in topology.sources["accelerator.peak_bf16_tflops"].lower()


# ---- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CATALOG)
def test_to_dict_and_back_is_the_same_topology(name):
    topology = load_topology(name)
    again = topology_from_dict(to_dict(topology), topology.origin)
    assert again == topology


@pytest.mark.parametrize("name", CATALOG)
def test_rendered_yaml_loads_back_equal(name, tmp_path):
    topology = load_topology(name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(render.to_yaml(topology), encoding="utf-8")
    assert dataclasses.replace(load_topology(path), origin=name) == topology


def test_with_nodes_keeps_everything_else():
    topology = load_topology("dgx-h100").with_nodes(2)
    assert topology.nodes == 2 and topology.world_size == 16
    assert topology.scale_out == load_topology("dgx-h100").scale_out


def test_toml_file_loads_like_yaml(tmp_path):
    path = tmp_path / "fabric.toml"
    path.write_text(_toml(GOOD), encoding="utf-8")
    assert load_topology(path) == topology_from_dict(GOOD, str(path))


# ---- bad files: TopologyError naming the field path ------------------------------------------


def _changed(section: str, key: str, value):
    data = {name: dict(part) if isinstance(part, dict) else part for name, part in GOOD.items()}
    target = data[section] if section else data
    if value is _DELETE:
        del target[key]
    else:
        target[key] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            _changed("scale_up", "latency_us", _DELETE),
            "scale_up.latency_us: is required and missing from the file",
        ),
        (
            _changed("", "accelerator", _DELETE),
            "accelerator: is required and missing from the file",
        ),
        (_changed("scale_up", "bandwidth_gbytes_s", -3), "scale_up.bandwidth_gbytes_s: -3 must be"),
        (
            _changed("scale_out", "nic_gbits_s", 0),
            "scale_out.nic_gbits_s: 0 must be from 0.008 to 8e+06",
        ),
        (_changed("scale_out", "nic_speed", 400), "scale_out.nic_speed: 400 is not a known field"),
        (_changed("", "gpus", 8), "gpus: 8 is not a known field"),
        (_changed("", "nodes", "four"), "nodes: 'four' must be an integer from 1 to 1,000,000"),
        (_changed("", "nodes", True), "nodes: True must be an integer"),
        (_changed("", "nodes", 10**400), "nodes: '1000"),
        (_changed("scale_up", "bandwidth_gbytes_s", 10**400), "scale_up.bandwidth_gbytes_s: '1000"),
        (
            _changed("", "accelerators_per_node", 8.0),
            "accelerators_per_node: 8.0 must be an integer",
        ),
        (
            _changed("accelerator", "peak_bf16_tflops", "lots"),
            "accelerator.peak_bf16_tflops: 'lots'",
        ),
        (
            _changed("scale_up", "kind", "infinifabric"),
            "scale_up.kind: 'infinifabric' must be one of",
        ),
        (_changed("scale_out", "kind", "carrier-pigeon"), "scale_out.kind: 'carrier-pigeon'"),
        (_changed("scale_up", "fabric", "ring"), "scale_up.fabric: 'ring' must be one of"),
        (
            _changed("scale_up", "domain_size", 6),
            "scale_up.domain_size: 6 must divide or be a mult",
        ),
        (
            _changed("", "scale_out", _DELETE),
            "scale_out: is required and missing from the file: 4 nodes do not fit",
        ),
        (_changed("scale_out", "oversubscription", 0.5), "scale_out.oversubscription: 0.5 must be"),
        (_changed("scale_out", "rail_optimized", "yes"), "scale_out.rail_optimized: 'yes' must be"),
        (
            _changed("", "sources", {"scale_up.bandwith": "x"}),
            "sources: 'scale_up.bandwith' is not",
        ),
        (_changed("", "sources", {"nodes": ""}), "sources: {'nodes': ''} must map field paths"),
        (_changed("", "scale_up", [1, 2]), "scale_up: [1, 2] must be a mapping of fields"),
    ],
)
def test_bad_yaml_file_names_the_field(tmp_path, data, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert needle in str(caught.value)
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("suffix", "text", "needle"),
    [
        (".yaml", "name: x\n  nodes: [\n", "topology file: '{path}' is not valid YAML"),
        (".yaml", "", "topology: None must be a mapping of fields"),
        (".yaml", "- dgx-h100\n", "topology: ['dgx-h100'] must be a mapping of fields"),
        (".toml", "name = \n", "topology file: '{path}' is not valid TOML"),
        (
            ".toml",
            "__GOOD_NEGATIVE__",
            "scale_up.bandwidth_gbytes_s: -300 must be from 0.001 to 1e+06",
        ),
    ],
)
def test_malformed_files_are_one_line_errors(tmp_path, suffix, text, needle):
    path = tmp_path / f"bad{suffix}"
    if text == "__GOOD_NEGATIVE__":
        text = _toml(_changed("scale_up", "bandwidth_gbytes_s", -300))
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert needle.format(path=path) in str(caught.value)
    assert "\n" not in str(caught.value)


BILLION_LAUGHS = (
    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "name: *i\n"
)


@pytest.mark.timeout(10)
def test_yaml_aliases_are_refused_before_they_expand(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    assert len(BILLION_LAUGHS) < 600  # expands to 9**9 strings
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert str(caught.value).startswith(f"topology file: '{path}' uses a YAML alias (*a at line 2)")
    anchors_only = tmp_path / "anchors.yaml"  # an anchor that nothing refers to is harmless
    anchors_only.write_text(
        (Path(__file__).resolve().parents[3] / "topologies" / "dgx-h100.yaml")
        .read_text()
        .replace("name:", "name: &n", 1),
        encoding="utf-8",
    )
    assert load_topology(anchors_only).name == "dgx-h100"


def test_unknown_name_and_directory_are_refused(tmp_path):
    with pytest.raises(
        TopologyError,
        match="--topology: 'dgx-z900' is neither a file nor a catalog name .*dgx-h100",
    ):
        load_topology("dgx-z900")
    with pytest.raises(TopologyError, match="topology: .* is not a file"):
        load_topology(tmp_path, "topology")


def test_unsourced_figures_lists_set_numbers_but_not_defaults():
    data = {**GOOD, "sources": {"nodes": "cluster plan"}}
    data["scale_out"] = {**GOOD["scale_out"], "oversubscription": 1.0}  # the default: not listed
    missing = unsourced_figures(topology_from_dict(data))
    assert "nodes" not in missing and "scale_out.oversubscription" not in missing
    assert {"accelerators_per_node", "scale_up.bandwidth_gbytes_s", "scale_out.latency_us"} <= set(
        missing
    )
    data["scale_out"]["oversubscription"] = 2.0
    assert "scale_out.oversubscription" in unsourced_figures(topology_from_dict(data))


def test_field_paths_cover_every_schema_field():
    paths = field_paths()
    assert "scale_out.oversubscription" in paths and "accelerator.memory_gib" in paths
    assert "origin" not in paths and "sources" not in paths


# ---- detect: parsers ----------------------------------------------------------------------

NVIDIA_SMI_QUERY = """\
NVIDIA H100 80GB HBM3, 81559 MiB
NVIDIA H100 80GB HBM3, 81559 MiB
NVIDIA H100 80GB HBM3, 81559 MiB
NVIDIA H100 80GB HBM3, 81559 MiB
"""

NVIDIA_TOPO_NVLINK = """\
\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV18\tNV18\tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tNV18\tSYS\tPXB\t0-55,112-167\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tNV18\tSYS\tSYS\t56-111,168-223\t1\t\tN/A
GPU3\tNV18\tNV18\tNV18\t X \tSYS\tSYS\t56-111,168-223\t1\t\tN/A
NIC0\tPXB\tSYS\tSYS\tSYS\t X \tSYS
NIC1\tSYS\tPXB\tSYS\tSYS\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

NVIDIA_TOPO_PCIE = """\
        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity
GPU0     X      PIX     SYS     0-23            0
GPU1    PIX      X      SYS     0-23            0
GPU2    SYS     SYS      X      24-47           1
"""

NVLINK_STATUS = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4f6a0e5d-0000-0000-0000-000000000000)
\t Link 0: 26.562 GB/s
\t Link 1: 26.562 GB/s
\t Link 2: <inactive>
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-4f6a0e5d-0000-0000-0000-000000000001)
\t Link 0: 26.562 GB/s
"""

ROCM_PRODUCT = """\
============================ ROCm System Management Interface ============================
====================================== Product Info ======================================
GPU[0]\t\t: Card Series: \t\tAMD Instinct MI300X OAM
GPU[0]\t\t: Card Model: \t\t0x74a1
GPU[0]\t\t: Card Vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]
GPU[0]\t\t: Card SKU: \t\tM3000100
GPU[1]\t\t: Card Series: \t\tAMD Instinct MI300X OAM
GPU[1]\t\t: Card SKU: \t\tM3000100
==========================================================================================
================================== End of ROCm SMI Log ===================================
"""

ROCM_VRAM = """\
============================ ROCm System Management Interface ============================
================================== Memory Usage (Bytes) ==================================
GPU[0]\t\t: VRAM Total Memory (B): 205822885888
GPU[0]\t\t: VRAM Total Used Memory (B): 298856448
GPU[1]\t\t: VRAM Total Memory (B): 205822885888
"""

ROCM_TOPOTYPE = """\
============================ ROCm System Management Interface ============================
=============================== Link Type between two GPUs ===============================
       GPU0         GPU1         GPU2
GPU0   0            XGMI         XGMI
GPU1   XGMI         0            XGMI
GPU2   XGMI         XGMI         0
================================== End of ROCm SMI Log ===================================
"""


def test_parse_nvidia_smi_query():
    gpus = detect.parse_nvidia_smi_gpus(NVIDIA_SMI_QUERY)
    assert len(gpus) == 4
    assert gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert gpus[0].memory_gib == pytest.approx(79.65, abs=0.01)
    assert detect.parse_nvidia_smi_gpus("NVIDIA GB200, [N/A]\n") == [detect.Gpu("NVIDIA GB200")]
    assert detect.parse_nvidia_smi_gpus("") == []


def test_parse_link_matrices():
    nvlink = detect.parse_gpu_link_matrix(NVIDIA_TOPO_NVLINK)  # header with ANSI underline
    assert nvlink == ["NV18"] * 12  # 4 x 3 off-diagonal cells, NIC columns left out
    assert sorted(set(detect.parse_gpu_link_matrix(NVIDIA_TOPO_PCIE))) == ["PIX", "SYS"]
    assert detect.parse_gpu_link_matrix(ROCM_TOPOTYPE) == ["XGMI"] * 6
    assert detect.parse_gpu_link_matrix("No devices were found\n") == []


def test_parse_nvlink_status_sums_active_links():
    speeds = detect.parse_nvlink_status(NVLINK_STATUS)
    assert speeds == {0: pytest.approx(53.124), 1: pytest.approx(26.562)}


def test_parse_rocm_smi():
    assert detect.parse_rocm_product_names(ROCM_PRODUCT) == ["AMD Instinct MI300X OAM"] * 2
    vram = detect.parse_rocm_vram(ROCM_VRAM)
    assert vram[0] == pytest.approx(191.69, abs=0.01) and set(vram) == {0, 1}


@pytest.mark.parametrize(
    ("text", "gbits"),
    [
        ("400 Gb/sec (4X NDR)\n", 400.0),
        ("200 Gb/sec (4X HDR)", 200.0),
        ("100 Gb/sec (4X EDR)", 100.0),
        ("56 Gb/sec (4X FDR)", 56.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("800 Gb/sec (4X XDR)", 800.0),
        ("", None),
        ("Unknown", None),
    ],
)
def test_parse_ib_rate(text, gbits):
    assert detect.parse_ib_rate(text) == gbits


@pytest.mark.parametrize(
    ("text", "gbits"),
    [
        ("400000\n", 400.0),
        ("100000", 100.0),
        ("25000", 25.0),
        ("-1", None),
        ("", None),
    ],
)
def test_parse_ethernet_speed(text, gbits):
    assert detect.parse_ethernet_speed(text) == gbits


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("NVIDIA H100 80GB HBM3", "dgx-h100"),
        ("NVIDIA H100 PCIe", "pcie-8gpu"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", "hgx-h200"),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA B200", "dgx-b200"),
        ("NVIDIA GB200", "gb200-nvl72"),
        ("NVIDIA A100-SXM4-80GB", "dgx-a100"),
        ("AMD Instinct MI300X OAM", "mi300x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("Tesla T4", None),
    ],
)
def test_catalog_match(name, entry):
    assert detect.catalog_match(name) == entry


# ---- detect: facts -> a valid topology ----------------------------------------------------


def _detected(facts: detect.NodeFacts):
    found = detect.describe(facts, load_topology)
    topology = topology_from_dict(found.data, "detect")
    assert unsourced_figures(topology) == []  # every number it writes says where it came from
    return topology, found.notes


def test_describe_dgx_h100_node():
    facts = detect.NodeFacts(
        hostname="dgx-01",
        cpu_count=224,
        gpus=tuple(detect.parse_nvidia_smi_gpus(NVIDIA_SMI_QUERY * 2)),
        gpu_links=("NV18",) * 56,
        nics=tuple(detect.Nic(f"mlx5_{i}/1", 400.0, "infiniband") for i in range(8))
        + (detect.Nic("mlx5_8/1", 200.0, "roce"), detect.Nic("mlx5_9/1", 200.0, "roce")),
    )
    topology, notes = _detected(facts)
    assert topology.name == "detected-dgx-01"
    assert (topology.nodes, topology.accelerators_per_node) == (1, 8)
    assert topology.accelerator.peak_bf16_tflops == 989
    assert topology.accelerator.memory_gib == pytest.approx(79.6)
    assert (topology.scale_up.kind, topology.scale_up.bandwidth_gbytes_s) == ("nvlink", 450)
    assert (
        topology.scale_out.kind,
        topology.scale_out.nics_per_node,
        topology.scale_out.nic_gbits_s,
    ) == ("infiniband", 8, 400)
    assert topology.sources["accelerator.peak_bf16_tflops"].startswith("ASSUMED")
    assert any("slower ones left out" in note for note in notes)


def test_describe_unknown_gpu_gets_placeholders():
    facts = detect.NodeFacts(gpus=(detect.Gpu("Tesla T4", 15.0),) * 2, gpu_links=("PHB", "PHB"))
    topology, notes = _detected(facts)
    assert topology.accelerator.peak_bf16_tflops == 1.0
    assert topology.sources["accelerator.peak_bf16_tflops"].startswith("PLACEHOLDER")
    assert topology.scale_up.kind == "pcie" and topology.scale_up.fabric == "bus"
    assert topology.sources["scale_up.bandwidth_gbytes_s"].startswith("PLACEHOLDER")
    assert any("must be edited" in note for note in notes)
    assert topology.scale_out is None


def test_describe_gb200_tray_keeps_the_rack_domain():
    facts = detect.NodeFacts(
        gpus=(detect.Gpu("NVIDIA GB200", 184.0),) * 4, gpu_links=("NV18",) * 12
    )
    topology, notes = _detected(facts)
    assert topology.scale_up.domain_size == 72 and topology.accelerators_per_node == 4
    assert any("domain of 72" in note for note in notes)


def test_describe_mi300x_node_from_rocm_output():
    names = detect.parse_rocm_product_names(ROCM_PRODUCT)
    vram = detect.parse_rocm_vram(ROCM_VRAM)
    facts = detect.NodeFacts(
        gpus=tuple(detect.Gpu(n, vram.get(i)) for i, n in enumerate(names)),
        gpu_links=("XGMI", "XGMI"),
    )
    topology, _ = _detected(facts)
    assert topology.accelerator.peak_bf16_tflops == 1307.4
    assert (topology.scale_up.kind, topology.scale_up.fabric) == ("xgmi", "mesh")


def test_describe_cpu_only_node_looks_like_cpu_local():
    facts = detect.NodeFacts(
        hostname="vm",
        cpu_count=2,
        cpu=parse_cpuinfo("vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"),
        memory_gib=23.5,
        missing=("nvidia-smi (no NVIDIA GPU or driver)",),
    )
    topology, notes = _detected(facts)
    reference = load_topology("cpu-local")
    assert (topology.nodes, topology.accelerators_per_node) == (1, 2)
    assert topology.scale_up.kind == "shm" and topology.scale_out is None
    assert topology.accelerator.peak_bf16_tflops == reference.accelerator.peak_bf16_tflops
    assert "not found: nvidia-smi (no NVIDIA GPU or driver)" in notes
    assert any(note.startswith("assumed:") for note in notes)


def test_gather_reads_rdma_ports_from_sysfs(tmp_path):
    for device, rate, layer, state in [
        ("mlx5_0", "400 Gb/sec (4X NDR)", "InfiniBand", "4: ACTIVE"),
        ("mlx5_1", "400 Gb/sec (4X NDR)", "InfiniBand", "1: DOWN"),
        ("mlx5_2", "200 Gb/sec (2X NDR)", "Ethernet", "4: ACTIVE"),
    ]:
        port = tmp_path / "sys/class/infiniband" / device / "ports" / "1"
        port.mkdir(parents=True)
        (port / "rate").write_text(rate + "\n")
        (port / "link_layer").write_text(layer + "\n")
        (port / "state").write_text(state + "\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16777216 kB\n")
    facts = detect.gather(tmp_path)
    assert facts.nics == (
        detect.Nic("mlx5_0/1", 400.0, "infiniband"),
        detect.Nic("mlx5_2/1", 200.0, "roce"),
    )
    assert facts.cpu.model_name == "Test CPU 9000" and facts.memory_gib == 16.0


def _leaves(data: dict, prefix: str = ""):
    for key, value in data.items():
        if key == "sources":
            continue
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _toml(data: dict) -> str:
    lines, tables = [], []
    for key, value in data.items():
        (tables if isinstance(value, dict) else lines).append((key, value))
    text = "".join(f"{key} = {_toml_value(value)}\n" for key, value in lines)
    for name, table in tables:
        text += f"\n[{name}]\n" + "".join(
            f"{key} = {_toml_value(value)}\n" for key, value in table.items()
        )
    return text


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)
