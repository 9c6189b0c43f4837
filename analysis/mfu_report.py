"""`collbench mfu` glue: estimate one workload on several fabrics, with the what-ifs
(collbench.render.mfu renders the side-by-side table and the JSON).

Pure apart from what it is handed: rows of measured runs come in as lists, nothing is read
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from collbench.analysis.mfu import Estimate, EstimateOptions, estimate
from collbench.analysis.mfu_inputs import (
    DEFAULT_COMM_EFFICIENCY,
    MeasuredCurve,
    cost_model_pricer,
    curve_pricer,
    scale_out_doubled,
)
from collbench.analysis.workload import Workload
from collbench.topologies.schema import Topology


@dataclass(frozen=True)
class Fabric:
    """One fabric to price on, with the measured curves that override its predictions."""

    topology: Topology
    curves: tuple[MeasuredCurve, ...] = ()


def sized_for(workload: Workload, topology: Topology) -> Topology:
    """The topology with as many nodes as the workload's tp x pp x dp accelerators need."""
    return topology.with_nodes(
        -(-workload.parallelism.world_size // topology.accelerators_per_node)
    )


def estimate_fabric(
    workload: Workload,
    fabric: Fabric,
    options: EstimateOptions,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
) -> Estimate:
    """One fabric: the estimate plus its what-ifs (perfect overlap; 2x scale-out)."""
    topology = fabric.topology
    predicted = cost_model_pricer(topology, comm_efficiency)
    result = estimate(
        workload, topology, curve_pricer(list(fabric.curves), topology, predicted), options
    )
    doubled = scale_out_doubled(topology)
    # Curves measured on this fabric's scale-out say nothing about a faster one; those
    # that stay inside a scale-up domain still hold.
    local = [curve for curve in fabric.curves if curve.nodes <= topology.nodes_per_domain]
    faster = curve_pricer(local, doubled, cost_model_pricer(doubled, comm_efficiency))
    what_if = {**result.what_if, "scale_out_2x": estimate(workload, doubled, faster, options).mfu}
    return replace(result, what_if=what_if)


def estimate_fabrics(
    workload: Workload,
    fabrics: Sequence[Fabric],
    options: EstimateOptions,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
) -> list[Estimate]:
    return [estimate_fabric(workload, fabric, options, comm_efficiency) for fabric in fabrics]
