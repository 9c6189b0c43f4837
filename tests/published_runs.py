"""Published large-scale training runs, as the MFU estimator's validation set.

Each run is what its paper says it did (model, hardware, parallelism, recompute, sequence
parallelism, attention kernel, whether DP overlapped the backward) and the figure it
reported. Every run is predicted with one set of defaults: nothing here is fitted per run.
tests/unit/analysis/mfu/test_mfu_published.py pins each run's error; benchmarks/mfu_validation.py prints
the validation table of docs/mfu/validation.md and the sensitivity to each default.

A100 sources (the same figures as ../shared/data/published_runs.md):
- Narayanan et al., SC'21 (arXiv 2104.04473), Table 1: GPT 1T on 3072 A100s, 163 TFLOP/s
  per GPU = 52% of peak; GPT 145.6B on 1536 A100s, 148 TFLOP/s = 47%. Both count the
  recompute FLOPs (4 forward passes in their formula), so they are compared with the HFU.
  2021 Megatron reduced gradients after the backward (no DP overlap).
- Korthikanti et al. 2022 (arXiv 2205.05198): 530B on 2240 A100s, MFU 54.2% with sequence
  parallelism + selective recompute, 42.1% with full recompute; Table 5 iteration times.
Both papers ran Megatron's unfused attention (batched GEMMs around a fused softmax).

H100 sources: NVIDIA's Megatron-Bridge performance summary (github.com/NVIDIA-NeMo/
Megatron-Bridge, docs/performance-summary.md and docs/performance-summary-archive.md),
DGX-H100, Llama 3 pre-training at seq 8192 and micro-batch 1, FP8 current scaling, tokens
per second per GPU as published (their model TFLOP/s count attention their own way, so the
token rate is compared). What the tables do not say is what the recipes they name set
(scripts/performance): sequence parallelism with TP, the distributed optimizer (ZeRO 1),
gradient reduction overlapped, Transformer Engine's fused attention, no recompute, and for
the 70B and 405B models TP communication overlapped with userbuffers (COMM_OVERLAP_CONFIG_MAP,
llama3_70b / llama31_405b h100 fp8), given here as --tp-overlap 1 with the configuration the
map names (--tp-overlap FILE; priced pair by pair, analysis/mfu/tp_overlap.py).
NVIDIA's dgxc-benchmarking recipes (BF16 on DGX H100, NeMo 24.05/24.09) publish their launch
configuration beside the step time: the distributed optimizer, sequence parallelism, TP
communication overlap (ub_tp_comm_overlap, --tp-overlap 1; Nemotron-4 15B with TE's default
ub config, 175B with its own ub_tp_comm_overlap_cfg: pipelined reduce-scatters on 24 and 20
SMs, bulk pairs on 2 to 8, fc2_dgrad aggregated), no recompute, flash or cuDNN fused attention,
and their distributed_fused_adam's gradient reduction in bf16 (grad_sync_dtype: bf16,
--grad-bytes 2) in buckets of bucket_cap_mb (220 MB for 175B, 100 for 15B); Nemotron-4
15B trains without dropout (its yaml's dropouts are 0.0).
Llama 3 8B (25.11 row): the row's FSDP column says 8 (Megatron FSDP, ZeRO 3), which is
the recipe as of Megatron-Bridge 278b9baad (2025-11-19: use_megatron_fsdp=True, no
recompute). From 1420e3fa9 (2025-11-21, and the v0.2.0 tag) the recipe drops FSDP for
recompute_num_layers=5 (--recompute-layers 5, ZeRO 1): the row's own FSDP 8 says the
first, so it is entered as that; no H100 figure of the second is published.
None of these runs chose a default of collbench.

MLPerf Training (v3.1, v4.0, v5.0): NVIDIA's GPT-3 175B and Llama 3.1 405B submissions on Eos,
512 to 11,616 H100s, each as its config sets it and the step its result log times (MLPERF_RUNS,
with their derivation); v5.1's Llama 3.1 8B on B200, GB200, H200 and H100 (MLPERF_8B_RUNS).
B200 sources: the same Megatron-Bridge summary's Llama 3.1 405B FP8 (current scaling) rows
on DGX-GB200 (26.02, 256 GPUs, gb200-nvl72) and DGX-B200 (25.11, 128 GPUs, CP 2), each as
the recipe tagged with its container sets it (v0.3.0 and v0.2.0; derivation at the rows).
The rows not entered, each with why (MXFP8 and NVFP4 are not priced; the 70B GB200 recipe
offloads 40 layers' activations to the CPU; GB300/B300 have no topology; ...), are listed
in docs/mfu/validation.md ("Blackwell"). No H200 row is published.

Frameworks (--framework): the Megatron runs (Megatron-LM, NeMo, Megatron-Bridge and
Megatron-Core FSDP with Transformer Engine; DeepSeek-V3's HAI-LLM, its own fused kernels)
are entered as framework "megatron" (MEGATRON below), and so are MosaicML's MPT runs on
Composer, PyTorch eager whose kernels are fused where collbench prices fusion (MPT_RUNS,
with their derivation). IBM and Meta's FSDP table (FMS_RUNS) is entered as "eager": their
Llama block runs op by op. torchtitan's eager and torch.compile rows
(benchmarks/llama3_h100_202412_torchtitan.md, Llama 3.1 8B, FSDP) cannot be entered
faithfully: their H100s are HBM2e parts at a 500 W limit whose peak the benchmark itself
says it does not know (its footnote 2). Their ratio is the eager term's check
(tests/unit/analysis/mfu/test_mfu_framework.py). Its A100 rows (docs/performance.md, 64
A100s, FSDP2) state neither torch.compile nor the network their FSDP steps are bound by.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from collbench.analysis.mfu.estimate import Estimate, EstimateOptions, estimate
from collbench.analysis.mfu.fabrics import sized_for
from collbench.analysis.mfu.inputs import cost_model_pricer
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.tp_overlap import pairs_from_config
from collbench.analysis.mfu.workload import (
    Model,
    Parallelism,
    Training,
    Workload,
    pipeline_layout,
)
from collbench.topologies.loader import load_topology

FULL = {"recompute": "full"}
SELECTIVE_SP = {"recompute": "selective", "sequence_parallel": True}
NARAYANAN = "Narayanan et al. SC'21 (arXiv 2104.04473), Table 1"
KORTHIKANTI = "Korthikanti et al. 2022 (arXiv 2205.05198)"
KORTHIKANTI_T5 = f"{KORTHIKANTI}, Table 5"
BRIDGE = "NVIDIA Megatron-Bridge performance summary"
DGXC = "NVIDIA dgxc-benchmarking v24.11.1 (github.com/NVIDIA/dgxc-benchmarking @35a9aec)"
DEEPSEEK_V3 = "DeepSeek-V3 Technical Report (arXiv 2412.19437), sections 1, 3.1-3.3, 4.2"
MOSAIC = (
    "MosaicML llm-foundry MPT training benchmarks "
    "(scripts/train/benchmarking/README.md @b2a43a147, Oct 2023)"
)
MLPERF_31 = "MLPerf Training v3.1 (mlcommons/training_results_v3.1 @d06288b)"
MLPERF_40 = "MLPerf Training v4.0 (mlcommons/training_results_v4.0 @6fe9543)"
MLPERF_50 = "MLPerf Training v5.0 (mlcommons/training_results_v5.0 @0fdc28f)"
MLPERF_51 = "MLPerf Training v5.1 (mlcommons/training_results_v5.1 @441d65f)"
FMS = (
    "IBM and Meta, PyTorch FSDP throughput (pytorch.org/blog/maximizing-training, 2024-03-13; "
    "foundation-model-stack/fms-fsdp README.md @4ffb9bdf)"
)
# Fabrics the catalog does not ship, each a fixture file citing its source: DeepSeek-V3's
# H800 cluster and the two clusters of IBM and Meta's FSDP table (tests/fixtures/*.yaml).
H800 = "hgx-h800"
FIXTURE_FABRICS = (H800, "fms-a100", "fms-h100")


def _topology_path(name: str) -> str:
    """A catalog name, or the fixture file of a fabric the catalog does not ship."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / f"{name}.yaml"
    return str(fixture) if name in FIXTURE_FABRICS else name


# Nemotron-4 (presets nemotron4-15b and nemotron4-340b), as the dgxc recipes train them.
NEMOTRON4_15B, NEMOTRON4_340B = preset("nemotron4-15b"), preset("nemotron4-340b")


def parallelism_words(par: Parallelism) -> list[str]:
    """The split as published tables write it: "TP 8 PP 8 DP 2", then "VP 12", "SP" and
    "ZeRO 1" where set (the validation and memory tables' setup column)."""
    words = [f"TP {par.tp} PP {par.pp} DP {par.dp}"]
    if par.virtual_stages > 1:
        words.append(f"VP {par.virtual_stages}")
    if par.sequence_parallel:
        words.append("SP")
    if par.zero:
        words.append(f"ZeRO {par.zero}")
    return words


def published_workload(case: Any) -> Workload:
    """The workload a published run or memory case states: its model (a preset name or a
    Model), tp x pp x dp, global batch and seq, and `setup`'s Training and Parallelism
    fields, each sent to the one that has it."""
    model = preset(case.model) if isinstance(case.model, str) else case.model
    training_fields = {f.name for f in fields(Training)}
    training = {k: v for k, v in case.setup.items() if k in training_fields}
    parallel = {k: v for k, v in case.setup.items() if k not in training_fields}
    return Workload(
        model,
        Training(seq=case.seq, global_batch=case.global_batch, **training),
        Parallelism(tp=case.tp, pp=case.pp, dp=case.dp, **parallel),
    )


@dataclass(frozen=True)
class PublishedRun:
    """One published run: what it did and the figure it reported."""

    run: str
    model: str | Model
    topology: str
    tp: int
    pp: int
    dp: int
    global_batch: int
    what: str  # "mfu", "hfu", "step" (seconds), "tflops" or "tokens" (per GPU and second)
    reported: float
    source: str
    setup: dict[str, Any] = field(default_factory=dict)  # Training / Parallelism fields
    seq: int = 2048
    options: dict[str, Any] = field(default_factory=dict)  # EstimateOptions fields

    @property
    def hardware(self) -> str:
        accelerator = load_topology(_topology_path(self.topology)).accelerator.name
        return f"{self.workload().parallelism.world_size} x {accelerator}"

    def workload(self) -> Workload:
        return published_workload(self)

    def estimate(self) -> Estimate:
        workload = self.workload()
        topology = sized_for(workload, load_topology(_topology_path(self.topology)))
        options = EstimateOptions(**self.options)
        return estimate(workload, topology, cost_model_pricer(topology), options)

    def predicted(self, result: Estimate | None = None) -> float:
        result = result or self.estimate()
        return {
            "mfu": result.mfu,
            "hfu": result.hfu,
            "step": result.step_time_s,
            "tflops": result.model_tflops_per_accelerator,
            "tokens": result.tokens_per_s / result.accelerators,
        }[self.what]

    def error(self, result: Estimate | None = None) -> float:
        """Predicted / reported - 1, on the figure as reported."""
        return self.predicted(result) / self.reported - 1

    def mfu_error(self, result: Estimate | None = None) -> float:
        """The error as an error of the MFU (and the throughput): + = the estimate is
        faster than the run was. A step time's error turns over (reported / predicted)."""
        ratio = self.predicted(result) / self.reported
        return 1 / ratio - 1 if self.what == "step" else ratio - 1

    @property
    def publication(self) -> str:
        """The publication the run is from (a paper, a vendor's table): what
        leave-one-source-out validation holds out together."""
        sources = (NARAYANAN, KORTHIKANTI, BRIDGE, DGXC, DEEPSEEK_V3, MOSAIC, FMS, MLPERF_31,
                   MLPERF_40, MLPERF_50, MLPERF_51)  # fmt: skip
        return next((name for name in sources if self.source.startswith(name)), self.source)

    @property
    def family(self) -> str | None:
        """The accelerator's model number ("A100", "H100"): analysis.mfu.accuracy."""
        from collbench.analysis.mfu.accuracy import family

        return family(load_topology(_topology_path(self.topology)).accelerator.name)


# The 2021-22 Megatron runs: unfused attention; the SC'21 ones without DP overlap and
# without the async TP backward (Megatron-LM's async tensor-parallel all-reduce came later).
MEGATRON = {"framework": "megatron"}
_A100 = {"attention": "unfused", **MEGATRON}
_SC21 = {**_A100, "dp_overlap": False, "tp_async_backward": False}
_BRIDGE = {"dtype": "fp8", "sequence_parallel": True, "zero": 1, **MEGATRON}
# The recipes' own userbuffer configurations (TE's ub_cfg), as their sources write them.
# Megatron-Bridge src/megatron/bridge/training/comm_overlap.py (the configs the H100 perf
# recipes name: llama3 70B userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192, llama3.1 405B
# userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192) and dgxc-benchmarking
# nemo_megatron/gpt3_175b_hydra.yaml (@35a9aec, ub_tp_comm_overlap_cfg). Nemotron-4 15B's
# recipe sets none: TE's defaults.
_RING = {"method": "ring_exchange"}


def _bulk(qkv_dgrad: int, qkv_wgrad: int, fc1_dgrad: int, fc1_wgrad: int) -> dict:
    """The four bulk pairs on their SMs (num_sm)."""
    sms = {"qkv_dgrad": qkv_dgrad, "qkv_wgrad": qkv_wgrad, "fc1_dgrad": fc1_dgrad,
           "fc1_wgrad": fc1_wgrad}  # fmt: skip
    return {name: {"method": "bulk", "num_sm": n} for name, n in sms.items()}


# Megatron-Bridge's H100 FP8 configurations: all-gathers and the forward's reduce-scatters
# by ring exchange (the latter on 1 SM), the bulk pairs on their own SMs.
_BRIDGE_RINGS = {
    **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop", "fc2_dgrad")},
    **{name: {**_RING, "num_sm": 1} for name in ("proj_fprop", "fc2_fprop")},
}
UB_LLAMA3_70B_FP8_H100 = pairs_from_config({**_BRIDGE_RINGS, **_bulk(4, 24, 2, 4)})
UB_LLAMA31_405B_FP8_H100_CP2 = pairs_from_config({**_BRIDGE_RINGS, **_bulk(2, 24, 2, 2)})
UB_GPT3_175B_DGXC = pairs_from_config({
    **_bulk(4, 8, 2, 4),
    "qkv_fprop": _RING, "proj_dgrad": _RING, "fc1_fprop": _RING,
    "fc2_dgrad": {"method": "ring_exchange", "aggregate": 1},
    "proj_fprop": {"method": "pipeline", "num_sm": 24, "num_splits": 4},
    "fc2_fprop": {"method": "pipeline", "num_sm": 20, "num_splits": 4},
})  # fmt: skip
_UB_70B = {"tp_overlap": 1.0, "tp_overlap_pairs": UB_LLAMA3_70B_FP8_H100}
UB_LLAMA31_405B_FP8_B200 = pairs_from_config({**_BRIDGE_RINGS, **_bulk(8, 32, 2, 8)})
_UB_405B_B200 = {"tp_overlap": 1.0, "tp_overlap_pairs": UB_LLAMA31_405B_FP8_B200}
_BRIDGE_B200 = {**_BRIDGE, "grad_bytes": 2, "gather_bytes": 1,
                "pp_layout": pipeline_layout("Et|(tt|)*62tL")}  # fmt: skip
_UB_175B = {"tp_overlap": 1.0, "tp_overlap_pairs": UB_GPT3_175B_DGXC}
_DGXC_175B = {
    **MEGATRON,
    "sequence_parallel": True,
    "zero": 1,
    "virtual_stages": 12,
    "grad_bytes": 2,
    "dp_bucket_mb": 220,
}
_DGXC_15B = {
    **MEGATRON,
    "sequence_parallel": True,
    "zero": 1,
    "micro_batch": 4,
    "grad_bytes": 2,
    "dp_bucket_mb": 100,
}
_DGXC_340B = {
    **MEGATRON,
    "sequence_parallel": True,
    "zero": 1,
    "virtual_stages": 12,
    "grad_bytes": 2,
    "dp_bucket_mb": 50,
    "recompute": "selective",
}


# MPT on Composer (MosaicML llm-foundry, scripts/train/benchmarking @b2a43a147: sweep.sh,
# submit_benchmarks.py, yamls/pretrain/mpt-*.yaml): GPT blocks (learned positions, biases,
# GELU MLP of 4h, tied embeddings, vocab 50,368, no dropout), FSDP FULL_SHARD (--zero 3)
# with mixed precision DEFAULT (bf16 weights gathered, fp32 gradients reduced: the
# defaults), activation checkpointing as each row says (--recompute full or none), and
# attn_impl "triton": flash-attn 1.0's Triton port of the first FlashAttention
# (llmfoundry/models/layers/flash_attn_triton.py; --attention flash1). PyTorch eager, but
# entered as --framework megatron (fused kernels): where collbench prices fusion its kernels
# are fused (LayerNorm and GELU one kernel each, biases in the GEMM, dropout 0 skipped) and
# its loss is flash-attn's fused cross-entropy (modeling_mpt.py, loss_fn
# "fused_crossentropy"), not the fp32 op-by-op loss --framework eager prices.
# The rows entered: every A100-80GB and H100 bf16 row at the models' sequence length, 2048,
# on one node of 8, and the A100 table's two multi-node rows (MPT-70B on 32 and 64 GPUs,
# precision bf16 with FSDP mixed precision PURE: gradients reduced in bf16), whose network
# the table states ("1600 Gbps node-node interconnect (RoCE)": dgx-a100's 8 x 200 Gb/s).
# Not entered: the H100 multi-node rows (their network is not stated) and the rows at
# 512-65,536 tokens (they sweep the attention kernel's speed over sequence length, which one
# share of FlashAttention-2's rate cannot follow): docs/mfu/validation.md. Reported:
# throughput in tokens/s per GPU (column "Throughput (T/s/GPU)").
def _mpt(name: str, layers: int, hidden: int, heads: int) -> Model:
    return Model(f"mpt-{name}", layers, hidden, heads, vocab=50368, dropout=False)


MPT = {size: _mpt(size, *shape) for size, shape in {
    "125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12),
    "1b": (24, 2048, 16), "3b": (32, 2560, 20), "7b": (32, 4096, 32),
    "13b": (40, 5120, 40), "30b": (48, 7168, 56), "70b": (80, 8192, 64),
}.items()}  # fmt: skip


def _mpt_run(size: str, topology: str, micro: int, batch: int, tokens: float, ac: bool,
             tag: str = "", gpus: int = 8, **setup: Any) -> PublishedRun:  # fmt: skip
    gpu = "a100" if topology == "dgx-a100" else "h100"
    setup = {**MEGATRON, "attention": "flash1", "zero": 3, "micro_batch": micro,
             "recompute": "full" if ac else "none", **setup}  # fmt: skip
    return PublishedRun(f"mpt-{size}-{gpu}{tag}", MPT[size], topology, 1, 1, gpus, batch,
                        "tokens", tokens, f"{MOSAIC}, {gpu.upper()} {gpus} GPUs", setup)  # fmt: skip


MPT_RUNS = (
    _mpt_run("30b", "dgx-h100", 3, 504, 2002, True),
    _mpt_run("13b", "dgx-h100", 2, 16, 4792, False),
    _mpt_run("7b", "dgx-h100", 6, 48, 10643, False),
    _mpt_run("1b", "dgx-h100", 14, 112, 45455, False),
    _mpt_run("760m", "dgx-h100", 24, 384, 63147, False),
    _mpt_run("30b", "dgx-a100", 3, 504, 916, True),
    _mpt_run("13b", "dgx-a100", 2, 48, 2262, False),
    _mpt_run("7b", "dgx-a100", 6, 96, 4641, False),
    _mpt_run("3b", "dgx-a100", 10, 160, 10811, False),
    _mpt_run("1b", "dgx-a100", 14, 448, 20513, False),
    _mpt_run("760m", "dgx-a100", 24, 384, 32434, False),
    _mpt_run("350m", "dgx-a100", 32, 512, 58782, False),
    _mpt_run("125m", "dgx-a100", 40, 640, 142830, False),
    _mpt_run("125m", "dgx-a100", 32, 512, 141737, False, "-mb32"),
    _mpt_run("70b", "dgx-a100", 8, 2048, 410, True, "-64", 64, grad_bytes=2),
    _mpt_run("70b", "dgx-a100", 2, 1024, 373, True, "-32", 32, grad_bytes=2),
)

# IBM and Meta's PyTorch FSDP table (FMS): the README at fms-fsdp @4ffb9bdf, the last before
# its figures were updated with torch.compile (ed74fd5d), and the blog of the same week,
# which says the runs used SDPA's FlashAttention-2, FSDP's compute/communication overlap
# and activation checkpointing, and not torch.compile ("We have leveraged 1, 3, and a
# variation of 4"; the code's use_torch_compile defaults to False): PyTorch eager
# (--framework eager) on IBM's own Llama block (foundation-model-stack's LLaMABlock:
# RMSNorm in fp32, RoPE and SwiGLU op by op, no dropout, untied embeddings, vocab 32,000).
# FSDP1 FULL_SHARD (--zero 3) with MixedPrecision bfSixteen: weights gathered and gradients
# reduced in bf16 (grad_bytes 2); 2 sequences of 4,096 a GPU, one micro-batch a step; full
# activation checkpointing (every block); AdamW in fp32. Entered: the 34B and 70B rows on
# 128 A100s (16 nodes, "400Gbps") and 96 H100s (12 nodes, "800Gbps"), each network read as
# a node's total (tests/fixtures/fms-*.yaml; read per GPU, the four land +1.7% to +7.7%).
# "34b" is fms-fsdp's own shape (d 8192, 48 layers, GQA 8, FFN 22,016: CodeLlama-34B's
# with Llama 2's vocabulary). Not entered: 7B (HYBRID_SHARD, sharded within the node and
# replicated across nodes, which collbench cannot state) and 13B ("selective AC": every
# n-th block, n not stated). Reported: tokens/s per GPU.
_FMS = {"framework": "eager", "attention": "flash2", "zero": 3, "micro_batch": 2,
        "recompute": "full", "grad_bytes": 2}  # fmt: skip
_FMS_MODEL = {"kv_heads": 8, "vocab": 32000, "gated_mlp": True, "tied_embeddings": False,
              "dropout": False}  # fmt: skip
FMS_34B = Model("fms-34b", 48, 8192, 64, ffn_hidden=22016, **_FMS_MODEL)
LLAMA2_70B = Model("llama2-70b", 80, 8192, 64, ffn_hidden=28672, **_FMS_MODEL)
FMS_RUNS = (
    PublishedRun("fms-34b-a100", FMS_34B, "fms-a100", 1, 1, 128, 256, "tokens", 700,
                 f"{FMS}, A100 128 GPUs", _FMS, seq=4096),
    PublishedRun("fms-70b-a100", LLAMA2_70B, "fms-a100", 1, 1, 128, 256, "tokens", 370,
                 f"{FMS}, A100 128 GPUs", _FMS, seq=4096),
    PublishedRun("fms-34b-h100", FMS_34B, "fms-h100", 1, 1, 96, 192, "tokens", 1550,
                 f"{FMS}, H100 96 GPUs", _FMS, seq=4096),
    PublishedRun("fms-70b-h100", LLAMA2_70B, "fms-h100", 1, 1, 96, 192, "tokens", 800,
                 f"{FMS}, H100 96 GPUs", _FMS, seq=4096),
)  # fmt: skip

# MLPerf Training's GPT-3 175B and Llama 3.1 405B pre-training benchmarks as NVIDIA ran them
# on Eos (DGX H100 nodes, 8 x 400 Gb/s NDR InfiniBand each: dgx-h100), every submission of
# the three rounds whose config reproduces the batch its log records, each as its
# config_*.sh (with config_common.sh and config_fp8.sh) sets it and the step its result
# logs time: the median wall-clock gap between consecutive steps (v3.1, v5.0: the
# tracked_stats lines' time_ms), or a block's duration over its steps where the log has no
# step lines (v4.0, LOG_METRICS=OFF; a block is the training between two evaluations).
# Megatron's TP-DP-PP order, sequence parallelism, the distributed optimizer with gradients
# reduced in bf16, userbuffer TP overlap as each config's tp_overlap yaml, overlapped
# pipeline sends, no recompute, no dropout, micro-batch 1; FP8 with Transformer Engine's
# delayed scaling (FP8_AMAX_HISTORY, FP8_AMAX_ALGO: --dtype fp8-delayed). Not priced: v4.0's
# per-layer CUDA graphs, NCCL's per-communicator CTA settings, overlapping the weight gather
# with the optimizer step (v5.0).
# GPT-3 175B (96 layers, hidden 12288, 96 heads, GELU MLP of 4h, learned positions, tied
# embeddings, seq 2048; vocabulary 50,257 in the MLCommons reference, padded to 50,688 by
# NeMo's make_vocab_size_divisible_by 128 x TP 4). v3.1 (NeMo 23.09): TP 4 PP 8 VP 12,
# gradient buckets of 100 MB, tp_overlap/h100tp4pp8mbs1.yaml. v4.0 (NeMo 24.04): TP 4 PP 6
# VP 8, fp8 weights gathered in fp8 (FP8_PARAMS), buckets of 200 MB, h100tp4mbs1.yaml.
_GPT3_MLPERF = replace(preset("gpt3-175b"), name="gpt3-175b-mlperf", vocab=50688)
_MLPERF = {"dtype": "fp8-delayed", "sequence_parallel": True, "zero": 1, "grad_bytes": 2,
           **MEGATRON}  # fmt: skip
_MLPERF_31 = {**_MLPERF, "virtual_stages": 12, "dp_bucket_mb": 100}
_MLPERF_40 = {**_MLPERF, "virtual_stages": 8, "dp_bucket_mb": 200, "gather_bytes": 1}
_PIPELINE = {"method": "pipeline", "num_splits": 4}
_UB_MLPERF_31 = {"tp_overlap": 1.0, "tp_overlap_pairs": pairs_from_config({
    **_bulk(4, 8, 2, 4), **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop")},
    "fc2_dgrad": {**_RING, "aggregate": 1}, "proj_fprop": {**_PIPELINE, "num_sm": 24},
    "fc2_fprop": {**_PIPELINE, "num_sm": 4}})}  # fmt: skip
_UB_MLPERF_40 = {"tp_overlap": 1.0, "tp_overlap_pairs": pairs_from_config({
    **_bulk(4, 4, 4, 4), **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop",
    "fc2_dgrad")}, "proj_fprop": {**_PIPELINE, "num_sm": 24},
    "fc2_fprop": {**_PIPELINE, "num_sm": 4}})}  # fmt: skip
# Llama 3.1 405B (v5.0, NeMo 25.01: the llama3-405b preset at seq 8192): TP 8 PP 8 VP 8 CP 2,
# the embedding and the loss each a layer of the split (ASYM_PP_EMBED, ASYM_PP_LOSS: the
# layout Et|(tt|)*62tL), fp8 weights gathered in fp8, tp_overlap/h100tp8mbs1.yaml (bulk
# pairs as h100tp4, every other pair by ring exchange). Its DDP bucket_size (200, in
# elements as Megatron-Core reads it) makes every parameter its own bucket: not stated
# (collbench's default buckets).
_MLPERF_50 = {**_MLPERF, "virtual_stages": 8, "cp": 2, "gather_bytes": 1,
              "pp_layout": pipeline_layout("Et|(tt|)*62tL")}  # fmt: skip
_UB_MLPERF_50 = {"tp_overlap": 1.0, "tp_overlap_pairs": pairs_from_config({
    **_bulk(4, 8, 2, 4), **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop",
    "fc2_dgrad", "proj_fprop", "fc2_fprop")}})}  # fmt: skip


def _mlperf(run: str, gpus: int, batch: int, step: float) -> PublishedRun:
    """One Eos submission: its system (eos-dfw_n<nodes>...) and the logged step (s)."""
    gpt3 = run.startswith("gpt3")
    v31 = run.endswith("v31")
    tp, pp = (4, 8 if v31 else 6) if gpt3 else (8, 8)
    source = (MLPERF_31 if v31 else MLPERF_40) if gpt3 else MLPERF_50
    setup = (_MLPERF_31 if v31 else _MLPERF_40) if gpt3 else _MLPERF_50
    options = (_UB_MLPERF_31 if v31 else _UB_MLPERF_40) if gpt3 else _UB_MLPERF_50
    model, seq = (_GPT3_MLPERF, 2048) if gpt3 else ("llama3-405b", 8192)
    dp = gpus // (tp * pp * setup.get("cp", 1))
    return PublishedRun(f"mlperf-{run}", model, "dgx-h100", tp, pp, dp, batch, "step", step,
                        f"{source}, NVIDIA eos {gpus // 8} nodes", setup, seq, options)  # fmt: skip


MLPERF_RUNS = (
    _mlperf("gpt3-11616-v40", 11616, 2904, 0.9214),
    _mlperf("gpt3-10752-v40", 10752, 2688, 0.9207),
    _mlperf("gpt3-10752-v31", 10752, 2688, 0.953),
    _mlperf("gpt3-10240-v31", 10240, 2560, 0.948),
    _mlperf("gpt3-8192-v31", 8192, 4096, 1.643),
    _mlperf("gpt3-6144-v31", 6144, 3072, 1.637),
    _mlperf("gpt3-4096-v31", 4096, 2048, 1.629),
    _mlperf("gpt3-768-v31", 768, 3072, 11.09),
    _mlperf("llama405b-8192-v50", 8192, 1536, 5.175),
    _mlperf("llama405b-2560-v50", 2560, 1120, 11.17),
    _mlperf("llama405b-2432-v50", 2432, 1216, 12.71),
    _mlperf("llama405b-2048-v50", 2048, 1152, 14.22),
    _mlperf("llama405b-512-v50", 512, 1152, 55.14),
)

# MLPerf v5.1's Llama 3.1 8B (the llama3-8b preset at seq 8192, vocabulary 128,256 as logged),
# every FP8 submission on a fabric the catalog holds whose network its system file states or
# that needs none: one micro-batch a step (GA 1), the distributed optimizer with gradients
# reduced in bf16 and fp8 weights gathered in fp8, no recompute, no pipeline. NVIDIA's v5.1
# code (NVIDIA, University of Florida, HPE): per-tensor current scaling, full-iteration CUDA
# graphs (not priced), TP overlap off at TP 1; Cisco's, derived from v5.0's: delayed
# scaling, no CUDA graphs, its own TP overlap settings at TP 2 (pretrain.py), NeMo's 128 MiB
# buckets. Steps: the median wall-clock gap between logged steps over the 10 runs.
_MLPERF_8B = {"dtype": "fp8", "zero": 1, "grad_bytes": 2, "gather_bytes": 1, **MEGATRON}
_UB_MLPERF_8B_GB200 = {"tp_overlap": 1.0, "tp_overlap_pairs": pairs_from_config({
    **_bulk(8, 12, 12, 4), **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop",
    "fc2_dgrad", "proj_fprop", "fc2_fprop")}})}  # fmt: skip
_UB_MLPERF_8B_CISCO = {"tp_overlap": 1.0, "tp_overlap_pairs": pairs_from_config({
    **_bulk(2, 24, 2, 2), **{name: _RING for name in ("qkv_fprop", "proj_dgrad", "fc1_fprop",
    "fc2_dgrad")}, "proj_fprop": {**_PIPELINE, "num_sm": 24},
    "fc2_fprop": {**_PIPELINE, "num_sm": 8}})}  # fmt: skip
MLPERF_8B_RUNS = (
    # University of Florida hpg.dgxb200x8.n1 (one DGX B200, 1000 W): micro-batch 2.
    PublishedRun("mlperf-llama8b-8-b200-v51", "llama3-8b", "dgx-b200", 1, 1, 8, 16, "step",
                 0.5447, f"{MLPERF_51}, University of Florida 1 node",
                 {**_MLPERF_8B, "micro_batch": 2, "dp_bucket_mb": 128}, seq=8192),
    # NVIDIA tyche_ngpu72 (one GB200 NVL72) and tyche_ngpu512 (8, 4 x 400 Gb/s NDR a tray):
    # buckets of 768,000,000 B; at 512, TP 2 with sequence parallelism and gb200tp2mbs1.yaml.
    PublishedRun("mlperf-llama8b-72-gb200-v51", "llama3-8b", "gb200-nvl72", 1, 1, 36, 36, "step",
                 0.1710, f"{MLPERF_51}, NVIDIA tyche 18 trays",
                 {**_MLPERF_8B, "cp": 2, "dp_bucket_mb": 732.4}, seq=8192),
    PublishedRun("mlperf-llama8b-512-gb200-v51", "llama3-8b", "gb200-nvl72", 2, 1, 64, 64, "step",
                 0.0889, f"{MLPERF_51}, NVIDIA tyche 128 trays",
                 {**_MLPERF_8B, "cp": 4, "sequence_parallel": True, "dp_bucket_mb": 732.4},
                 seq=8192, options=_UB_MLPERF_8B_GB200),
    # HPE Cray XD670 (8 x H200, 8 x 400 Gb/s NDR a node): its logs print the settings it ran
    # (its container's code is older than the repository's; the logged values are taken).
    PublishedRun("mlperf-llama8b-64-h200-v51", "llama3-8b", "hgx-h200", 1, 1, 32, 32, "step",
                 0.3530, f"{MLPERF_51}, HPE XD670 8 nodes",
                 {**_MLPERF_8B, "cp": 2, "dp_bucket_mb": 128}, seq=8192),
    # Cisco hpf_n8 and hpf_n16 (8 x H100, 8 x 400 Gb/s Ethernet a node).
    PublishedRun("mlperf-llama8b-64-h100-v51", "llama3-8b", "dgx-h100", 1, 1, 64, 64, "step",
                 0.7205, f"{MLPERF_51}, Cisco 8 nodes",
                 {**_MLPERF_8B, "dtype": "fp8-delayed", "dp_bucket_mb": 128}, seq=8192),
    PublishedRun("mlperf-llama8b-128-h100-v51", "llama3-8b", "dgx-h100", 2, 1, 64, 64, "step",
                 0.4850, f"{MLPERF_51}, Cisco 16 nodes",
                 {**_MLPERF_8B, "dtype": "fp8-delayed", "sequence_parallel": True,
                  "dp_bucket_mb": 128}, seq=8192,
                 options=_UB_MLPERF_8B_CISCO),
)  # fmt: skip

PUBLISHED: tuple[PublishedRun, ...] = (
    PublishedRun("1t-hfu", "gpt-1t", "dgx-a100", 8, 64, 6, 3072, "hfu", 0.52, NARAYANAN,
                 {**FULL, **_SC21}),
    PublishedRun("145b-hfu", "gpt-145b", "dgx-a100", 8, 8, 24, 1536, "hfu", 0.47, NARAYANAN,
                 {**FULL, **_SC21}),
    PublishedRun("530b-sp-selective-mfu", "gpt-530b", "dgx-a100", 8, 35, 8, 2240, "mfu", 0.542,
                 KORTHIKANTI, {**SELECTIVE_SP, **_A100}),
    PublishedRun("530b-full-mfu", "gpt-530b", "dgx-a100", 8, 35, 8, 2240, "mfu", 0.421,
                 KORTHIKANTI, {**FULL, **_A100}),
    PublishedRun("175b-full-step", "gpt3-175b", "dgx-a100", 8, 8, 1, 64, "step", 18.13,
                 KORTHIKANTI_T5, {**FULL, **_A100}),
    PublishedRun("175b-sp-selective-step", "gpt3-175b", "dgx-a100", 8, 8, 1, 64, "step", 13.75,
                 KORTHIKANTI_T5, {**SELECTIVE_SP, **_A100}),
    PublishedRun("530b-full-step", "gpt-530b", "dgx-a100", 8, 35, 1, 280, "step", 49.05,
                 KORTHIKANTI_T5, {**FULL, **_A100}),
    PublishedRun("530b-sp-selective-step", "gpt-530b", "dgx-a100", 8, 35, 1, 280, "step", 37.83,
                 KORTHIKANTI_T5, {**SELECTIVE_SP, **_A100}),
    PublishedRun("1t-full-step", "gpt-1t", "dgx-a100", 8, 64, 1, 512, "step", 94.42,
                 KORTHIKANTI_T5, {**FULL, **_A100}),
    PublishedRun("1t-sp-selective-step", "gpt-1t", "dgx-a100", 8, 64, 1, 512, "step", 71.49,
                 KORTHIKANTI_T5, {**SELECTIVE_SP, **_A100}),
    PublishedRun("22b-full-step", "gpt-22b", "dgx-a100", 8, 1, 1, 4, "step", 1.42,
                 KORTHIKANTI_T5, {**FULL, **_A100}),
    PublishedRun("22b-sp-selective-step", "gpt-22b", "dgx-a100", 8, 1, 1, 4, "step", 1.10,
                 KORTHIKANTI_T5, {**SELECTIVE_SP, **_A100}),
    PublishedRun("llama3-70b-fp8-gbs128", "llama3-70b", "dgx-h100", 4, 8, 2, 128, "tokens", 1602,
                 f"{BRIDGE}, 25.11 container, DGX-H100", {**_BRIDGE, "virtual_stages": 5},
                 seq=8192, options=_UB_70B),
    PublishedRun("llama3-70b-fp8-gbs256", "llama3-70b", "dgx-h100", 4, 8, 2, 256, "tokens", 1621,
                 f"{BRIDGE}, 26.02 container, DGX-H100", {**_BRIDGE, "virtual_stages": 5},
                 seq=8192, options=_UB_70B),
    PublishedRun("llama3-8b-fp8-fsdp", "llama3-8b", "dgx-h100", 1, 1, 8, 128, "tokens", 14451,
                 f"{BRIDGE}, 25.11 container, DGX-H100 (FSDP 8)",
                 {"dtype": "fp8", "zero": 3, **MEGATRON}, seq=8192),
    PublishedRun("gpt3-175b-bf16-dgxc", "gpt3-175b", "dgx-h100", 4, 8, 4, 256, "step", 8.91,
                 f"{DGXC}, nemo_megatron/README_175b.md, 128 GPUs",
                 _DGXC_175B, options=_UB_175B),
    PublishedRun("nemotron4-15b-bf16-dgxc", NEMOTRON4_15B, "dgx-h100", 4, 1, 4, 64, "step", 2.83,
                 f"{DGXC}, nemotron/README_15b.md, 16 GPUs",
                 _DGXC_15B, seq=4096, options={"tp_overlap": 1.0}),
    # The same two dgxc recipes' FP8 rows (README_15b.md and README_175b.md, the same
    # launch with fp8: true; Transformer Engine's delayed scaling (fp8_amax_history_len
    # 1024: NeMo 24.x has no other fp8 recipe), fp8_params on 175B).
    PublishedRun("gpt3-175b-fp8-dgxc", "gpt3-175b", "dgx-h100", 4, 8, 4, 256, "step", 5.92,
                 f"{DGXC}, nemo_megatron/README_175b.md, 128 GPUs (FP8)",
                 {**_DGXC_175B, "dtype": "fp8-delayed"}, options=_UB_175B),
    PublishedRun("nemotron4-15b-fp8-dgxc", NEMOTRON4_15B, "dgx-h100", 4, 1, 4, 64, "step", 2.08,
                 f"{DGXC}, nemotron/README_15b.md, 16 GPUs (FP8)",
                 {**_DGXC_15B, "dtype": "fp8-delayed"}, seq=4096, options={"tp_overlap": 1.0}),
    # Nemotron-4 340B (nemotron/README_340b.md and nemotron4-340b-synth.yaml @35a9aec):
    # TP 8 PP 8 VP 12, micro-batch 1, 128 GPUs at GBS 32, selective recompute, sequence
    # parallelism, no userbuffer overlap (ub_tp_comm_overlap: False), distributed
    # optimizer reducing in bf16 in 50 MB buckets, no dropout.
    PublishedRun("nemotron4-340b-bf16-dgxc", NEMOTRON4_340B, "dgx-h100", 8, 8, 2, 32, "step",
                 4.61, f"{DGXC}, nemotron/README_340b.md, 128 GPUs", _DGXC_340B, seq=4096),
    PublishedRun("nemotron4-340b-fp8-dgxc", NEMOTRON4_340B, "dgx-h100", 8, 8, 2, 32, "step",
                 3.16, f"{DGXC}, nemotron/README_340b.md, 128 GPUs (FP8)",
                 {**_DGXC_340B, "dtype": "fp8-delayed"}, seq=4096),
    # Context parallelism: Megatron-Bridge's 26.02 row, DGX-H100 (recipe llama31_405b_
    # pretrain_1024gpu_h100_fp8cs_config: CP 2, VP 8, sequence parallelism, userbuffer TP
    # overlap; 126 layers + embedding + loss = 128 over pp 8 x v 8: account_for_embedding/
    # loss_in_pipeline_split, the layout Et|(tt|)*62tL).
    PublishedRun("llama31-405b-fp8-cp2", "llama3-405b", "dgx-h100", 8, 8, 8, 1536, "tokens", 311,
                 f"{BRIDGE}, 26.02 container, DGX-H100 (CP 2)",
                 {**_BRIDGE, "virtual_stages": 8, "cp": 2,
                  "pp_layout": pipeline_layout("Et|(tt|)*62tL")}, seq=8192,
                 options={"tp_overlap": 1.0, "tp_overlap_pairs": UB_LLAMA31_405B_FP8_H100_CP2}),
    # Blackwell: Megatron-Bridge's Llama 3.1 405B FP8-CS rows, each recipe as tagged with its
    # container (scripts/performance/configs/llama*/, llama31_llm_pretrain.py; recipes/llama/
    # llama3.py): as on H100 (sequence parallelism, ZeRO 1, the layout Et|(tt|)*62tL, TP
    # userbuffers), with userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192, gradients
    # reduced in bf16 (set_llama31_common_configs: grad_reduce_in_fp32 False) and parameters
    # gathered in fp8 (fp8_param_gather), every layer fp8 (first_last_layers_bf16 False),
    # no recompute, no CUDA graphs, no FSDP, no offloading.
    # DGX-GB200, 26.02 (v0.3.0, LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2): 256 GPUs,
    # TP 4 PP 16 VP 4, CP 1, GBS 1536. The same recipe is published at 793-864 tokens/s
    # (26.02 to 26.06): the container's software moves the figure by 9%.
    PublishedRun("llama31-405b-fp8-gb200", "llama3-405b", "gb200-nvl72", 4, 16, 4, 1536, "tokens",
                 793, f"{BRIDGE}, 26.02 container, DGX-GB200", {**_BRIDGE_B200, "virtual_stages": 4},
                 seq=8192, options=_UB_405B_B200),
    # DGX-B200, 25.11 (v0.2.0, LLAMA31_405B_B200_FP8_CS_BASE_CONFIG): 128 GPUs, TP 4 PP 8
    # VP 8 CP 2, GBS 64.
    PublishedRun("llama31-405b-fp8-b200-cp2", "llama3-405b", "dgx-b200", 4, 8, 2, 64, "tokens",
                 661, f"{BRIDGE}, 25.11 container, DGX-B200 (CP 2)",
                 {**_BRIDGE_B200, "virtual_stages": 8, "cp": 2}, seq=8192, options=_UB_405B_B200),
    *MPT_RUNS,
    *FMS_RUNS,
    *MLPERF_RUNS,
    *MLPERF_8B_RUNS,
)  # fmt: skip


# Whole-training figures: GPU-hours over a training run's tokens. They hold what a step
# model does not (the batch-size ramp, checkpoints, restarts, evaluation, the MTP module),
# so they are shown beside the validation set (docs/mfu/moe-cp.md) with their error, not held to its
# goal. test_mfu_moe.py pins how the figure is derived.
WHOLE_TRAINING: tuple[PublishedRun, ...] = (
    # Mixture of experts: DeepSeek-V3 (arXiv 2412.19437) as trained, derived in docs/mfu/moe-cp.md:
    # 180K H800 GPU-hours per trillion tokens (section 1) = 1e12 / (180e3 x 3600) = 1543
    # tokens/s per GPU; 2048 H800 (3.1), PP 16, EP 64 over 8 nodes, ZeRO-1 DP, TP 1 (3.2),
    # DualPipe (3.2.1), node-limited routing to 4 nodes (2.1.2), FP8 GEMMs and FP8
    # dispatch (3.3), seq 4096 and batch 15360 (4.2). Micro-batch 1 is ASSUMED (not stated).
    # DeepEP's kernels hold 20 of the 132 SMs (section 3.2.2): --ep-sms 20.
    PublishedRun("deepseek-v3-h800", "deepseek-v3", H800, 1, 16, 128, 15360, "tokens", 1543,
                 DEEPSEEK_V3, {**MEGATRON, "dtype": "fp8", "zero": 1, "ep": 64, "ep_overlap": "dualpipe",
                               "ep_route_nodes": 4, "dispatch_bytes": 1, "ep_sms": 20}, seq=4096),
)  # fmt: skip

# Per-step MoE figures, entered as their recipes configure them, shown beside the
# validation set (docs/mfu/moe-cp.md) with their error: they land far outside its goal and what the
# step model misses there is not established (docs/mfu/moe-cp.md, "MoE validation").
# Megatron-Bridge performance summary, 25.09 container, DGX-H100 (docs/performance-
# summary.md @fa0315ae2, Oct 2025): DeepSeekV3 (dropless), 1024 GPUs, GBS 8192, MBS 1,
# seq 4096, TP 2 PP 8 VP 4 EP 64, 1297 tokens/s per GPU (FP8). The recipe at that commit
# (scripts/performance/run_script.py, configs/deepseek/deepseek_v3_llm_pretrain.yaml,
# src/megatron/bridge/recipes/deepseek/deepseek_v3.py): expert TP 1, sequence parallel,
# distributed optimizer, DeepEP (flex dispatcher, Megatron-Core's 20 SMs: TransformerConfig
# moe_deepep_num_sms), forced load balancing, overlap_moe_expert_parallel_comm (--ep-overlap
# 1f1b), overlap_grad_reduce off on H100 (dp_overlap False), MTP 1 in the layout
# "Et|(tt|)*30mL" (61 + 3 = 64 over pp 8 x v 4), group-limited routing of 8 groups, top 4
# (DeepSeekV3ModelProvider): a group is 32 experts = one node's 8 EP ranks, so a token
# reaches at most 4 nodes (--ep-route-nodes 4). run_script.py recomputes mla_up_proj and
# the dense layers' mlp (recompute_modules on H100), which collbench cannot state
# (--recompute none; the up-projections are ~3% of the compute, the dense layers are not on
# the busiest stage). Priced with --ep-overlap none the run lands -7.1% (docs/mfu/moe-cp.md).
DEEPSEEK_V3_MTP = replace(preset("deepseek-v3"), mtp_layers=1)
# Qwen3 MoE on DGX-H100, FP8 (Megatron-Bridge performance summary; the recipes at v0.3.1,
# the 26.02.01 container's r0.3.1, unchanged for these two through v0.5.1:
# scripts/performance/configs/qwen/qwen3_workload_base_configs.py, qwen3_llm_pretrain.py,
# utils/overrides.py): expert TP 1, distributed optimizer, forced load balancing (dropless),
# no TP comm overlap, no recompute, no CUDA graphs, FP8 current scaling with fp8 parameters
# gathered in fp8 and gradients reduced in bf16, DDP buckets of 128 MiB.
# 235B-A22B, 26.02.01: 256 GPUs, GBS 8192, MBS 1, seq 4096, TP 2 (SP) PP 8 VP 4 EP 32, 1611
# tokens/s per GPU; the alltoall dispatcher (NCCL; the SMs its all-to-alls hold are not
# priced) with overlap_moe_expert_parallel_comm (--ep-overlap 1f1b); the embedding and the
# loss each counted as a layer in the pipeline split (3 a chunk: Ett|(ttt|)*30ttL).
# 30B-A3B, 26.04.01 (TP 1 PP 1 EP 16, 8960 tokens/s per GPU): the 26.02.01 row's PP 2 VP 12
# EP 8 columns are the older 26.02 preset's (its recipe at v0.3.1 is this one); HybridEP on
# 32 SMs (--ep-sms 32), no EP overlap.
_QWEN3_RECIPE = {**_BRIDGE, "etp": 1, "grad_bytes": 2, "gather_bytes": 1, "dp_bucket_mb": 128}
_QWEN3_235B = {**_QWEN3_RECIPE, "virtual_stages": 4, "ep": 32, "ep_overlap": "1f1b",
               "pp_layout": pipeline_layout("Ett|(ttt|)*30ttL")}  # fmt: skip
_QWEN3_30B = {**_QWEN3_RECIPE, "sequence_parallel": False, "ep": 16, "ep_sms": 32}
MOE_STEP: tuple[PublishedRun, ...] = (
    PublishedRun("deepseek-v3-fp8-h100", DEEPSEEK_V3_MTP, "dgx-h100", 2, 8, 64, 8192, "tokens",
                 1297, f"{BRIDGE}, 25.09 container, DGX-H100",
                 {**_BRIDGE, "virtual_stages": 4, "ep": 64, "etp": 1, "ep_overlap": "1f1b",
                  "ep_sms": 20, "ep_route_nodes": 4, "dp_overlap": False,
                  "pp_layout": pipeline_layout("Et|(tt|)*30mL")}, seq=4096),
    PublishedRun("qwen3-235b-a22b-fp8-h100", "qwen3-235b-a22b", "dgx-h100", 2, 8, 16, 8192,
                 "tokens", 1611, f"{BRIDGE}, 26.02.01 container, DGX-H100", _QWEN3_235B, seq=4096),
    PublishedRun("qwen3-30b-a3b-fp8-h100", "qwen3-30b-a3b", "dgx-h100", 1, 1, 16, 1024, "tokens",
                 8960, f"{BRIDGE}, 26.04.01 container, DGX-H100", _QWEN3_30B, seq=4096),
)  # fmt: skip
