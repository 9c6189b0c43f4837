"""`topo detect` on a node without GPUs: the CPU is named as /proc/cpuinfo names it (the
CPUID vendor believed over a VM's configured model name), the rank count is the CPUs this
process may use, and cpu-local says plainly that it is an example measured elsewhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from collbench.topologies import detect
from collbench.topologies.detect import CpuInfo, parse_cpuinfo
from collbench.topologies.loader import load_topology
from collbench.topologies.schema import topology_from_dict


def _cpuinfo(vendor_id: str, model_name: str, flags: str = "fpu sse2 avx2") -> str:
    block = f"processor\t: {{}}\nvendor_id\t: {vendor_id}\nmodel name\t: {model_name}\n"
    block += f"flags\t\t: {flags}\n"
    return "\n".join(block.format(index) for index in range(2))


XEON = "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
GRACE = (
    "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (_cpuinfo("GenuineIntel", XEON), XEON),
        (_cpuinfo("GenuineIntel", XEON, "fpu avx2 hypervisor"), f"{XEON}, virtual machine"),
        (_cpuinfo("AuthenticAMD", "AMD EPYC", "fpu hypervisor"), "AMD EPYC, virtual machine"),
        # QEMU/KVM keeps the host's vendor_id under a configured `-cpu EPYC` model
        (
            _cpuinfo("GenuineIntel", "AMD EPYC Processor", "fpu hypervisor"),
            "Intel, presented by the VM as 'AMD EPYC Processor'",
        ),
        (
            _cpuinfo("GenuineIntel", "QEMU Virtual CPU version 2.5+", "fpu hypervisor"),
            "Intel QEMU Virtual CPU version 2.5+, virtual machine",
        ),
        (GRACE, "Arm CPU part 0xd4f"),
        ("", "unknown model"),
    ],
)
def test_cpu_label_from_proc_cpuinfo(text, label):
    assert parse_cpuinfo(text).label() == label


def _describe_cpu_node(tmp_path: Path, cpuinfo: str) -> tuple[dict, list[str]]:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(cpuinfo, encoding="utf-8")
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16777216 kB\n", encoding="utf-8")
    facts = detect.gather(tmp_path)
    facts = detect.NodeFacts(cpu_count=2, cpu=facts.cpu, memory_gib=facts.memory_gib)
    found = detect.describe(facts, load_topology)
    topology_from_dict(found.data, "detect")
    return found.data, found.notes


def test_an_intel_xeon_vm_presented_as_epyc_is_named_intel(tmp_path):
    data, notes = _describe_cpu_node(
        tmp_path, _cpuinfo("GenuineIntel", "AMD EPYC Processor", "fpu avx2 hypervisor")
    )
    name = data["accelerator"]["name"]
    assert name == "CPU (Intel, presented by the VM as 'AMD EPYC Processor', one core per rank)"
    assert any("vendor_id GenuineIntel but model name 'AMD EPYC Processor'" in n for n in notes)


def test_a_xeon_node_borrows_no_cpu_from_cpu_local(tmp_path):
    data, notes = _describe_cpu_node(tmp_path, _cpuinfo("GenuineIntel", XEON))
    assert data["accelerator"]["name"] == f"CPU ({XEON}, one core per rank)"
    assert "EPYC" not in yaml.safe_dump(data)
    source = data["sources"]["accelerator.peak_bf16_tflops"]
    assert source.startswith("ASSUMED") and "not on this CPU" in source
    assert f"found: CPU {XEON} (/proc/cpuinfo)" in notes


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="needs Linux /proc/cpuinfo")
def test_gather_names_this_machine_s_cpu_as_its_proc_cpuinfo_does():
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    lines = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in text.splitlines())
        if key.strip() in ("vendor_id", "model name")
    )
    cpu = detect.gather().cpu
    assert cpu.model_name == lines.get("model name", cpu.model_name)
    assert cpu.vendor_id == lines.get("vendor_id", cpu.vendor_id)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_detect_counts_the_cpus_this_process_may_use():
    done = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-m", "collbench", "topo", "detect"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    if data["scale_up"]["kind"] == "shm":  # a CPU node: one rank per usable CPU
        assert data["accelerators_per_node"] == 1
        assert data["scale_up"]["domain_size"] == 1


def test_cpu_local_says_it_is_an_example_measured_elsewhere():
    topology = load_topology("cpu-local")
    assert topology.description.startswith("An example, not your machine:")
    assert "collbench topo detect" in topology.description
    assert "this development box" not in topology.description.lower()
    assert "the example VM" in topology.sources["nodes"]


def test_cpu_info_defaults_are_empty():
    assert CpuInfo().label() == "unknown model" and not CpuInfo().presented_by_hypervisor
