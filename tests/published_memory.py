"""Published training configurations and what their memory did: the memory estimate's
validation set (analysis/mfu/memory.py).

Each configuration is entered as its source sets it (model, parallelism, recompute,
gradient dtype, dropout) and with what it reported: it ran on accelerators of that memory,
it ran out of memory, or it sat at the edge (out of memory in some runs, not in others:
its peak is the usable memory). Nothing here is fitted: the estimate's error per case is
what benchmarks/mfu_memory.py prints and tests/unit/analysis/mfu/test_mfu_memory_published.py pins.

The error of a case: estimate / reported - 1 where a peak is known (at the edge: the
capacity); where a configuration only ran, its peak is at most the capacity, so an
estimate above the capacity is high by at least estimate / capacity - 1 and one below it is
consistent (no error shown).

Sources beyond tests/published_runs.py's:
- NVIDIA dgxc-benchmarking, nemotron/nemotron4-340b-synth.yaml (@8f5cbb3) and
  nemotron/README.md: Nemotron-4 340B, TP 8, PP 8, VP 12, micro-batch 1, seq 4096,
  sequence parallelism, selective recompute, no dropout, Apex's distributed Adam with
  bf16 gradient buffers (grad_sync_dtype bf16, contiguous_grad_buffer), on 256 H100 80 GB
  (DP 4, batch 64) and 384 (DP 6, batch 96, the yaml's 48 nodes); README_340b.md (@35a9aec):
  "at least 128 GPUs" (DP 2) and "will not fit on fewer" (64 GPUs, DP 1, is out of memory).
- Llama 3 Herd of Models (arXiv 2407.21783), section 3.3.2 and Table 4: 405B on 8,192
  H100 80 GB, TP 8, PP 16, DP 64, seq 8192, 32 sequences per DP rank; FP32 gradient
  accumulation; the first and last stages one layer short.
- NVIDIA-NeMo/Megatron-Bridge pull request 3107 (April 2026) and
  src/megatron/bridge/perf_recipes/llama/h100/llama3.py (llama3_70b_sft_32gpu_h100_fp8cs):
  Llama 3 70B SFT on 32 H100 80 GB, TP 4, PP 4, VP 5, DP 2, seq 4096, micro-batch 1, batch
  32, FP8, sequence parallelism, distributed optimizer, bf16 gradients
  (grad_reduce_in_fp32 False), attention core recomputed: out of memory in 30-60% of CI
  runs ("a pre-existing borderline memory issue"); with VP 10 it passed.
- Megatron-Bridge's performance recipes (scripts/performance, _perf_precision) reduce
  gradients in bf16: the Bridge H100 runs of tests/published_runs.py have 2-byte gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collbench.analysis.mfu.memory import GIB, MemoryEstimate, memory_estimate
from collbench.analysis.mfu.workload import Model, Workload
from collbench.topologies.loader import load_topology
from tests.published_runs import NEMOTRON4_340B, PUBLISHED, published_workload

OUTCOMES = ("ran", "oom", "edge")
DGXC_NEMOTRON = "NVIDIA dgxc-benchmarking nemotron/nemotron4-340b-synth.yaml (@8f5cbb3)"
DGXC_README = "NVIDIA dgxc-benchmarking nemotron/README_340b.md (@35a9aec)"
LLAMA3 = "Llama 3 Herd of Models (arXiv 2407.21783), section 3.3.2 and Table 4"
BRIDGE_3107 = "NVIDIA-NeMo/Megatron-Bridge PR 3107; perf_recipes/llama/h100/llama3.py"


@dataclass(frozen=True)
class MemoryCase:
    """One published configuration and what its memory did."""

    case: str
    model: str | Model
    topology: str
    tp: int
    pp: int
    dp: int
    global_batch: int
    outcome: str  # OUTCOMES: "ran", "oom" or "edge" (its peak is the usable memory)
    source: str
    setup: dict[str, Any] = field(default_factory=dict)  # Training / Parallelism fields
    seq: int = 2048

    def workload(self) -> Workload:
        return published_workload(self)

    @property
    def capacity_gib(self) -> float:
        memory = load_topology(self.topology).accelerator.memory_gib
        assert memory is not None, f"{self.topology} gives no accelerator.memory_gib"
        return memory

    def estimate(self) -> MemoryEstimate:
        return memory_estimate(self.workload(), self.capacity_gib)

    def error(self, memory: MemoryEstimate | None = None) -> float | None:
        """estimate / peak - 1 (at the edge the peak is the capacity); for a run that
        only ran, the share the estimate is above the capacity (None: below it)."""
        total = (memory or self.estimate()).total_bytes / GIB
        excess = total / self.capacity_gib - 1
        if self.outcome == "ran":
            return excess if excess > 0 else None
        if self.outcome == "edge":
            return excess
        return None  # out of memory: the check is that it is refused or warned about

    def consistent(self, memory: MemoryEstimate | None = None) -> bool:
        """A run that ran fits or may fit; one that did not does not fit."""
        memory = memory or self.estimate()
        if self.outcome == "oom":
            return memory.fits is False
        return memory.fits is True or memory.may_fit


def _from_published(name: str, **changes: Any) -> MemoryCase:
    """A run of tests/published_runs.py as a memory case: it ran."""
    run = next(run for run in PUBLISHED if run.run == name)
    setup = {**run.setup, **changes.pop("setup", {})}
    return MemoryCase(
        name,
        run.model,
        run.topology,
        run.tp,
        run.pp,
        run.dp,
        run.global_batch,
        "ran",
        run.source,
        setup,
        run.seq,
        **changes,
    )


_NEMOTRON = {"sequence_parallel": True, "zero": 1, "virtual_stages": 12, "grad_bytes": 2}
_NEMOTRON.update(recompute="selective")
_LLAMA3 = {"sequence_parallel": True, "zero": 1}
_SFT_70B = {"sequence_parallel": True, "zero": 1, "grad_bytes": 2, "dtype": "fp8"}
_SFT_70B.update(recompute="selective")
_BRIDGE_GRADS = {"grad_bytes": 2}

CASES: tuple[MemoryCase, ...] = (
    *(
        _from_published(name)
        for name in (
            "22b-sp-selective-step",
            "22b-full-step",
            "175b-sp-selective-step",
            "175b-full-step",
            "530b-sp-selective-step",
            "530b-full-step",
            "1t-sp-selective-step",
            "1t-full-step",
            "1t-hfu",
            "145b-hfu",
            "gpt3-175b-bf16-dgxc",
            "nemotron4-15b-bf16-dgxc",
        )
    ),
    _from_published("llama3-70b-fp8-gbs128", setup=_BRIDGE_GRADS),
    _from_published("llama3-8b-fp8-fsdp", setup=_BRIDGE_GRADS),
    MemoryCase("nemotron4-340b-256gpu", NEMOTRON4_340B, "dgx-h100", 8, 8, 4, 64, "ran",
               f"{DGXC_NEMOTRON}, nemotron/README.md (256 GPUs)", _NEMOTRON, seq=4096),
    MemoryCase("nemotron4-340b-384gpu", NEMOTRON4_340B, "dgx-h100", 8, 8, 6, 96, "ran",
               f"{DGXC_NEMOTRON} (48 nodes)", _NEMOTRON, seq=4096),
    # README_340b.md: "At least 128 GPUs ... will not fit on fewer GPUs with less memory".
    MemoryCase("nemotron4-340b-128gpu", NEMOTRON4_340B, "dgx-h100", 8, 8, 2, 32, "ran",
               f"{DGXC_README} (at least 128 GPUs)", _NEMOTRON, seq=4096),
    MemoryCase("nemotron4-340b-64gpu", NEMOTRON4_340B, "dgx-h100", 8, 8, 1, 16, "oom",
               f"{DGXC_README} (not on fewer than 128)", _NEMOTRON, seq=4096),
    MemoryCase("llama3-405b-8k", "llama3-405b", "dgx-h100", 8, 16, 64, 2048, "ran", LLAMA3,
               _LLAMA3, seq=8192),
    MemoryCase("llama3-70b-sft-fp8-vp5", "llama3-70b", "dgx-h100", 4, 4, 2, 32, "edge",
               f"{BRIDGE_3107} (VP 5: out of memory in 30-60% of runs)",
               {**_SFT_70B, "virtual_stages": 5}, seq=4096),
    MemoryCase("llama3-70b-sft-fp8-vp10", "llama3-70b", "dgx-h100", 4, 4, 2, 32, "ran",
               f"{BRIDGE_3107} (VP 10: passed)", {**_SFT_70B, "virtual_stages": 10},
               seq=4096),
)  # fmt: skip
