"""The collective cost model: what a fabric should give, per collective, size and group.

The method, in full: docs/methodology/cost-model.md#analysis-model-costmodel-py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from collbench.core.collectives import REGISTRY
from collbench.core.errors import SpecError
from collbench.core.units import check_number
from collbench.topologies.schema import Topology, TopologyError

ALGORITHMS = ("ring", "tree", "hierarchical", "pairwise", "direct", "local")
# What NCCL's tuner picks from per collective, without NVLS, CollNet or PAT.
# Keyed by a collective's `traffic` (collbench/core/collectives): a new collective that moves
# its bytes like an existing one needs no entry here.
TRAFFIC_AUTO_CHOICES: Mapping[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree"),
    "gather": ("ring",),
    "chain": ("ring",),
    "all_to_all": ("pairwise",),
    "point_to_point": ("direct",),
}
# Used to state a prediction's asymptotic busbw: large enough that latency is negligible.
_PEAK_PROBE_BYTES = 1 << 40


# The share of the link rates `mfu` and `predict` price predicted collectives at (one
# pricing): nccl-tests' large-message busbw on the shared real logs reaches 70-90% of the
# link rate (A100 NVLink 1 node, MI300X xGMI 1 node, H100 2 nodes over TCPXO).
DEFAULT_COMM_EFFICIENCY = 0.8


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the link rates that predictions assume (NUMBER_BOUNDS' "share"); 1.0 is
    the hardware bound, DEFAULT_COMM_EFFICIENCY what a tuned system reaches."""

    scale_up: float = 1.0  # of scale_up.bandwidth_gbytes_s
    scale_out: float = 1.0  # of the NICs' line rate

    def __post_init__(self) -> None:
        for name in ("scale_up", "scale_out"):
            check_number("share", getattr(self, name), f"efficiency.{name}")

    @classmethod
    def uniform(cls, fraction: float) -> Efficiency:
        """The same fraction on every level (--comm-efficiency)."""
        return cls(scale_up=fraction, scale_out=fraction)


@dataclass(frozen=True)
class Group:
    """The ranks one collective runs over, and how they sit on the fabric."""

    ranks: int  # ranks in the collective
    ranks_per_domain: int  # of those, how many share one scale-up domain (1..ranks)
    # Of those, how many share one node (its NICs); None: as many as the node has
    # accelerators. Only matters when it exceeds them (CPU ranks packed on one host).
    ranks_per_node: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise SpecError("group.ranks", self.ranks, "must be an integer >= 1")
        if not isinstance(self.ranks_per_domain, int) or not (
            1 <= self.ranks_per_domain <= self.ranks
        ):
            raise SpecError(
                "group.ranks_per_domain",
                self.ranks_per_domain,
                f"must be an integer in 1..{self.ranks} (the group's ranks)",
            )
        if self.ranks_per_node is not None and (
            not isinstance(self.ranks_per_node, int) or self.ranks_per_node < 1
        ):
            raise SpecError(
                "group.ranks_per_node", self.ranks_per_node, "must be an integer >= 1 or None"
            )

    @property
    def domains(self) -> int:
        """Scale-up domains the group spans (connected over scale-out when > 1)."""
        return math.ceil(self.ranks / self.ranks_per_domain)


def group_for(topology: Topology, ranks: int | None = None, stride: int = 1) -> Group:
    """The group of `ranks` ranks placed every `stride` accelerators (Group checks `ranks`).

    Megatron's TP groups are consecutive (stride 1), DP ranks are `tp` apart, PP stages
    `tp x dp` apart. `ranks` defaults to the whole topology.
    """
    ranks = topology.world_size if ranks is None else ranks
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise SpecError("stride", stride, "must be an integer >= 1")
    per_domain = min(ranks, max(1, topology.scale_up.domain_size // stride))
    per_node = min(ranks, max(1, topology.accelerators_per_node // stride))
    return Group(ranks=ranks, ranks_per_domain=per_domain, ranks_per_node=per_node)


@dataclass(frozen=True)
class Fabric:
    """The fabric as one group sees it: bytes per second and seconds."""

    up_bytes_s: float  # per accelerator per direction, to the group's peers in its domain
    pair_bytes_s: float  # between two accelerators of one domain (a mesh: one link)
    rail_bytes_s: float  # one rank's share of its node's NICs (0: no scale-out)
    domain_out_bytes_s: float  # the group's ranks of one domain together, over scale-out
    up_latency_s: float
    out_latency_s: float


def fabric_for(topology: Topology, group: Group, efficiency: Efficiency | None = None) -> Fabric:
    """Per-level bandwidths and latencies for `group`; TopologyError if it cannot fit."""
    efficiency = efficiency or Efficiency()
    scale_up, scale_out = topology.scale_up, topology.scale_out
    if group.domains > 1 and scale_out is None:
        raise TopologyError(
            "scale_out",
            None,
            f"is required: a group of {group.ranks} ranks "
            f"spans {group.domains} scale-up domains of {scale_up.domain_size} "
            f"in topology {topology.name!r}, which has no scale-out network",
        )
    up = pair = scale_up.bandwidth_gbytes_s * 1e9 * efficiency.scale_up
    if scale_up.fabric == "mesh" and scale_up.domain_size > 1:
        pair = up / (scale_up.domain_size - 1)  # one link per peer
        peers = min(group.ranks_per_domain, scale_up.domain_size) - 1
        up = pair * max(1, peers)  # the links to the group's peers in the domain
    rail, domain_out, out_latency = 0.0, 0.0, 0.0
    if scale_out is not None:
        node = topology.node_scale_out_gbytes_s * 1e9 * efficiency.scale_out
        node /= scale_out.oversubscription
        sharing = max(topology.accelerators_per_node, group.ranks_per_node or 0)
        rail = node / sharing
        domain_out = rail * group.ranks_per_domain
        out_latency = scale_out.latency_us * 1e-6
    return Fabric(
        up_bytes_s=up,
        pair_bytes_s=pair,
        rail_bytes_s=rail,
        domain_out_bytes_s=domain_out,
        up_latency_s=scale_up.latency_us * 1e-6,
        out_latency_s=out_latency,
    )


@dataclass(frozen=True)
class Cost:
    """One algorithm's price: latency plus the slower of the two (pipelined) levels."""

    algorithm: str
    latency_s: float
    scale_up_s: float
    scale_out_s: float

    @property
    def time_s(self) -> float:
        return self.latency_s + max(self.scale_up_s, self.scale_out_s)

    @property
    def bottleneck(self) -> str:
        """The largest term: "latency", "scale_up" or "scale_out"."""
        return max(
            ("latency", "scale_up", "scale_out"), key=lambda name: getattr(self, f"{name}_s")
        )


@dataclass(frozen=True)
class _Shape:
    """p ranks, d per domain, k domains, and the bytes to move."""

    p: int
    d: int
    k: int
    size: float


_Pricer = Callable[[_Shape, Fabric], Cost]


def _levels(
    algorithm: str, hops: tuple[float, float], up_bytes: float, out_bytes: float, fabric: Fabric
) -> Cost:
    """A Cost from hop counts (inside, across) and bytes per level (0 bytes: level unused)."""
    return Cost(
        algorithm=algorithm,
        latency_s=hops[0] * fabric.up_latency_s + hops[1] * fabric.out_latency_s,
        scale_up_s=up_bytes / fabric.up_bytes_s if up_bytes else 0.0,
        scale_out_s=out_bytes / fabric.domain_out_bytes_s if out_bytes else 0.0,
    )


def _ring(passes: int, share: bool) -> _Pricer:
    """A ring making `passes` passes, each moving (p - 1)/p of the size (`share`: a reduce
    or gather) or all of it (a chain: broadcast, reduce)."""

    def price(shape: _Shape, fabric: Fabric) -> Cost:
        moved = passes * ((shape.p - 1) / shape.p if share else 1.0) * shape.size
        up, out = moved if shape.d > 1 else 0.0, moved if shape.k > 1 else 0.0
        across = passes * (shape.k - 1)  # hops: every domain boundary once per pass
        return _levels("ring", (passes * (shape.p - 1) - across, across), up, out, fabric)

    return price


def _hierarchical(passes: int) -> _Pricer:
    """Inside each domain, then across the domains: `passes` (d - 1)/d and (k - 1)/k shares."""

    def price(shape: _Shape, fabric: Fabric) -> Cost:
        hops = (passes * (shape.d - 1.0), passes * (shape.k - 1.0))
        up = passes * (shape.d - 1) / shape.d * shape.size
        return _levels(
            "hierarchical", hops, up, passes * (shape.k - 1) / shape.k * shape.size, fabric
        )

    return price


def _all_reduce_tree(shape: _Shape, fabric: Fabric) -> Cost:
    hops = (2.0 * (shape.d - 1), 2.0 * math.ceil(math.log2(shape.k)) if shape.k > 1 else 0.0)
    out = 0.0 if shape.k == 1 else shape.size if shape.k == 2 else 2 * shape.size
    return _levels("tree", hops, min(shape.d - 1, 2) * shape.size, out, fabric)


def _all_to_all_pairwise(shape: _Shape, fabric: Fabric) -> Cost:
    hops = (1.0 if shape.d > 1 else 0.0, 1.0 if shape.k > 1 else 0.0)
    per_peer = shape.size / shape.p
    # On a mesh up_bytes_s is (d - 1) links, so this is S/p over one link per peer.
    inside = (shape.d - 1) * per_peer / fabric.up_bytes_s if shape.d > 1 else 0.0
    across = (shape.p - shape.d) * per_peer / fabric.rail_bytes_s if shape.k > 1 else 0.0
    return Cost(
        "pairwise", hops[0] * fabric.up_latency_s + hops[1] * fabric.out_latency_s, inside, across
    )


def _sendrecv_direct(shape: _Shape, fabric: Fabric) -> Cost:
    if shape.k == 1:
        return Cost("direct", fabric.up_latency_s, shape.size / fabric.pair_bytes_s, 0.0)
    inside = shape.size / fabric.pair_bytes_s if shape.d > 1 else 0.0
    return Cost("direct", fabric.out_latency_s, inside, shape.size / fabric.rail_bytes_s)


TRAFFIC_MODELS: Mapping[str, Mapping[str, _Pricer]] = {
    "all_reduce": {
        "ring": _ring(2, share=True),
        "tree": _all_reduce_tree,
        "hierarchical": _hierarchical(2),
    },
    "gather": {"ring": _ring(1, share=True), "hierarchical": _hierarchical(1)},
    "chain": {"ring": _ring(1, share=False)},
    "all_to_all": {"pairwise": _all_to_all_pairwise},
    "point_to_point": {"direct": _sendrecv_direct},
}
# Per collective of the registry (its name -> the algorithms modelled for its traffic).
MODELS: Mapping[str, Mapping[str, _Pricer]] = {
    name: TRAFFIC_MODELS[collective.traffic] for name, collective in REGISTRY.items()
}
AUTO_CHOICES: Mapping[str, tuple[str, ...]] = {
    name: TRAFFIC_AUTO_CHOICES[collective.traffic] for name, collective in REGISTRY.items()
}


@dataclass(frozen=True)
class Prediction:
    """What the fabric should give for one collective, size and group."""

    collective: str
    size_bytes: int
    time_s: float
    algbw_gbps: float  # size / time (0 when nothing moves: one rank, or 0 bytes)
    busbw_gbps: float  # algbw x the nccl-tests bus factor
    algorithm: str  # one of ALGORITHMS
    # "latency", "scale_up" or "scale_out": the largest term of the chosen algorithm
    bottleneck: str
    group: Group
    latency_s: float  # the chosen algorithm's terms: time = latency + max(up, out)
    scale_up_s: float
    scale_out_s: float
    peak_busbw_gbps: float  # the chosen algorithm's busbw as size grows (its bandwidth bound)


def predict(
    topology: Topology,
    collective: str,
    size_bytes: int,
    group: Group | None = None,
    algorithm: str = "auto",
    efficiency: Efficiency | None = None,
) -> Prediction:
    """Predicted time and bandwidth of `collective` at `size_bytes` (nccl-tests' size).

    `algorithm` "auto" takes the fastest of AUTO_CHOICES; a name from MODELS forces one.
    SpecError on an unknown collective or algorithm, TopologyError when the group spans
    several scale-up domains of a topology without scale-out.
    """
    from collbench.core.bandwidth import bus_factor

    group = group or group_for(topology)
    choices = _choices(collective, algorithm)
    check_number("bytes", size_bytes, "size_bytes")
    fabric = fabric_for(topology, group, efficiency)
    if group.ranks == 1:
        costs = {"local": Cost("local", 0.0, 0.0, 0.0)}
    else:
        shape = _Shape(group.ranks, group.ranks_per_domain, group.domains, float(size_bytes))
        costs = {name: MODELS[collective][name](shape, fabric) for name in choices}
    best = min(costs.values(), key=lambda cost: cost.time_s)
    factor = bus_factor(collective, group.ranks)
    algbw = size_bytes / best.time_s / 1e9 if best.time_s > 0 and size_bytes else 0.0
    return Prediction(
        collective=collective,
        size_bytes=int(size_bytes),
        time_s=best.time_s,
        algbw_gbps=algbw,
        busbw_gbps=algbw * factor,
        algorithm=best.algorithm,
        bottleneck=best.bottleneck,
        group=group,
        latency_s=best.latency_s,
        scale_up_s=best.scale_up_s,
        scale_out_s=best.scale_out_s,
        peak_busbw_gbps=_peak_busbw(collective, best.algorithm, group, fabric) * factor,
    )


def _choices(collective: str, algorithm: str) -> tuple[str, ...]:
    if collective not in MODELS:
        raise SpecError("collective", collective, f"is not modelled; one of {', '.join(MODELS)}")
    if algorithm == "auto":
        return AUTO_CHOICES[collective]
    if algorithm not in MODELS[collective]:
        raise SpecError(
            "algorithm",
            algorithm,
            f"is not modelled for {collective}; one of auto, {', '.join(MODELS[collective])}",
        )
    return (algorithm,)


def _peak_busbw(collective: str, algorithm: str, group: Group, fabric: Fabric) -> float:
    """The algorithm's algbw in GB/s as the size grows (latency negligible)."""
    if group.ranks == 1:
        return 0.0
    size = float(_PEAK_PROBE_BYTES)
    shape = _Shape(group.ranks, group.ranks_per_domain, group.domains, size)
    cost = MODELS[collective][algorithm](shape, fabric)
    slowest = max(cost.scale_up_s, cost.scale_out_s)
    return size / slowest / 1e9 if slowest > 0 else 0.0
