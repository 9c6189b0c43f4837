"""`collbench topo detect`: describe the node this runs on as a topology file, best effort.

The method, in full: docs/topologies.md#topologies-detect-py.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.topologies.schema import Topology, field_paths

PLACEHOLDER = "PLACEHOLDER"
ASSUMED = "ASSUMED"

# Accelerator name (upper case) -> the catalog entry whose accelerator it is. First match wins,
# so GB200 comes before B200. "NVL" cards (H100 NVL, H200 NVL) are different parts: no match.
_CATALOG_BY_NAME = (
    (r"GB200", "gb200-nvl72"),
    (r"B200", "dgx-b200"),
    (r"H200", "hgx-h200"),
    (r"H100.*PCIE", "pcie-8gpu"),
    (r"H100", "dgx-h100"),
    (r"A100", "dgx-a100"),
    (r"MI355X", "mi355x"),
    (r"MI300X|MI325X", "mi300x"),
)
# Per-ring-step latency by link kind when no catalog entry matches (see the catalog sources:
# NCCL / RCCL src/graph/tuning.cc hwLat, LL protocol; shm is this repo's cpu-local figure).
_STEP_LATENCY_US = {
    "nvlink": 0.6,
    "xgmi": 2.3,
    "pcie": 1.0,
    "shm": 150.0,
    "infiniband": 2.7,
    "roce": 2.7,
    "ethernet": 50.0,
}


# CPUID vendor strings (x86) and MIDR implementer codes (Arm) -> the vendor's name.
_X86_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon"}
_ARM_IMPLEMENTERS = {
    "0x41": "Arm",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x61": "Apple",
    "0xc0": "Ampere",
}


@dataclass(frozen=True)
class CpuInfo:
    """The first processor of /proc/cpuinfo; every field may be empty. Under a hypervisor the
    model name is the CPU model the VM was configured with (QEMU's `-cpu EPYC` on an Intel
    host says "AMD EPYC Processor") while vendor_id stays the host's: the vendor is the one
    to believe."""

    vendor: str = ""  # Intel, AMD, Hygon, or an Arm implementer (from vendor_id / CPU implementer)
    vendor_id: str = ""  # the raw line: GenuineIntel, AuthenticAMD, 0x41 ...
    model_name: str = ""  # the brand string; in a VM, the CPU model the hypervisor presents
    virtual: bool = False  # the `hypervisor` flag is set: this is a virtual machine

    @property
    def presented_by_hypervisor(self) -> bool:
        """The model name names another vendor than CPUID's: a VM's configured CPU model."""
        named = [vendor for vendor in _X86_VENDORS.values() if vendor in self.model_name]
        return bool(self.vendor and named and self.vendor not in named)

    def label(self) -> str:
        """'Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz, virtual machine', or for a VM whose
        model name names another vendor: "Intel, presented by the VM as 'AMD EPYC'"."""
        if self.presented_by_hypervisor:
            return f"{self.vendor}, presented by the VM as {self.model_name!r}"
        name = self.model_name or "unknown model"
        if self.vendor and self.vendor.lower() not in name.lower():
            name = f"{self.vendor} {name}"
        return name + (", virtual machine" if self.virtual else "")


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gib: float | None = None


@dataclass(frozen=True)
class Nic:
    device: str
    gbits_s: float
    kind: str  # infiniband, roce or ethernet


@dataclass(frozen=True)
class NodeFacts:
    """What `gather()` read from this node; every field may be empty."""

    hostname: str = "localhost"
    cpu_count: int = 1  # CPUs this process may run on (its affinity mask), else os.cpu_count
    cpu: CpuInfo = CpuInfo()
    memory_gib: float | None = None
    gpus: tuple[Gpu, ...] = ()
    gpu_links: tuple[str, ...] = ()  # off-diagonal cells of the GPU link matrix: NV18, XGMI...
    nvlink_gbytes_s: float | None = None  # GPU 0's link speeds summed (nvidia-smi nvlink -s)
    nics: tuple[Nic, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass
class Detected:
    data: dict[str, Any]  # a topology mapping that `topology_from_dict` accepts
    notes: list[str] = field(default_factory=list)


# ---- pure parsers -------------------------------------------------------------------------


def parse_cpuinfo(text: str) -> CpuInfo:
    """The vendor, model name and hypervisor flag of the first processor in /proc/cpuinfo."""
    first = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0] if text.strip() else ""
    lines: dict[str, str] = {}
    for line in first.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            lines.setdefault(key.strip().lower(), value.strip())
    vendor_id = lines.get("vendor_id") or lines.get("cpu implementer", "")
    vendor = _X86_VENDORS.get(vendor_id) or _ARM_IMPLEMENTERS.get(vendor_id.lower(), "")
    model = lines.get("model name", "")
    if not model and lines.get("cpu part"):
        model = f"CPU part {lines['cpu part']}"  # Arm cpuinfo has no model name
    flags = lines.get("flags", "").split()
    return CpuInfo(vendor, vendor_id, model, "hypervisor" in flags)


def parse_nvidia_smi_gpus(text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=name,memory.total --format=csv,noheader` -> GPUs."""
    gpus = []
    for line in text.splitlines():
        name, _, memory = line.rpartition(",")
        if not name.strip():
            continue
        match = re.match(r"\s*([\d.]+)\s*MiB", memory)
        gpus.append(Gpu(name.strip(), float(match.group(1)) / 1024 if match else None))
    return gpus


def parse_gpu_link_matrix(text: str) -> list[str]:
    """GPU-to-GPU cells of `nvidia-smi topo -m` or `rocm-smi --showtopotype`, diagonal left out.

    Both print a header of GPU0 GPU1 ... and one row per GPU; the cells say NV18 / PIX / SYS
    (NVIDIA) or XGMI / PCIE (AMD)."""
    count, cells = 0, []
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # nvidia-smi underlines its header row
    for line in text.splitlines():
        tokens = line.split()
        if not count and tokens and all(re.fullmatch(r"GPU\d+", t) for t in tokens[:2]):
            count = next(
                (i for i, t in enumerate(tokens) if not re.fullmatch(r"GPU\d+", t)), len(tokens)
            )
        elif count and tokens and re.fullmatch(r"GPU\d+", tokens[0]):
            row = int(tokens[0][3:])
            cells += [
                cell.upper() for column, cell in enumerate(tokens[1 : 1 + count]) if column != row
            ]
    return cells


def parse_nvlink_status(text: str) -> dict[int, float]:
    """`nvidia-smi nvlink -s` -> GPU index -> sum of its active links' GB/s."""
    speeds: dict[int, float] = {}
    gpu = None
    for line in text.splitlines():
        header = re.match(r"\s*GPU (\d+):", line)
        if header:
            gpu = int(header.group(1))
            speeds[gpu] = 0.0
            continue
        link = re.match(r"\s*Link \d+:\s*([\d.]+)\s*GB/s", line)
        if link and gpu is not None:
            speeds[gpu] += float(link.group(1))
    return speeds


def parse_rocm_product_names(text: str) -> list[str]:
    """`rocm-smi --showproductname` -> one product name per GPU, in GPU order."""
    names: dict[int, str] = {}
    for line in text.splitlines():
        match = re.match(r"\s*GPU\[(\d+)\]\s*:\s*Card [Ss]eries:\s*(.+?)\s*$", line)
        if match:
            names[int(match.group(1))] = match.group(2)
    return [names[index] for index in sorted(names)]


def parse_rocm_vram(text: str) -> dict[int, float]:
    """`rocm-smi --showmeminfo vram` -> GPU index -> total VRAM in GiB."""
    sizes = {}
    for line in text.splitlines():
        match = re.match(r"\s*GPU\[(\d+)\].*VRAM Total Memory \(B\):\s*(\d+)", line)
        if match:
            sizes[int(match.group(1))] = int(match.group(2)) / 2**30
    return sizes


def parse_ib_rate(text: str) -> float | None:
    """/sys/class/infiniband/*/ports/*/rate, e.g. "400 Gb/sec (4X NDR)" -> 400.0 Gb/s."""
    match = re.match(r"\s*([\d.]+)\s*Gb/sec", text)
    return float(match.group(1)) if match else None


def parse_ethernet_speed(text: str) -> float | None:
    """/sys/class/net/*/speed (Mb/s, -1 when unknown) -> Gb/s, or None."""
    try:
        megabits = int(text.strip())
    except ValueError:
        return None
    return megabits / 1000 if megabits > 0 else None


def catalog_match(gpu_name: str) -> str | None:
    """The catalog entry whose accelerator `gpu_name` is, or None when unknown."""
    name = gpu_name.upper()
    if re.search(r"\bNVL\b", name):
        return None
    return next((entry for pattern, entry in _CATALOG_BY_NAME if re.search(pattern, name)), None)


# ---- facts -> topology --------------------------------------------------------------------


def describe(facts: NodeFacts, lookup: Callable[[str], Topology]) -> Detected:
    """The topology mapping for `facts`; `lookup` loads a catalog entry by name."""
    found = Detected({}, [f"not found: {item}" for item in facts.missing])
    sources: dict[str, str] = {}
    if facts.gpus:
        per_node, accelerator, reference = _gpu_accelerator(facts, lookup, sources, found)
        scale_up = _gpu_scale_up(facts, reference, sources, found)
    else:
        per_node, accelerator, scale_up = _cpu_node(facts, lookup, sources, found)
    sources["nodes"] = "detect: this one node; set the cluster's node count (or use --nodes)"
    sources["accelerators_per_node"] = (
        f"detected: {per_node} {'GPUs' if facts.gpus else 'CPUs (one rank each)'}"
    )
    found.data = {
        "name": "detected-" + re.sub(r"[^a-z0-9-]+", "-", facts.hostname.lower()).strip("-"),
        "description": f"Detected on {facts.hostname} by collbench topo detect; check the "
        f"figures whose source says {ASSUMED} or {PLACEHOLDER}.",
        "nodes": 1,
        "accelerators_per_node": per_node,
        "accelerator": accelerator,
        "scale_up": scale_up,
    }
    scale_out = _scale_out(facts.nics, sources, found)
    if scale_out:
        found.data["scale_out"] = scale_out
    found.data["sources"] = {path: sources[path] for path in field_paths() if path in sources}
    return found


def _gpu_accelerator(
    facts: NodeFacts, lookup: Callable[[str], Topology], sources: dict[str, str], found: Detected
) -> tuple[int, dict[str, Any], Topology | None]:
    gpu = facts.gpus[0]
    entry = catalog_match(gpu.name)
    reference = lookup(entry) if entry else None
    accelerator: dict[str, Any] = {"name": gpu.name}
    if reference:
        known = reference.accelerator
        note = (
            f"{ASSUMED}: looked up by name in catalog entry {entry} (collbench topo show {entry})"
        )
        # The peaks and what the compute model prices with come from that entry.
        for name in (
            "peak_bf16_tflops",
            "peak_fp8_tflops",
            "hbm_gbytes_s",
            "sm_count",
            "matmul_fraction",
            "matmul_fraction_fp8",
            "peak_fp32_tflops",
            "peak_tf32_tflops",
        ):
            if getattr(known, name):
                accelerator[name] = getattr(known, name)
                sources[f"accelerator.{name}"] = note
        found.notes.append(f"assumed: peak TFLOP/s of {gpu.name!r} from catalog entry {entry}")
    else:
        accelerator["peak_bf16_tflops"] = 1.0
        sources["accelerator.peak_bf16_tflops"] = (
            f"{PLACEHOLDER}: no known peak for {gpu.name!r}; edit (dense BF16 TFLOP/s from "
            "the datasheet)"
        )
        found.notes.append(
            f"placeholder: peak_bf16_tflops of unknown accelerator {gpu.name!r} "
            "is 1.0 and must be edited"
        )
    if gpu.memory_gib:
        accelerator["memory_gib"] = round(gpu.memory_gib, 1)
        sources["accelerator.memory_gib"] = "detected: GPU 0 total memory (nvidia-smi / rocm-smi)"
    found.notes.append(f"found: {len(facts.gpus)} x {gpu.name}")
    return len(facts.gpus), accelerator, reference


def _gpu_scale_up(
    facts: NodeFacts, reference: Topology | None, sources: dict[str, str], found: Detected
) -> dict[str, Any]:
    count = len(facts.gpus)
    if not facts.gpu_links:
        kind = reference.scale_up.kind if reference else "pcie"
        found.notes.append(f"assumed: GPU links are {kind} (no GPU link matrix could be read)")
    elif all(cell.startswith("NV") for cell in facts.gpu_links):
        kind = "nvlink"
    elif all(cell == "XGMI" for cell in facts.gpu_links):
        kind = "xgmi"
    else:
        kind = "pcie"  # PIX/PXB/PHB/NODE/SYS, or links only between some pairs
    sources["scale_up.domain_size"] = f"detected: {count} GPUs on this node"
    domain = count
    if reference and reference.scale_up.kind == kind:
        known = reference.scale_up
        bandwidth, latency, fabric = known.bandwidth_gbytes_s, known.latency_us, known.fabric
        if known.domain_size > count and known.domain_size % count == 0:
            domain = known.domain_size  # GB200 NVL72: the domain spans trays
            sources["scale_up.domain_size"] = f"{ASSUMED}: {reference.name} domain of {domain}"
            found.notes.append(f"assumed: scale-up domain of {domain} ({reference.name})")
        note = f"{ASSUMED}: catalog entry {reference.name}"
        sources["scale_up.bandwidth_gbytes_s"] = sources["scale_up.latency_us"] = note
    else:
        bandwidth, note = _link_bandwidth(kind, facts, count)
        sources["scale_up.bandwidth_gbytes_s"] = note
        latency = _STEP_LATENCY_US[kind]
        fabric = {"xgmi": "mesh", "pcie": "bus"}.get(kind, "switch")
        sources["scale_up.latency_us"] = (
            f"{ASSUMED}: per-step {kind} latency of NCCL/RCCL tuning.cc (as in the catalog)"
        )
        if note.startswith(PLACEHOLDER):
            found.notes.append(f"placeholder: scale_up.bandwidth_gbytes_s ({kind}) must be edited")
    found.notes.append(
        f"found: GPU links {kind}"
        if facts.gpu_links
        else "not found: GPU link matrix (nvidia-smi topo -m / rocm-smi --showtopotype)"
    )
    return {
        "kind": kind,
        "bandwidth_gbytes_s": bandwidth,
        "latency_us": latency,
        "domain_size": domain,
        "fabric": fabric,
    }


def _link_bandwidth(kind: str, facts: NodeFacts, count: int) -> tuple[float, str]:
    if kind == "nvlink" and facts.nvlink_gbytes_s:
        return facts.nvlink_gbytes_s, "detected: nvidia-smi nvlink -s, GPU 0's link speeds summed"
    if kind == "nvlink":
        links = min(int(cell[2:] or 1) for cell in facts.gpu_links)
        return 25.0 * links, (
            f"{ASSUMED}: {links} NVLinks per GPU pair x 25 GB/s (NVLink3/4 "
            "per direction); check the datasheet"
        )
    per_peer = {"xgmi": 64.0, "pcie": 32.0}[kind]
    total = per_peer * (count - 1) if kind == "xgmi" else per_peer
    return total, (
        f"{PLACEHOLDER}: {kind} at {per_peer:g} GB/s per "
        f"{'peer' if kind == 'xgmi' else 'GPU'} per direction; edit"
    )


def _cpu_node(
    facts: NodeFacts, lookup: Callable[[str], Topology], sources: dict[str, str], found: Detected
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    reference = lookup("cpu-local")
    found.notes.append(f"not found: GPUs; describing {facts.cpu_count} CPU ranks like cpu-local")
    found.notes.append(f"found: CPU {facts.cpu.label()} (/proc/cpuinfo)")
    if facts.cpu.presented_by_hypervisor:
        found.notes.append(
            f"found: vendor_id {facts.cpu.vendor_id} but model name {facts.cpu.model_name!r}: "
            f"the VM's configured CPU model, not the hardware; named by the vendor"
        )
    accelerator: dict[str, Any] = {
        "name": f"CPU ({facts.cpu.label()}, one core per rank)",
        "peak_bf16_tflops": reference.accelerator.peak_bf16_tflops,
    }
    sources["accelerator.peak_bf16_tflops"] = (
        f"{ASSUMED}: catalog entry cpu-local's figure, measured on the example VM it describes "
        "(collbench topo show cpu-local), not on this CPU; measure this CPU"
    )
    found.notes.append(
        "assumed: CPU peak, shm bandwidth and latency from catalog entry cpu-local "
        "(measured on its example VM, not on this machine)"
    )
    if facts.memory_gib:
        accelerator["memory_gib"] = round(facts.memory_gib / facts.cpu_count, 1)
        sources["accelerator.memory_gib"] = "detected: /proc/meminfo MemTotal / CPU count"
    known = reference.scale_up
    sources["scale_up.bandwidth_gbytes_s"] = sources["scale_up.latency_us"] = (
        f"{ASSUMED}: catalog entry cpu-local (gloo over loopback, measured on its example VM, "
        "not on this machine)"
    )
    sources["scale_up.domain_size"] = (
        f"detected: {facts.cpu_count} CPUs this process may run on (its CPU affinity)"
    )
    scale_up = {
        "kind": "shm",
        "bandwidth_gbytes_s": known.bandwidth_gbytes_s,
        "latency_us": known.latency_us,
        "domain_size": facts.cpu_count,
        "fabric": "bus",
    }
    return facts.cpu_count, accelerator, scale_up


def _scale_out(
    nics: tuple[Nic, ...], sources: dict[str, str], found: Detected
) -> dict[str, Any] | None:
    if not nics:
        found.notes.append("not found: network adapters with a known speed; no scale_out")
        return None
    fastest = max(nic.gbits_s for nic in nics)
    chosen = [nic for nic in nics if nic.gbits_s == fastest]
    kind = chosen[0].kind
    names = ", ".join(nic.device for nic in chosen)
    found.notes.append(f"found: {len(chosen)} x {fastest:g} Gb/s {kind} ({names})")
    if len(chosen) < len(nics):
        found.notes.append(
            f"assumed: only the {fastest:g} Gb/s adapters carry collectives "
            f"({len(nics) - len(chosen)} slower ones left out)"
        )
    sources["scale_out.nics_per_node"] = f"detected: {names}"
    sources["scale_out.nic_gbits_s"] = "detected: sysfs port rate / link speed"
    sources["scale_out.latency_us"] = (
        f"{ASSUMED}: NCCL tuning.cc network step for RDMA"
        if kind != "ethernet"
        else f"{PLACEHOLDER}: TCP sockets, no published figure; measure"
    )
    return {
        "kind": kind,
        "nics_per_node": len(chosen),
        "nic_gbits_s": fastest,
        "latency_us": _STEP_LATENCY_US[kind],
    }


# ---- the edge: run the tools, read sysfs ---------------------------------------------------


def _run(argv: list[str]) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def gather(sys_root: Path = Path("/")) -> NodeFacts:
    """Read this node: GPUs (nvidia-smi, else rocm-smi), NICs (sysfs), CPUs and memory."""
    missing: list[str] = []
    facts: dict[str, Any] = {"hostname": socket.gethostname(), "cpu_count": usable_cpu_count()}
    facts["cpu"] = parse_cpuinfo(_read(sys_root / "proc/cpuinfo") or "")
    meminfo = re.search(r"^MemTotal:\s*(\d+) kB", _read(sys_root / "proc/meminfo") or "", re.M)
    facts["memory_gib"] = int(meminfo.group(1)) / 2**20 if meminfo else None
    facts.update(_gather_gpus(missing))
    facts["nics"] = _gather_nics(sys_root, missing)
    return NodeFacts(**facts, missing=tuple(missing))


def usable_cpu_count() -> int:
    """CPUs this process may run on: its affinity mask (a container's, a Slurm allocation's
    or taskset's), which os.cpu_count ignores by counting the whole host."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _gather_gpus(missing: list[str]) -> dict[str, Any]:
    smi = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    if smi and parse_nvidia_smi_gpus(smi):
        speeds = parse_nvlink_status(_run(["nvidia-smi", "nvlink", "-s"]) or "")
        return {
            "gpus": tuple(parse_nvidia_smi_gpus(smi)),
            "gpu_links": tuple(parse_gpu_link_matrix(_run(["nvidia-smi", "topo", "-m"]) or "")),
            "nvlink_gbytes_s": speeds.get(0) or None,
        }
    missing.append("nvidia-smi (no NVIDIA GPU or driver)")
    names = parse_rocm_product_names(_run(["rocm-smi", "--showproductname"]) or "")
    if not names:
        missing.append("rocm-smi (no AMD GPU or ROCm)")
        return {}
    vram = parse_rocm_vram(_run(["rocm-smi", "--showmeminfo", "vram"]) or "")
    links = parse_gpu_link_matrix(_run(["rocm-smi", "--showtopotype"]) or "")
    return {
        "gpus": tuple(Gpu(name, vram.get(index)) for index, name in enumerate(names)),
        "gpu_links": tuple(links),
    }


def _gather_nics(sys_root: Path, missing: list[str]) -> tuple[Nic, ...]:
    nics = []
    for port in sorted((sys_root / "sys/class/infiniband").glob("*/ports/*")):
        state = _read(port / "state") or "ACTIVE"
        rate = parse_ib_rate(_read(port / "rate") or "")
        if rate and "ACTIVE" in state:
            layer = (_read(port / "link_layer") or "InfiniBand").strip().lower()
            kind = "roce" if layer == "ethernet" else "infiniband"
            nics.append(Nic(f"{port.parent.parent.name}/{port.name}", rate, kind))
    if nics:
        return tuple(nics)
    missing.append("RDMA adapters (/sys/class/infiniband)")
    for net in sorted((sys_root / "sys/class/net").glob("*")):
        if not (net / "device").exists():
            continue  # loopback, bridges, veth: no hardware behind them
        speed = parse_ethernet_speed(_read(net / "speed") or "")
        if speed:
            nics.append(Nic(net.name, speed, "ethernet"))
    return tuple(nics)
