"""Before the process group: every rank says what it is about to run, rank 0 compares.

The method, in full: docs/architecture.md#collbench-bench-agreement-py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from collbench.core.errors import RunFailed, SpecError

GPU_BACKENDS = ("nccl", "rccl")
# Facts every rank must share, in the order a disagreement is reported, with their names.
_COMPARED = {
    "collbench": "collbench version",
    "torch": "torch version",
    "nccl": "NCCL/RCCL version",
    "backend": "backend",
    "device_count": "GPUs visible",
    "plan": "measurement plan (sizes, counts, knobs)",
}
_VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
_HOSTS_NAMED = 3
# How long rank 0, which serves the store, waits for the others to read a failing verdict.
READ_WAIT_S = 30.0


@dataclass(frozen=True)
class RankFacts:
    """What one rank is about to run, as it tells the others through the store."""

    host: str
    backend: str
    device_count: int
    # One identity per visible GPU (its UUID, else its entry in CUDA_VISIBLE_DEVICES or
    # its index): two ranks naming the same one share a GPU.
    devices: tuple[str, ...]
    torch: str
    nccl: str | None
    collbench: str
    plan: str
    # The local rank a variable gave (LOCAL_RANK, SLURM_LOCALID, ...); None: none did.
    local_rank: int | None


@dataclass(frozen=True)
class Placement:
    """Where a rank sits among the ranks of its host."""

    local_rank: int
    local_world_size: int
    node_rank: int


@dataclass(frozen=True)
class Verdict:
    """Rank 0's answer: the error every rank reports (None: agreed), and, when a rank had
    no local rank, each rank's host (an index into `hosts`) to derive it from."""

    error: str | None = None
    usage: bool = False  # the error is a request the hosts cannot serve (exit 2)
    hosts: tuple[str, ...] = ()
    host_of: tuple[int, ...] = ()

    def placement(self, rank: int) -> Placement | None:
        """This rank's place on its host, when the verdict carries the hosts."""
        if not self.host_of:
            return None
        return places_by_host([self.hosts[index] for index in self.host_of])[rank]

    def raise_error(self) -> None:
        if self.error is None:
            return
        if self.usage:
            raise SpecError.from_message(self.error)
        raise RunFailed(self.error)


def places_by_host(hosts: list[str]) -> list[Placement]:
    """Each rank's place from every rank's host (index = global rank): local ranks count the
    ranks of a host in global rank order; nodes are numbered by their lowest rank."""
    per_host = Counter(hosts)
    node_of = {host: node for node, host in enumerate(dict.fromkeys(hosts))}
    seen: Counter[str] = Counter()
    places = []
    for host in hosts:
        places.append(Placement(seen[host], per_host[host], node_of[host]))
        seen[host] += 1
    return places


def disagreement(facts: list[RankFacts]) -> str | None:
    """One line naming what the ranks disagree on and where, or None."""
    fields = [name for name in _COMPARED if len({getattr(f, name) for f in facts}) > 1]
    if "backend" in fields:  # GPU counts and default sizes differ because backends do
        fields = [name for name in fields if name not in ("device_count", "plan")]
    elif "device_count" in fields and facts[0].backend not in GPU_BACKENDS:
        fields.remove("device_count")  # gloo uses no GPU
    if not fields:
        return None
    parts = [f"{_COMPARED[name]}: {_groups(facts, name)}" for name in fields]
    return (
        "the ranks disagree before joining: "
        + "; ".join(parts)
        + " (every rank must run the same collbench, torch and NCCL and resolve the same "
        "backend: fix or leave out the host(s) named)"
    )


def _groups(facts: list[RankFacts], name: str) -> str:
    """`value on hosts (ranks)` for each value of one fact, the most common first."""
    ranks_of: dict[Any, list[int]] = {}
    for rank, fact in enumerate(facts):
        ranks_of.setdefault(getattr(fact, name), []).append(rank)
    ordered = sorted(ranks_of.items(), key=lambda item: (-len(item[1]), item[1][0]))
    texts = []
    for value, ranks in ordered:
        shown = f"digest {value[:8]}" if name == "plan" else str(value)
        texts.append(f"{shown} on {_where([facts[r].host for r in ranks], ranks)}")
    return ", ".join(texts)


def _where(hosts: list[str], ranks: list[int]) -> str:
    named = list(dict.fromkeys(hosts))
    text = ", ".join(named[:_HOSTS_NAMED])
    if len(named) > _HOSTS_NAMED:
        text += f" and {len(named) - _HOSTS_NAMED} more host(s)"
    return f"{text} (rank {ranks[0]})" if len(ranks) == 1 else f"{text} ({len(ranks)} ranks)"


def shared_gpus(facts: list[RankFacts], local_ranks: list[int]) -> str | None:
    """Refusal naming the first host where two ranks would use one GPU, or None. Each rank
    uses its visible GPU local_rank % count; ranks that each see only their own GPU (Slurm's
    --gpus-per-task) name different GPUs and share nothing."""
    by_host: dict[str, dict[str, list[int]]] = {}
    for rank, (fact, local) in enumerate(zip(facts, local_ranks, strict=True)):
        if fact.backend not in GPU_BACKENDS or not fact.devices:
            continue
        gpu = fact.devices[local % len(fact.devices)]
        by_host.setdefault(fact.host, {}).setdefault(gpu, []).append(rank)
    for host, users in by_host.items():
        shared = next((ranks for ranks in users.values() if len(ranks) > 1), None)
        if shared is None:
            continue
        ranks = sum(users.values(), [])
        visible = {gpu for r in ranks for gpu in facts[r].devices}
        return (
            f"{host}: {len(ranks)} ranks on {len(visible)} visible GPU(s): ranks "
            f"{', '.join(map(str, shared[:4]))} would share one GPU; start at most "
            f"{len(visible)} rank(s) on this host (--nproc-per-node, --ntasks-per-node, "
            "mpirun's ranks per node)"
        )
    return None


def judge(facts: list[RankFacts]) -> Verdict:
    """Rank 0's verdict from every rank's facts (index = global rank)."""
    error = disagreement(facts)
    if error is not None:
        return Verdict(error)
    hosts = [fact.host for fact in facts]
    places = places_by_host(hosts)
    local_ranks = [
        place.local_rank if fact.local_rank is None else fact.local_rank
        for fact, place in zip(facts, places, strict=True)
    ]
    refusal = shared_gpus(facts, local_ranks)
    if refusal is not None:
        return Verdict(refusal, usage=True)
    if all(fact.local_rank is not None for fact in facts):
        return Verdict()
    # a host's index is its node rank: hosts numbered in the order they first appear
    return Verdict(hosts=tuple(dict.fromkeys(hosts)), host_of=tuple(p.node_rank for p in places))


def exchange(store: Any, rank: int, world_size: int, facts: RankFacts, timeout_s: float) -> Verdict:
    """Write this rank's facts; rank 0 judges all of them; every rank gets the verdict."""
    prefix = f"collbench/agree/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    store.set(f"{prefix}/rank/{rank}", msgspec.json.encode(facts))
    if rank == 0:
        keys = [f"{prefix}/rank/{other}" for other in range(world_size)]
        _wait(store, keys, timeout_s)
        verdict = judge([msgspec.json.decode(store.get(key), type=RankFacts) for key in keys])
        store.set(f"{prefix}/verdict", msgspec.json.encode(verdict))
        if verdict.error is not None:  # rank 0 serves the store: stay until all have read
            _wait_for_readers(store, f"{prefix}/read", world_size - 1, timeout_s)
        return verdict
    _wait(store, [f"{prefix}/verdict"], timeout_s)
    verdict = msgspec.json.decode(store.get(f"{prefix}/verdict"), type=Verdict)
    store.add(f"{prefix}/read", 1)
    return verdict


def _wait_for_readers(store: Any, key: str, readers: int, timeout_s: float) -> None:
    """Until `readers` ranks have counted themselves on `key`, or READ_WAIT_S passed (a rank
    that died after writing its facts must not hold the others' error back)."""
    deadline = time.monotonic() + min(timeout_s, READ_WAIT_S)
    while store.add(key, 0) < readers and time.monotonic() < deadline:
        time.sleep(0.01)


def _wait(store: Any, keys: list[str], timeout_s: float) -> None:
    """Wait for keys; on timeout, name the ranks that never wrote theirs."""
    try:
        store.wait(keys, timedelta(seconds=timeout_s))
    except Exception as error:  # noqa: BLE001 - torch raises DistStoreError/RuntimeError
        missing = [key.rsplit("/", 1)[-1] for key in keys if not store.check([key])]
        if len(keys) == 1:
            raise RunFailed(
                f"rank 0 gave no verdict on the ranks' agreement within {timeout_s:g} s"
            ) from error
        raise RunFailed(
            f"rank(s) {', '.join(missing[:8])} of {len(keys)} never reached the "
            f"rendezvous within {timeout_s:g} s"
        ) from error


def plan_digest(spec: Any) -> str:
    """A short digest of the resolved measurement plan (the spec every rank runs). A topology
    file counts by its content, not its path: nodes started from different directories
    (torchrun with a relative --topology) run the same plan."""
    data = spec.to_dict()
    if data.get("topology_file"):
        with contextlib.suppress(OSError):  # unreadable: the path it is, as before
            data["topology_file"] = hashlib.sha256(
                Path(spec.topology_file).read_bytes()
            ).hexdigest()
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def collect_facts(
    torch: Any, backend: str, plan: str, local_rank: int | None, host: str
) -> RankFacts:
    """This rank's facts, before any GPU is chosen (the versions as meta.json records them)."""
    from collbench.bench.provenance import versions

    info = versions(torch, backend)  # the NCCL/RCCL version under the backend's name
    devices = _device_ids(torch) if backend in GPU_BACKENDS and torch.cuda.is_available() else ()
    return RankFacts(
        host=host,
        backend=backend,
        device_count=len(devices),
        devices=devices,
        torch=str(info["torch"]),
        nccl=info.get(backend),
        collbench=info["collbench"],
        plan=plan,
        local_rank=local_rank,
    )


def _device_ids(torch: Any) -> tuple[str, ...]:
    """Identities of the visible GPUs: UUIDs where torch reports them, else the entries of
    the visible-devices variable (physical ids), else indices."""
    count = torch.cuda.device_count()
    uuids = [getattr(torch.cuda.get_device_properties(i), "uuid", None) for i in range(count)]
    texts = [str(uuid) for uuid in uuids if uuid]
    if len(set(texts)) == count:  # a build that reports none, or one for all, says nothing
        return tuple(texts)
    for name in _VISIBLE_VARS:
        entries = [e.strip() for e in os.environ.get(name, "").split(",") if e.strip()]
        if len(entries) >= count:
            return tuple(f"{name}={entry}" for entry in entries[:count])
    return tuple(str(index) for index in range(count))
