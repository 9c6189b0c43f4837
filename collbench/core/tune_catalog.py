"""What collbench knows about the knobs `tune` searches: how a value is checked, who reads it.

The method, in full: docs/tune.md#collbench-core-tune-catalog-py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from collbench.core.errors import SpecError
from collbench.core.units import parse_size

Checker = Callable[[str], str]

# NCCL's names (src/init.cc ncclFuncStr, ncclAlgoStr, ncclProtoStr); NCCL compares them
# without regard to case.
NCCL_COLLECTIVES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
NCCL_ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
# Path types a P2P or GDR level may name (src/graph/topo.cc topoPathTypeStr up to SYS),
# compared with case; a legacy integer level is accepted too.
NCCL_PATH_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# MAXCHANNELS (src/include/device.h; devcomm.h before), newest first: NCCL 64 from 2.25.1;
# RCCL 128 from 2.20.5 (ROCm 6.2), 64 from 2.18.6 (ROCm 6.1, RCCL #993); 32 before. A larger
# NCCL_MAX_NCHANNELS or *_CTAS is cut to it (connect.cc, init.cc): tune would measure it again.
MAX_CHANNELS = {
    "nccl": (((2, 25, 1), 64), ((), 32)),
    "rccl": (((2, 20, 5), 128), ((2, 18, 6), 64), ((), 32)),
}
CHANNEL_KNOBS = ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS")
NCCL_MAX_CHANNELS, RCCL_MAX_CHANNELS = MAX_CHANNELS["nccl"][0][1], MAX_CHANNELS["rccl"][0][1]


@dataclass(frozen=True)
class KnobSpec:
    """One knob: how a value is checked and which backends read it."""

    check: Checker
    fold_case: bool = False  # the library compares values without case (duplicates too)
    backends: tuple[str, ...] | None = None  # None: core.knobs.reads_knob decides
    numeric: bool = False  # an ordered number (channels, threads, bytes): coordinate descent


def nccl_list(names: tuple[str, ...]) -> Checker:
    """NCCL_ALGO/NCCL_PROTO: `Ring`, `^LL128`, and NCCL >= 2.24's per-collective form
    `ring;allreduce:tree,ring;broadcast:^ll` (only the first entry may lack a collective)."""
    known = {name.lower() for name in names}
    collectives = {name.lower() for name in NCCL_COLLECTIVES}

    def check(value: str) -> str:
        for index, entry in enumerate(value.split(";")):
            prefix, colon, elements = entry.rpartition(":")
            if colon and prefix.lower() not in collectives:
                raise ValueError(f"names no collective {prefix!r} ({', '.join(NCCL_COLLECTIVES)})")
            if index and not colon:
                raise ValueError("gives a list without a collective after the first ';'")
            items = elements[1:] if elements.startswith("^") else elements
            for item in items.split(","):
                if item.lower() not in known:
                    raise ValueError(f"names no {'/'.join(names)}: {item!r}")
            if elements.startswith("^") and known <= {item.lower() for item in items.split(",")}:
                where = f" for {prefix}" if colon else ""
                raise ValueError(
                    f"excludes every one of {', '.join(names)}{where}: NCCL would have none "
                    "left to run"
                )
        return value

    return check


def integer(low: int, high: int | None = None, multiple: int = 1, why: str = "") -> Checker:
    """A decimal integer in [low, high], a multiple of `multiple` (`why`: as choice's)."""

    def check(value: str) -> str:
        if not re.fullmatch(r"-?\d+", value):
            raise ValueError("is not a whole number")
        number = int(value)
        if number < low or (high is not None and number > high):
            raise ValueError(f"is outside {low}..{'' if high is None else high}{why}")
        if number % multiple:
            raise ValueError(f"is not a multiple of {multiple}")
        return str(number)

    return check


def choice(*values: str, why: str = "") -> Checker:
    """One of `values`, exactly (`why`: the reason, said with a refusal)."""

    def check(value: str) -> str:
        if value not in values:
            raise ValueError(f"is not one of {', '.join(values)}{why}")
        return value

    return check


def size_bytes(value: str) -> str:
    """Bytes, in collbench's size syntax (4M = 4194304). NCCL reads the variable with
    strtoll, which would take "4M" as 4, so the integer is what gets exported."""
    try:
        number = parse_size(value)
    except SpecError as error:
        raise ValueError(error.hint) from None
    if number <= 0:
        raise ValueError("must be a positive number of bytes")
    return str(number)


def path_level(value: str) -> str:
    """NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL: a path type (with case) or a legacy integer."""
    if value in NCCL_PATH_LEVELS or re.fullmatch(r"\d+", value):
        return value
    raise ValueError(f"is not a path level ({', '.join(NCCL_PATH_LEVELS)}, or 0..5)")


_IFACE = re.compile(r"[^\s/,:]{1,15}")  # a Linux interface name (IFNAMSIZ - 1 bytes)


def nccl_prefixes(pattern: re.Pattern[str], what: str) -> Checker:
    """NCCL's list of name prefixes: `eth`, `=eth0` (exact), `^docker` and `^=docker0`
    (excluded), `=eth0,eth1`; each name matching `pattern`."""

    def check(value: str) -> str:
        items = value[1:] if value.startswith("^") else value
        for item in items.split(","):
            if not pattern.fullmatch(item.removeprefix("=")):
                raise ValueError(f"has no {what} in {item!r}")
        return value

    return check


def gloo_interfaces(value: str) -> str:
    """GLOO_SOCKET_IFNAME: interface names, comma-separated (torch makes one device each).
    Whether the interface exists is for the run to find out: a missing one fails there."""
    for item in value.split(","):
        if not _IFACE.fullmatch(item):
            raise ValueError(f"has no interface name in {item!r}")
    return value


_SWITCH = choice("0", "1")

CATALOG: dict[str, KnobSpec] = {
    # Re-read at every communicator init (tuning.cc: ncclGetEnv in ncclTopoTuneModel).
    "NCCL_ALGO": KnobSpec(nccl_list(NCCL_ALGORITHMS), fold_case=True),
    "NCCL_PROTO": KnobSpec(nccl_list(NCCL_PROTOCOLS), fold_case=True),
    # Cached for the life of the process (NCCL_PARAM) or read once at plugin/transport init.
    "NCCL_MIN_NCHANNELS": KnobSpec(integer(1, NCCL_MAX_CHANNELS), numeric=True),
    "NCCL_MAX_NCHANNELS": KnobSpec(integer(1, NCCL_MAX_CHANNELS), numeric=True),
    "NCCL_MIN_CTAS": KnobSpec(integer(1, NCCL_MAX_CHANNELS), numeric=True),
    "NCCL_MAX_CTAS": KnobSpec(integer(1, NCCL_MAX_CHANNELS), numeric=True),
    "NCCL_BUFFSIZE": KnobSpec(size_bytes, numeric=True),
    # tuning.cc getNthreads: a multiple of the warp (32) in 64..512, else silently replaced;
    # the documentation lists 64, 128, 256, 512.
    "NCCL_NTHREADS": KnobSpec(integer(64, 512, multiple=32), numeric=True),
    "NCCL_CROSS_NIC": KnobSpec(choice("0", "1", "2")),
    "NCCL_NVLS_ENABLE": KnobSpec(choice("0", "1", "2")),  # 2: NCCL decides (its default)
    "NCCL_PAT_ENABLE": KnobSpec(choice("0", "1", "2")),
    "NCCL_COLLNET_ENABLE": KnobSpec(_SWITCH),
    "NCCL_P2P_LEVEL": KnobSpec(path_level),
    "NCCL_NET_GDR_LEVEL": KnobSpec(path_level),
    "NCCL_NET_GDR_READ": KnobSpec(_SWITCH),
    "NCCL_P2P_DISABLE": KnobSpec(_SWITCH),
    "NCCL_SHM_DISABLE": KnobSpec(_SWITCH),
    "NCCL_PXN_DISABLE": KnobSpec(_SWITCH),
    "NCCL_P2P_NET_CHUNKSIZE": KnobSpec(size_bytes, numeric=True),
    "NCCL_SOCKET_IFNAME": KnobSpec(nccl_prefixes(_IFACE, "interface name prefix")),
    "NCCL_SOCKET_NTHREADS": KnobSpec(integer(1, 16), numeric=True),
    "NCCL_NSOCKS_PERTHREAD": KnobSpec(integer(1, 64), numeric=True),
    # `mlx5`, `=mlx5_0:1,mlx5_1:1`, `^=mlx5_3`: device[:port] prefixes
    "NCCL_IB_HCA": KnobSpec(nccl_prefixes(re.compile(r"[\w.-]+(:\d+)?"), "device[:port]")),
    "NCCL_IB_DISABLE": KnobSpec(_SWITCH),
    # Identifiers and limits, not ordered performance numbers: numeric stays False.
    "NCCL_IB_TIMEOUT": KnobSpec(integer(0, 31)),  # 5 bits in the IB QP attribute
    "NCCL_IB_RETRY_CNT": KnobSpec(integer(0, 7)),  # 3 bits
    "NCCL_IB_GID_INDEX": KnobSpec(integer(-1, 255)),
    "NCCL_IB_SL": KnobSpec(integer(0, 15)),
    "NCCL_IB_TC": KnobSpec(integer(0, 255)),
    "NCCL_IB_QPS_PER_CONNECTION": KnobSpec(integer(1, 128), numeric=True),
    "NCCL_IB_SPLIT_DATA_ON_QPS": KnobSpec(_SWITCH),
    "NCCL_IB_PCI_RELAXED_ORDERING": KnobSpec(choice("0", "1", "2")),
    "NCCL_IB_ADAPTIVE_ROUTING": KnobSpec(_SWITCH),
    "NCCL_IB_AR_THRESHOLD": KnobSpec(size_bytes, numeric=True),
    "NCCL_IB_ECE_ENABLE": KnobSpec(_SWITCH),
    "NCCL_IB_ADDR_FAMILY": KnobSpec(choice("AF_INET", "AF_INET6")),
    # RCCL's own (RCCL_PARAM in RCCL's src/init.cc and src/misc/msccl), cached as NCCL's.
    "RCCL_MSCCL_ENABLE": KnobSpec(_SWITCH),
    "RCCL_MSCCL_FORCE_ENABLE": KnobSpec(_SWITCH),
    "RCCL_MSCCLPP_ENABLE": KnobSpec(_SWITCH),
    "RCCL_MSCCLPP_THRESHOLD": KnobSpec(size_bytes, numeric=True),
    "RCCL_LL128_FORCE_ENABLE": KnobSpec(_SWITCH),
    # gloo (torch c10d): read each time a gloo process group is created, one device per
    # comma-separated interface; nccl and rccl runs never read it.
    "GLOO_SOCKET_IFNAME": KnobSpec(gloo_interfaces, backends=("gloo",)),
}

# RCCL 2.11.4 to 2.21.5 run 256 threads whatever NCCL_NTHREADS says (tuning.cc getNthreads,
# from 4*WarpSize to NCCL_MAX_NTHREADS, both 256): another value would measure 256 again.
RCCL_NTHREADS = choice("256", why=": RCCL runs 256 threads whatever this says")


def release(version: str | None) -> tuple[int, ...]:
    """(2, 21, 5) of an NCCL/RCCL version "2.21.5" (or "2.21.5+cuda12.4"); () if none."""
    return tuple(int(part) for part in re.findall(r"\d+", (version or "").split("+")[0])[:3])


def knob_checker(name: str, backend: str | None, version: str | None = None) -> Checker | None:
    """How `backend` (resolved, or None/"auto": NCCL's ranges) at `version` (max_channels)
    takes knob `name`'s values; None for a knob the catalog does not list."""
    if name in CHANNEL_KNOBS:
        most, limit = max_channels(backend or "nccl", version)
        return integer(1, most, why=f": {limit}")
    spec = CATALOG.get(name)
    return RCCL_NTHREADS if backend == "rccl" and name == "NCCL_NTHREADS" else spec and spec.check


# Variables NCCL 2.30 reads (NCCL_PARAM and ncclGetEnv in its sources, plus those read
# before them), and RCCL's RCCL_PARAM names: known to exist, but their values are not
# checked. A name in neither list is a typo when it is close to one, else a newer variable.
KNOWN_NAMES = frozenset(
    """
    NCCL_ALLGATHERV_ENABLE NCCL_ALLOC_P2P_NET_LL_BUFFERS NCCL_CGA_CLUSTER_SIZE
    NCCL_CHECK_MODE NCCL_CHECK_POINTERS NCCL_CHUNK_SIZE NCCL_COLLNET_NODE_THRESHOLD
    NCCL_COMM_BLOCKING NCCL_COMM_ID NCCL_COMM_SPLIT_SHARE_RESOURCES NCCL_CONF_FILE
    NCCL_CTA_POLICY NCCL_CUMEM_ENABLE NCCL_CUMEM_HOST_ENABLE NCCL_DEBUG NCCL_DEBUG_FILE
    NCCL_DEBUG_SUBSYS NCCL_DMABUF_ENABLE NCCL_GDRCOPY_ENABLE NCCL_GDR_FLUSH_DISABLE
    NCCL_GRAPH_DUMP_FILE NCCL_GRAPH_FILE NCCL_GRAPH_MIXING_SUPPORT NCCL_GRAPH_REGISTER
    NCCL_HOSTID NCCL_IB_DATA_DIRECT NCCL_IB_FIFO_TC NCCL_IB_MERGE_NICS NCCL_IB_MERGE_VFS
    NCCL_IB_ADDR_RANGE NCCL_IB_OOO_RQ NCCL_IB_PKEY NCCL_IB_RETURN_ASYNC_EVENTS
    NCCL_IB_ROCE_VERSION_NUM NCCL_IB_USE_INLINE NCCL_IGNORE_CPU_AFFINITY
    NCCL_IGNORE_DISABLED_P2P NCCL_LAUNCH_MODE NCCL_LL128_BUFFSIZE NCCL_LL128_NTHREADS
    NCCL_LL_BUFFSIZE NCCL_LOCAL_REGISTER NCCL_MAX_NRINGS NCCL_MAX_P2P_NCHANNELS
    NCCL_MIN_NRINGS NCCL_MIN_P2P_NCHANNELS NCCL_MNNVL_ENABLE NCCL_NCHANNELS_PER_NET_PEER
    NCCL_NET NCCL_NET_DISABLE_INTRA NCCL_NET_FORCE_FLUSH NCCL_NET_GDR_C2C NCCL_NET_OVERHEAD
    NCCL_NET_PLUGIN NCCL_NET_SHARED_BUFFERS NCCL_NET_SHARED_COMMS NCCL_NVB_DISABLE
    NCCL_NVB_PRECONNECT NCCL_NVLS_CHUNKSIZE NCCL_NVLS_NCHANNELS NCCL_NVLSTREE_MAX_CHUNKSIZE
    NCCL_NVTX_DISABLE NCCL_P2P_DIRECT_DISABLE NCCL_P2P_LL_THRESHOLD NCCL_P2P_NVL_CHUNKSIZE
    NCCL_P2P_PCI_CHUNKSIZE NCCL_P2P_PXN_LEVEL NCCL_P2P_READ_ENABLE NCCL_PROFILER_PLUGIN
    NCCL_PROTO NCCL_PROXY_APPEND_BATCH_SIZE NCCL_RAS_ENABLE NCCL_RUNTIME_CONNECT
    NCCL_SET_STACK_SIZE NCCL_SET_THREAD_NAME NCCL_SHM_LOCALITY NCCL_SOCKET_FAMILY
    NCCL_SOCKET_RETRY_CNT NCCL_SOCKET_RETRY_SLEEP_MSEC NCCL_SYM_CTAS NCCL_THREAD_THRESHOLDS
    NCCL_TOPO_DUMP_FILE NCCL_TOPO_FILE NCCL_TUNER_CONFIG_FILE NCCL_TUNER_PLUGIN
    NCCL_WIN_ENABLE NCCL_WORK_ARGS_BYTES NCCL_WORK_FIFO_BYTES
    RCCL_CLIQUE_ALLREDUCE_BYTE_LIMIT RCCL_CLIQUE_IGNORE_TOPO RCCL_ENABLE_CLIQUE
    RCCL_ENABLE_INTRANET RCCL_ENABLE_SIGNALHANDLER RCCL_FORCE_ENABLE_GDRDMA
    RCCL_INTRANET_THRESHOLD RCCL_KERNEL_COLL_TRACE_ENABLE RCCL_MODEL_MATCHING_DISABLE
    RCCL_MSCCL_ENABLE_SINGLE_PROCESS RCCL_MSCCL_FORCE_FULLOPS RCCL_MSCCL_WORK_FIFO_DEPTH
    RCCL_NET_CONTIGUOUS_MEM RCCL_P2P_NET_DISABLE RCCL_P2P_NET_THRESHOLD
    RCCL_PIVOT_ALLTOALL_ENABLE RCCL_STACK_SIZE_OVERRIDE RCCL_USE_ROCM_SMI_LIB
    """.split()
)


def max_channels(backend: str | None, version: str | None = None) -> tuple[int, str]:
    """The most channels `backend` runs at `version` (the NCCL/RCCL release recorded or
    detected; None: the newest's), and that limit in words: RCCL's for rccl, NCCL's for any
    other (nccl; auto or gloo, where a channel count means NCCL's). Backend None: not known
    yet (a check before the ranks or the runs say), so the most any backend has."""
    if backend is None:
        return RCCL_MAX_CHANNELS, f"any backend's most, {RCCL_MAX_CHANNELS} (RCCL's)"
    library, known = "rccl" if backend == "rccl" else "nccl", release(version)
    most = next(most for since, most in MAX_CHANNELS[library] if not known or known >= since)
    hint = f" (RCCL has {RCCL_MAX_CHANNELS}: give --backend rccl)" if backend == "auto" else ""
    name = f"{library.upper()} {version}" if known else library.upper()
    return most, f"{name}'s most, {most}{hint}"


def is_numeric(name: str) -> bool:
    """Whether knob `name` takes an ordered number (channels, threads, bytes), the kind a
    coordinate descent steps through; False for a knob the catalog does not list."""
    spec = CATALOG.get(name)
    return spec is not None and spec.numeric
