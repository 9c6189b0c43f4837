"""`mfu --gemm RUN`: GEMM prices from `collbench gemm` rows, shape by shape, where the run
was measured on the fabric's accelerator, with warnings for what does not apply.

The method, in full: docs/mfu/index.md#analysis-mfu-gemm-prices-py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.compute import GemmPricer, workload_gemms
from collbench.analysis.mfu.estimate import peak_flops
from collbench.analysis.mfu.workload import Workload
from collbench.analysis.model.gemm_model import Gemm, GemmTime
from collbench.core.errors import SpecError
from collbench.core.stats import median
from collbench.store.gemm_rows import GemmRow
from collbench.topologies.schema import Topology

# Accelerator model names as vendors and drivers spell them (torch.cuda.get_device_name
# gives "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X").
SHOWN = 3  # shapes named in a warning before "and N more"


@dataclass(frozen=True)
class MeasuredGemms:
    """Measured TFLOP/s by GEMM shape, from one `collbench gemm` run."""

    run: str
    accelerator: str
    dtype: str
    tflops: dict[str, float]  # shape -> median achieved TFLOP/s


def measured_gemms(rows: Sequence[GemmRow], run: str) -> MeasuredGemms:
    """The run's gemm rows (load_gemm_rows checked each) by shape; SpecError when it holds
    none."""
    if not rows:
        raise SpecError(
            "--gemm", run, "holds no gemm rows (no gemm.jsonl): pass a run of collbench gemm"
        )
    by_shape: dict[str, list[float]] = {}
    for row in rows:
        by_shape.setdefault(row.shape, []).append(float(row.tflops))
    return MeasuredGemms(
        run,
        rows[0].accelerator,
        rows[0].dtype,
        {shape: median(values) for shape, values in by_shape.items()},
    )


def same_accelerator(measured: str, topology_name: str) -> bool:
    """Whether a device name and a topology's accelerator name are the same model (family);
    names without one (CPUs: "AMD EPYC" against "CPU (one vCPU of an AMD EPYC VM)") are the
    same when one holds the other, case and spacing aside."""
    left, right = family(measured), family(topology_name)
    if left is None and right is None:
        one, other = (" ".join(name.lower().split()) for name in (measured, topology_name))
        return bool(one) and (one in other or other in one)
    return left == right


def gemm_pricer_for(
    measured: MeasuredGemms, workload: Workload, topology: Topology, fallback: GemmPricer
) -> tuple[GemmPricer | None, list[str]]:
    """A pricer using the measured shapes (the fallback for the others) and the warnings;
    (None, warnings) when the run does not apply to this fabric at all."""
    where = f"--gemm {measured.run}"
    name = topology.accelerator.name
    if not same_accelerator(measured.accelerator, name):
        return None, [
            f"{where} was measured on {measured.accelerator or 'an unnamed device'}, not on "
            f"{topology.name}'s {name}: not used there (its GEMMs priced by shape)"
        ]
    if measured.dtype != workload.training.dtype:
        return None, [
            f"{where} was measured in {measured.dtype}, the workload computes in "
            f"{workload.training.dtype}: not used on {topology.name} (GEMMs priced by shape)"
        ]
    wanted = {gemm.shape: gemm for gemm in workload_gemms(workload)}
    warnings = []
    missing = [gemm for shape, gemm in wanted.items() if shape not in measured.tflops]
    if missing:
        warnings.append(
            f"{where} did not measure {len(missing)} of the workload's {len(wanted)} GEMM "
            f"shapes ({_named(f'{g.shape} {g.op} {g.pass_name}' for g in missing)}): "
            f"priced by shape on {topology.name}"
        )
    foreign = [shape for shape in measured.tflops if shape not in wanted]
    if foreign:
        warnings.append(
            f"{where}: {len(foreign)} measured shape{'' if len(foreign) == 1 else 's'} "
            f"({_named(foreign)}) the workload does not run: not used"
        )
    if len(missing) == len(wanted):
        return None, warnings
    warnings += _above_peak(measured, wanted, workload, topology)

    def price(gemm: Gemm) -> GemmTime:
        tflops = measured.tflops.get(gemm.shape)
        if tflops is None:
            return fallback(gemm)
        time_s = gemm.flops / (tflops * 1e12)
        return GemmTime(time_s, tflops * 1e12 / peak_flops(workload, topology), "measured", "-", 0)

    return price, warnings


def _above_peak(
    measured: MeasuredGemms, wanted: dict[str, Gemm], workload: Workload, topology: Topology
) -> list[str]:
    """A measured rate above the topology's peak says the catalog entry is wrong for the
    device measured (its peak is too low): MFU against it would read above 100%."""
    peak = peak_flops(workload, topology) / 1e12
    over = {
        shape: rate for shape, rate in measured.tflops.items() if shape in wanted and rate > peak
    }
    if not over:
        return []
    shape, rate = max(over.items(), key=lambda item: item[1])
    return [
        f"--gemm {measured.run} measured {rate:.3g} TFLOP/s ({shape}), above {topology.name}'s "
        f"{workload.training.dtype} peak of {peak:.3g} TFLOP/s: the topology's peak is wrong "
        "for this device (give a topology file with its peak); MFU above 100% is not printed"
    ]


def _named(items: Iterable[str]) -> str:
    listed: Sequence[str] = list(items)
    shown = ", ".join(listed[:SHOWN])
    more = len(listed) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
