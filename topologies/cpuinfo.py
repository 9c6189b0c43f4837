"""What /proc/cpuinfo says about the CPU, for `collbench topo detect` on a node without GPUs.

Two lines can disagree. `vendor_id` is the CPUID vendor string; the `model name` is the
brand string, and under a hypervisor it is the CPU model the VM was configured with: QEMU/KVM
gives a guest started with `-cpu EPYC` on an Intel host the model name "AMD EPYC Processor"
while vendor_id stays GenuineIntel. The vendor is then the one to believe, and the name says
the model is the VM's. Pure: text in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    """The first processor of /proc/cpuinfo; every field may be empty."""

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
