"""What NCCL (and RCCL) chose: algorithm, protocol and channels per collective and size.

The method, in full: docs/import.md#analysis-imports-nccl-choice-py.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

from collbench.analysis.imports.nccl_rows import PROGRAMS
from collbench.core.errors import SpecError

# NCCL_ALGO_* and NCCL_PROTO_* ids in order, spelled as nccl_tuner.conf spells them.
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
# Paths that are not an (algorithm, protocol) pair of the tuner.
ONE_RANK = "one_rank"  # 1-rank communicator: a local copy, no choice made
SYMMETRIC = "symmetric"  # NCCL >= 2.27 symmetric-memory kernels (the kernel name says more)
COPY_ENGINE = "copy_engine"  # NCCL >= 2.29 cudaMemcpy-based collectives
HIERARCHICAL_CE = "hierarchical_ce"  # NCCL >= 2.30 RMA proxy + copy engine
MSCCL = "msccl"  # RCCL handed the call to an MSCCL algorithm
MSCCLPP = "mscclpp"  # RCCL handed the call to MSCCL++

# The first version that names the collective on its TUNING line (before it, the COLL line
# that precedes it says which).
NAMED_SINCE = (2, 23, 0)
# NCCL's default NCCL_DEBUG_SUBSYS (src/debug.cc); BOOTSTRAP joined INIT,ENV in 2.23.
_DEFAULT_SUBSYS = ("INIT", "BOOTSTRAP", "ENV")
# NCCL_DEBUG levels at which INFO lines print (NCCL_LOG_INFO=3 < ABORT=4 < TRACE=5).
_PRINTS_INFO = ("INFO", "ABORT", "TRACE")

# ncclDataType_t id -> (name, element bytes); names as collbench's dtypes where it has them.
_DTYPES = {
    0: ("int8", 1),
    1: ("uint8", 1),
    2: ("int32", 4),
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("bfloat16", 2),
    10: ("float8e4m3", 1),
    11: ("float8e5m2", 1),
}
# Collectives whose bytes NCCL multiplies by nranks to get max(send, recv).
_PER_RANK_COUNT = ("all_gather", "reduce_scatter")
# Calls NCCL's tuner decides (send/recv and all-to-all never print a choice).
_TUNED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
_PENDING_CALLS = 64  # COLL lines kept per process while waiting for their TUNING line

_PREFIX = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d{1,18}):\d+ \[\d+\] NCCL INFO (?P<msg>.*)")
_BARE = re.compile(r"NCCL INFO (?P<msg>.*)")
_COLL = re.compile(
    r"(?P<op>\w+): opCount [0-9a-fA-Fx]+ sendbuff \S+ recvbuff \S+ count (?P<count>\d{1,18}) "
    r"datatype (?P<dtype>\d{1,18}) op -?\d+ root -?\d+ comm \S+ \[nranks=(?P<nranks>\d{1,18})\]"
)
_BYTES = r"(?P<bytes>\d{1,18}) Bytes -> "  # numbers bounded: int() refuses 4,300 digits
_ALGO = r"Algo (?P<algo>-?\d{1,9}) proto (?P<proto>-?\d{1,9}) time"
# (log_format, pattern, whether the bytes are per rank for all-gather/reduce-scatter)
_FORMATS = (
    (
        "2.24",
        re.compile(
            r"(?P<op>\w+): " + _BYTES + r"Algo (?P<algo>\w+) proto (?P<proto>\w+) "
            r"channel\{Lo\.\.Hi\}=\{(?P<lo>\d{1,18})\.\.(?P<hi>\d{1,18})\}"
        ),
        True,
    ),
    ("2.23", re.compile(r"(?P<op>\w+): " + _BYTES + _ALGO), False),
    ("2.20", re.compile(_BYTES + _ALGO), False),
    (
        SYMMETRIC,
        re.compile(
            r"(?P<op>\w+) \[Symmetric\]: "
            + _BYTES
            + r"Kernel (?P<kernel>\S+) nchannels (?P<channels>\d{1,18})"
        ),
        True,
    ),
    (COPY_ENGINE, re.compile(r"(?P<op>\w+) \[Copy Engine\]: " + _BYTES + "cudaMemcpy"), True),
    (
        HIERARCHICAL_CE,
        re.compile(r"(?P<op>\w+) \[Hierarchical CE\]: " + _BYTES + "RMA proxy"),
        True,
    ),
)


@dataclass(frozen=True)
class Choice:
    """One line on which NCCL said what it used for one collective call."""

    # collbench's name ("all_reduce"); NCCL's own name, lower-cased, for one collbench lacks;
    # None when the line does not say (2.20-2.22 with no COLL line to pair it with).
    collective: str | None
    logged_bytes: int  # the byte count on NCCL's line (see the module docstring per version)
    # collbench's and nccl-tests' "size": max(send, recv) bytes per rank; None when the line
    # gives per-rank bytes of an all-gather/reduce-scatter and the rank count is unknown.
    size_bytes: int | None
    algorithm: str | None  # one of ALGORITHMS, or ONE_RANK, SYMMETRIC, ...; NCCL's word if unknown
    protocol: str | None  # one of PROTOCOLS; None where the path has none
    channels: int | None  # channels the call ran on; None where the line does not say (< 2.24)
    line_number: int  # 1-based position in the lines parsed
    stream: str | None = None  # "host:pid" of the process that printed it
    count: int | None = None  # from the call's COLL line, when it was paired with one
    dtype: str | None = None
    nranks: int | None = None
    kernel: str | None = None  # symmetric kernel name (NCCL >= 2.27)
    log_format: str = ""  # which format the line follows: "2.20", "2.23", "2.24", "coll", ...

    def to_dict(self) -> dict:
        """A plain dict (one line of a choices.jsonl)."""
        return asdict(self)


@dataclass(frozen=True)
class _Call:
    """A COLL line waiting for the TUNING line that says what NCCL chose for it."""

    collective: str
    count: int
    dtype: str | None
    elem_bytes: int | None
    nranks: int

    @property
    def count_bytes(self) -> int | None:
        return None if self.elem_bytes is None else self.count * self.elem_bytes

    @property
    def size_bytes(self) -> int | None:
        factor = self.nranks if self.collective in _PER_RANK_COUNT else 1
        return None if self.count_bytes is None else self.count_bytes * factor

    def as_choice(self, path: str, line_number: int, stream: str | None) -> Choice:
        """The choice a COLL line alone tells: a path that bypasses NCCL's tuner."""
        logged = self.count_bytes if self.count_bytes is not None else self.count
        return Choice(
            self.collective,
            logged,
            self.size_bytes,
            path,
            None,
            None,
            line_number,
            stream,
            count=self.count,
            dtype=self.dtype,
            nranks=self.nranks,
            log_format="coll",
        )


def debug_env(
    version: tuple[int, int, int] | None = None,
    debug_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The NCCL_DEBUG variables to set so NCCL (or RCCL) prints what it chose.

    `version` is the NCCL version the ranks load (RCCL: the NCCL version it is based on);
    None asks for the broadest setting (TUNING and COLL). From 2.23 TUNING alone names the
    collective; before, COLL is needed to tell which collective a TUNING line belongs to.
    `debug_file` becomes NCCL_DEBUG_FILE: NCCL expands %h to the host and %p to the pid, so
    ranks sharing a host need %p (or a path per rank); its folder must exist (else NCCL
    falls back to stdout). NCCL writes that file unbuffered, and its WARN lines go there
    too; on stdout its lines are block-buffered once redirected to a file, so a rank that
    ends with os._exit loses the last ones. `environ` is the environment the
    ranks would get: its own NCCL_DEBUG and NCCL_DEBUG_SUBSYS are kept and widened, never
    narrowed, so the user's logging still prints.
    """
    environ = environ or {}
    wanted = ("TUNING",) if version is not None and version >= NAMED_SINCE else ("COLL", "TUNING")
    level = environ.get("NCCL_DEBUG", "").strip().upper()
    user_subsys = environ.get("NCCL_DEBUG_SUBSYS")
    if user_subsys is None and level in _PRINTS_INFO:
        user_subsys = ",".join(_DEFAULT_SUBSYS)  # they already read INIT/ENV lines: keep them
    env = {
        "NCCL_DEBUG": level if level in _PRINTS_INFO else "INFO",
        "NCCL_DEBUG_SUBSYS": _widen_subsys(user_subsys, wanted),
    }
    if debug_file is not None:
        if not debug_file.strip():
            raise SpecError(
                "NCCL_DEBUG_FILE", debug_file, "is empty: give a path (%h host, %p pid)"
            )
        env["NCCL_DEBUG_FILE"] = debug_file
    return env


def _widen_subsys(current: str | None, wanted: tuple[str, ...]) -> str:
    """NCCL_DEBUG_SUBSYS `current` with the `wanted` subsystems switched on."""
    if current is None or not current.strip():
        return ",".join(wanted)
    names = [name.strip() for name in current.strip().removeprefix("^").split(",") if name.strip()]
    if current.strip().startswith("^"):  # an exclusion list: stop excluding what we need
        kept = [name for name in names if name.upper() not in wanted]
        return "^" + ",".join(kept) if kept else "ALL"
    if any(name.upper() == "ALL" for name in names):
        return current.strip()
    upper = {name.upper() for name in names}
    return ",".join([*names, *(name for name in wanted if name not in upper)])


def parse_choices(lines: Iterable[str], world_size: int | None = None) -> list[Choice]:
    """Every choice NCCL printed in `lines`, in order.

    Lines may come from several ranks interleaved (each `host:pid` is followed on its own),
    from any NCCL version from 2.20 and from RCCL; lines of no known format are skipped.
    `world_size` converts the per-rank bytes of an NCCL >= 2.24 all-gather/reduce-scatter
    line to collbench's size when no COLL line says the rank count.
    """
    parser = _Parser(world_size)
    for line_number, line in enumerate(lines, start=1):
        parser.feed(line.rstrip("\r\n"), line_number)
    return parser.choices


class _Parser:
    """Pairs COLL lines with TUNING lines per process, and collects the choices."""

    def __init__(self, world_size: int | None) -> None:
        self.world_size = world_size
        self.pending: dict[str | None, deque[_Call]] = {}
        self.choices: list[Choice] = []

    def feed(self, line: str, line_number: int) -> None:
        match = _PREFIX.search(line)
        stream = f"{match['host']}:{match['pid']}" if match else None
        match = match or _BARE.search(line)
        if match is None:
            return
        message = match["msg"]
        coll = _COLL.match(message)
        if coll is not None:
            self._call(coll, stream, line_number)
            return
        for log_format, pattern, per_rank in _FORMATS:
            found = pattern.match(message)
            if found is not None:
                self._choice(found, log_format, per_rank, stream, line_number)
                return

    def _call(self, match: re.Match, stream: str | None, line_number: int) -> None:
        op = match["op"]
        path = MSCCLPP if op.startswith("mscclpp_") else MSCCL if op.startswith("msccl") else None
        collective = _collective(op.removeprefix("mscclpp_nccl").removeprefix("mscclFunc"))
        dtype, elem_bytes = _DTYPES.get(int(match["dtype"]), (None, None))
        call = _Call(collective, int(match["count"]), dtype, elem_bytes, int(match["nranks"]))
        if call.nranks == 1 and collective in _TUNED:
            path = ONE_RANK
        if path is not None:  # NCCL's tuner never sees this call: the COLL line is the answer
            self.choices.append(call.as_choice(path, line_number, stream))
        elif collective in _TUNED:
            self.pending.setdefault(stream, deque(maxlen=_PENDING_CALLS)).append(call)

    def _choice(
        self, match: re.Match, log_format: str, per_rank: bool, stream: str | None, line_number: int
    ) -> None:
        groups = match.groupdict()
        collective = _collective(groups["op"]) if groups.get("op") else None
        logged = int(groups["bytes"])
        call = self._pop_call(stream, collective, logged)
        world_size = self.world_size
        if call is not None:
            collective, world_size = call.collective, call.nranks
        size = _size_from_logged(collective, logged, per_rank, world_size)
        algorithm, protocol, channels = _algo_proto_channels(groups, log_format)
        choice = Choice(
            collective,
            logged,
            size,
            algorithm,
            protocol,
            channels,
            line_number,
            stream,
            kernel=groups.get("kernel"),
            log_format=log_format,
        )
        if call is not None:
            choice = replace(choice, count=call.count, dtype=call.dtype, nranks=call.nranks)
        self.choices.append(choice)

    def _pop_call(self, stream: str | None, collective: str | None, logged: int) -> _Call | None:
        """The oldest waiting call of this process that the TUNING line can be about."""
        calls = self.pending.get(stream, ())
        for call in calls:
            same = collective is None or call.collective == collective
            if same and logged in (call.count_bytes, call.size_bytes):
                calls.remove(call)
                return call
        return None


def _collective(nccl_name: str) -> str:
    """collbench's name for NCCL's function name (ncclFuncToString, the COLL line's opName:
    "AllGather" -> "all_gather"), squeezed as nccl-tests' program names are."""
    squeezed = nccl_name.lower()
    return PROGRAMS.get(squeezed, squeezed)


def _size_from_logged(
    collective: str | None, logged: int, per_rank: bool, world_size: int | None
) -> int | None:
    """collbench's size from the bytes on a TUNING line alone (no COLL line paired)."""
    if not per_rank or collective not in _PER_RANK_COUNT:
        return logged  # already max(send, recv)
    return logged * world_size if world_size is not None else None


def _algo_proto_channels(
    groups: dict, log_format: str
) -> tuple[str | None, str | None, int | None]:
    """(algorithm, protocol, channels) from one matched TUNING line."""
    if log_format in (SYMMETRIC, COPY_ENGINE, HIERARCHICAL_CE):
        channels = groups.get("channels")
        return log_format, None, int(channels) if channels is not None else None
    channels = int(groups["hi"]) - int(groups["lo"]) + 1 if groups.get("hi") is not None else None
    return _name(groups["algo"], ALGORITHMS), _name(groups["proto"], PROTOCOLS), channels


def _name(text: str, names: tuple[str, ...]) -> str:
    """An algorithm or protocol as NCCL printed it (id or word) -> its name in `names`."""
    if text.lstrip("-").isdigit():
        index = int(text)
        return names[index] if 0 <= index < len(names) else text
    squeezed = text.lower()
    by_squeezed = {name.replace("_", ""): name for name in names}  # ncclAlgoStr's "NVLSTree"
    return by_squeezed.get(squeezed.replace("_", ""), squeezed)


@dataclass(frozen=True)
class UsedChoice:
    """One (algorithm, protocol, channels) NCCL used at a size, and how many lines said so."""

    algorithm: str | None
    protocol: str | None
    channels: int | None
    count: int


@dataclass(frozen=True)
class ChoiceSummary:
    """What NCCL used for one collective at one size."""

    collective: str | None
    size_bytes: int
    # True: size_bytes is NCCL's printed byte count, which could not be turned into
    # collbench's size (per-rank bytes of an all-gather/reduce-scatter, rank count unknown).
    size_is_logged: bool
    used: tuple[UsedChoice, ...]  # most lines first

    @property
    def mixed(self) -> bool:
        """Whether NCCL used more than one (algorithm, protocol, channels) at this size."""
        return len(self.used) > 1

    def to_dict(self) -> dict:
        """A plain dict, with `mixed` spelled out."""
        return {**asdict(self), "mixed": self.mixed}


def summarize(choices: Iterable[Choice]) -> list[ChoiceSummary]:
    """Per (collective, size): the (algorithm, protocol, channels) NCCL used, with counts.

    A size with more than one entry in `used` is `mixed`: NCCL changed its mind between
    calls (other collectives in the same group, a tuner plugin, channels shared in a plan).
    Counts are lines: COLL-derived choices (ONE_RANK, MSCCL) are printed by every rank.
    """
    counts: dict[tuple, Counter] = {}
    for choice in choices:
        logged = choice.size_bytes is None
        size = choice.logged_bytes if logged else choice.size_bytes
        key = (choice.collective, size, logged)
        used = (choice.algorithm, choice.protocol, choice.channels)
        counts.setdefault(key, Counter())[used] += 1
    summaries = [
        ChoiceSummary(
            collective,
            size,
            logged,
            tuple(UsedChoice(*used, count) for used, count in counter.most_common()),
        )
        for (collective, size, logged), counter in counts.items()
    ]
    return sorted(
        summaries, key=lambda item: (item.collective or "", item.size_bytes, item.size_is_logged)
    )
