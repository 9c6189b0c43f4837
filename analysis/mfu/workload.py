"""Training workloads for the MFU estimator: a transformer's shape, its training setup and
its parallelism, as frozen dataclasses validated field by field (the model presets are in
analysis/mfu/presets.py).

The method, in full: docs/mfu/index.md#analysis-mfu-workload-py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from collbench.core.errors import SpecError

# selective: the attention core; op: torchtitan's per-op selective checkpointing
# (Model.op_recompute_shares); full: every layer's forward.
RECOMPUTE = ("none", "selective", "op", "full")
# How the expert-parallel all-to-alls sit beside compute (analysis/mfu/moe.py): exposed;
# beside the shared experts (Megatron's --moe-shared-expert-overlap); beside another
# micro-batch's compute, in DeepSeek-V3's DualPipe (its own bubble) or in Megatron-Core's
# 1F1B (overlap_moe_expert_parallel_comm: the interleaved schedule's bubble).
EP_OVERLAPS = ("none", "shared-expert", "dualpipe", "1f1b")
# How context parallelism exchanges K/V (analysis/mfu/moe.py): a ring of send/recv
# (Megatron's default, cp_comm_type p2p) or one all-gather.
CP_COMMS = ("p2p", "all_gather")
# fp8-delayed: fp8 with delayed scaling (Training turns it into dtype fp8, fp8_recipe delayed).
COMPUTE_DTYPES = ("bf16", "fp8", "fp8-delayed")
# How fp8 scales each GEMM input (Transformer Engine's recipes): current scaling (Float8-
# CurrentScaling, Megatron-Bridge's fp8 recipes) or delayed (DelayedScaling: NeMo before 2025,
# MLPerf through v5.0), which scales by earlier steps' amax (analysis/mfu/compute.py).
FP8_RECIPES = ("current", "delayed")
# The attention core's kernel: FlashAttention-3 / cuDNN fused attention (FA2 where the
# accelerator has no faster one), FlashAttention-2 on Hopper and Blackwell, or Megatron's
# unfused batched GEMMs around a fused softmax (before 2022).
ATTENTION_KERNELS = ("flash", "flash2", "flash1", "unfused")
# The kernels around the GEMMs (analysis/mfu/compute.py): Megatron's and Transformer Engine's
# fused ones; torch.compile's Inductor, which fuses the same chains; PyTorch eager, one kernel
# per operator (torchtitan, FSDP scripts without torch.compile).
FRAMEWORKS = ("megatron", "torch-compile", "eager")
# Bounds past anything trained (the largest dense models have ~2e12 parameters and
# contexts of ~1e7 tokens): beyond them the figures are nonsense, not an estimate.
MAX_PARAMS = 1e15
MAX_SEQ = 2**27
MAX_GLOBAL_BATCH = 2**27
# --params may refine the shape's own count (biases, padding) by this share, not replace it:
# the attention FLOPs and the traffic come from the shape.
PARAMS_MARGIN = 0.25
MAX_LAYOUT = 100_000  # letters a --pp LAYOUT unrolls to (far more than any model's layers)


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention's widths (DeepSeek-V3, arXiv 2412.19437, section 2.1.1
    and its appendix B table of hyper-parameters)."""

    q_rank: int  # d_c' : the queries' compression (0: queries projected directly)
    kv_rank: int  # d_c : the keys' and values' joint compression
    qk_nope: int  # per-head query/key dims without rotary embedding
    qk_rope: int  # per-head decoupled rotary dims (one shared key head)
    v_dim: int  # per-head value dims

    def params(self, hidden: int, heads: int) -> float:
        """Down- and up-projections, the output projection and the two latent norms."""
        q = (
            hidden * self.q_rank + self.q_rank * heads * (self.qk_nope + self.qk_rope)
            if self.q_rank
            else hidden * heads * (self.qk_nope + self.qk_rope)
        )
        kv = hidden * (self.kv_rank + self.qk_rope) + self.kv_rank * heads * (
            self.qk_nope + self.v_dim
        )
        return q + kv + heads * self.v_dim * hidden + self.q_rank + self.kv_rank

    def projections(self, hidden: int, heads: int) -> tuple[tuple[str, int, int], ...]:
        """(op, K, N) of each attention GEMM on a rank of `heads` heads: the down-
        projections replicated on every tensor-parallel rank, the others split by head."""
        qk = self.qk_nope + self.qk_rope
        queries = (
            (("q_down", hidden, self.q_rank), ("q_up", self.q_rank, heads * qk))
            if self.q_rank
            else (("q_proj", hidden, heads * qk),)
        )
        return (
            *queries,
            ("kv_down", hidden, self.kv_rank + self.qk_rope),
            ("kv_up", self.kv_rank, heads * (self.qk_nope + self.v_dim)),
            ("attn_proj", heads * self.v_dim, hidden),
        )


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer. `params` defaults to the count its shape implies."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    ffn_hidden: int = 0  # 0: 4 * hidden (GPT); Llama's SwiGLU sets its own
    kv_heads: int = 0  # 0: heads (multi-head attention); fewer: grouped-query attention
    kv_channels: int = 0  # each head's dims (0: hidden / heads); Qwen3 sets its own (128)
    gated_mlp: bool = False  # SwiGLU: three ffn matrices instead of two
    tied_embeddings: bool = True  # GPT ties input and output embeddings; Llama 3 does not
    # Dropout in training (Megatron's default 0.1; Llama 3 and Nemotron-4 train without):
    # its masks are stored activations (analysis/mfu/memory.py).
    dropout: bool = True
    params: float = 0.0  # 0: computed from the shape
    source: str = ""
    # Mixture of experts (0 experts: a dense model). Each MoE layer routes a token to
    # top_k of `experts` MLPs of moe_ffn_hidden (0: ffn_hidden) and through
    # `shared_experts` more; the first `dense_layers` layers keep a dense MLP.
    experts: int = 0
    top_k: int = 0
    moe_ffn_hidden: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    mla: MLA | None = None  # multi-head latent attention (None: multi-head / GQA)
    # Multi-token prediction modules (DeepSeek-V3 section 2.2: D = 1), each a layer with
    # its own projection and the shared output head, on the last pipeline stage.
    mtp_layers: int = 0

    def __post_init__(self) -> None:
        _positive(self, "layers", "hidden", "heads", "vocab", prefix="model.")
        self._check_moe()
        if not 0 <= self.params < float("inf"):
            raise SpecError("--params", self.params, "must be a finite number >= 0")
        _non_negative(self, "ffn_hidden", "kv_heads", "kv_channels", "mtp_layers")
        if self.hidden % self.heads and not self.kv_channels:
            raise SpecError("--heads", self.heads, f"must divide --hidden ({self.hidden})")
        if self.heads % self.kv_heads_or_heads:
            raise SpecError("--kv-heads", self.kv_heads, f"must divide --heads ({self.heads})")
        self._check_magnitude()

    def _check_moe(self) -> None:
        _non_negative(self, "experts", "top_k", "moe_ffn_hidden", "shared_experts", "dense_layers")
        if not self.experts:
            given = [n for n in ("top_k", "moe_ffn_hidden", "shared_experts") if getattr(self, n)]
            if given:
                name = given[0]
                raise SpecError(_flag(name), getattr(self, name), "needs --experts (a MoE model)")
            return
        if not 1 <= self.top_k <= self.experts:
            raise SpecError("--top-k", self.top_k, f"must be from 1 to --experts ({self.experts})")
        if self.dense_layers >= self.layers:
            raise SpecError(
                "--dense-layers",
                self.dense_layers,
                f"must be fewer than the layers ({self.layers})",
            )

    def _check_magnitude(self) -> None:
        shape = self.shape_params
        if shape > MAX_PARAMS:
            raise SpecError(
                "--hidden",
                self.hidden,
                f"with --layers {self.layers} and --vocab {self.vocab} gives {shape:.3g} "
                f"parameters; at most {MAX_PARAMS:.0e} are supported",
            )
        if not self.params:
            return
        if self.params > MAX_PARAMS:
            raise SpecError("--params", self.params, f"is more than {MAX_PARAMS:.0e}")
        if abs(self.params / shape - 1) > PARAMS_MARGIN:
            raise SpecError(
                "--params",
                self.params,
                f"differs from the shape's own count ({shape:.4g}) by more than "
                f"{PARAMS_MARGIN:.0%}; refused, as FLOPs and traffic would disagree: fix the "
                "shape or leave --params out",
            )

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads

    @property
    def kv_heads_or_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def qk_head_dim(self) -> int:
        """Per-head dims of queries and keys (MLA: nope + rope)."""
        return self.mla.qk_nope + self.mla.qk_rope if self.mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        return self.mla.v_dim if self.mla else self.head_dim

    @property
    def moe_ffn(self) -> int:
        return self.moe_ffn_hidden or self.ffn

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def expert_params(self) -> float:
        """One expert's MLP weights."""
        return (3 if self.gated_mlp else 2) * self.hidden * self.moe_ffn

    @property
    def attention_params(self) -> float:
        """One layer's attention weights (q, k, v, o; MLA's projections), norms included."""
        if self.mla:
            return self.mla.params(self.hidden, self.heads) + 4 * self.hidden
        q_dim, kv_dim = self.heads * self.head_dim, self.kv_heads_or_heads * self.head_dim
        return self.hidden * (2 * q_dim + 2 * kv_dim) + 4 * self.hidden

    @property
    def dense_layer_params(self) -> float:
        """Weights of a layer with a dense MLP."""
        return self.attention_params + (3 if self.gated_mlp else 2) * self.hidden * self.ffn

    def moe_layer_params(self, routed: int) -> float:
        """Weights of a MoE layer holding `routed` routed experts, its shared ones and the
        router (a token passes through top_k of the routed: its active weights)."""
        experts = (routed + self.shared_experts) * self.expert_params
        return self.attention_params + experts + self.hidden * self.experts

    @property
    def layer_params(self) -> float:
        """Weights of one layer (a MoE model: of a MoE layer, every expert held)."""
        return self.moe_layer_params(self.experts) if self.experts else self.dense_layer_params

    @property
    def embedding_params(self) -> float:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    def _params(self, routed: int) -> float:
        dense = self.layers - self.moe_layers
        moe = self.moe_layers * self.moe_layer_params(routed) if self.experts else 0
        return dense * self.dense_layer_params + moe + self.embedding_params

    @property
    def shape_params(self) -> float:
        """The parameter count the shape implies (whatever --params says)."""
        return self._params(self.experts)

    @property
    def active_params(self) -> float:
        """Parameters one token passes through: a MoE model's top_k routed experts (and
        its shared ones); every parameter of a dense model. Scaled as --params scales
        the shape's count."""
        if not self.experts:
            return self.n_params
        return self._params(self.top_k) * self.n_params / self.shape_params

    @property
    def n_params(self) -> float:
        return self.params or self.shape_params

    def matmuls(self, tp: int) -> tuple[tuple[str, int, int], ...]:
        """(op, K, N) of a layer's weight GEMMs on one of `tp` ranks, in the order its
        forward calls them (a MoE layer's MLP is its router and experts: analysis.mfu.moe)."""
        h, heads, kv_heads = self.hidden, self.heads // tp, max(1, self.kv_heads_or_heads // tp)
        ffn = math.ceil(self.ffn / tp)
        attention = (
            self.mla.projections(h, heads)
            if self.mla
            else (
                ("qkv", h, (heads + 2 * kv_heads) * self.head_dim),
                ("attn_proj", heads * self.head_dim, h),
            )
        )
        up = 2 * ffn if self.gated_mlp else ffn
        mlp = () if self.experts else (("mlp_up", h, up), ("mlp_down", ffn, h))
        return (*attention, *mlp)

    def op_recompute_shares(self, tp: int = 1) -> dict[str, float]:
        """--recompute op, torchtitan's per-op selective checkpointing
        (torchtitan/distributed/activation_checkpoint.py, _apply_op_sac): the outputs of
        the attention core and of every other aten.mm are kept, the others recomputed
        (wk, wo and w3 of a Llama block: its q, k, v and gate, up are separate matmuls,
        here fused). Per GEMM, the share of its forward run again (a MoE layer's experts
        are not priced: Workload refuses op for MoE models)."""
        kv = self.kv_heads_or_heads
        parts = {"qkv": (self.heads, kv, kv), "mlp_up": (1, 1) if self.gated_mlp else (1,)}
        shares, called = {}, 0
        for op, _k, _n in self.matmuls(tp):
            widths = parts.get(op, (1,))
            again = sum(width for i, width in enumerate(widths, called + 1) if i % 2 == 0)
            shares[op], called = again / sum(widths), called + len(widths)
        return shares


@dataclass(frozen=True)
class Parallelism:
    """How the ranks split the model (Megatron order: TP innermost, then DP, then PP)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0  # 0 plain DDP; 1/2 sharded optimizer (and grads); 3 = FSDP
    sequence_parallel: bool = False
    virtual_stages: int = 1  # interleaved 1F1B: model chunks per pipeline rank
    dp_overlap: bool = True  # gradient reduction overlaps the backward pass
    # Megatron's async TP backward (analysis/mfu/tp_overlap.async_backward): each column-
    # parallel layer's input-gradient reduction beside its weight gradient, its re-gather
    # beside its input gradient. False: every TP collective exposed (Megatron of 2021).
    tp_async_backward: bool = True
    # DP collectives issued in buckets of this many MiB (PyTorch DDP's bucket_cap_mb
    # default); 0: one collective over all of it, which cannot overlap anything.
    dp_bucket_mb: float = 25.0
    cp: int = 1  # context parallel: each rank holds seq / cp of every sequence
    ep: int = 1  # expert parallel: the experts split over ep ranks of the dp x cp ones
    ep_overlap: str = "none"  # EP_OVERLAPS
    # Expert tensor parallelism (Megatron's expert_tensor_parallel_size; 0: = tp). The
    # expert layers fold etp x ep x expert-dp over the tp x cp x dp ranks of a stage.
    etp: int = 0
    # SMs the dispatch/combine kernels hold while they run beside compute (DeepEP: 20,
    # DeepSeek-V3 section 3.2.2); 0: not priced (analysis/mfu/moe.py).
    ep_sms: int = 0
    # Node-limited routing (DeepSeek-V3 section 2.1.2: 4): a token crosses the scale-out to
    # at most this many nodes, once per node (DeepEP); 0: every routed copy is sent.
    ep_route_nodes: int = 0
    cp_comm: str = "p2p"  # CP_COMMS
    # --pp LAYOUT: each model chunk's layers, in Megatron-Core's letters (pipeline_layout);
    # chunk i on pipeline rank i % pp. (): ceil(layers / chunks) per chunk, the output layer last.
    pp_layout: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _positive(self, "tp", "pp", "dp", "virtual_stages", "cp", "ep")
        _one_of(self, "ep_overlap", EP_OVERLAPS)
        _non_negative(self, "ep_route_nodes")
        _one_of(self, "cp_comm", CP_COMMS)
        if isinstance(self.etp, bool) or self.etp < 0 or self.etp > self.tp:
            raise SpecError("--etp", self.etp, f"must be from 1 to --tp ({self.tp}), or 0 (= tp)")
        _non_negative(self, "ep_sms")
        # Megatron-Core folds etp x ep into a stage's tp x cp x dp ranks (etp = tp: EP
        # splits the dp x cp ranks of the expert layers).
        if (self.tp * self.dp * self.cp) % (self.ep * self.expert_tp):
            raise SpecError(
                "--ep",
                self.ep,
                f"x expert TP {self.expert_tp} must divide --tp x --dp x --cp "
                f"({self.tp} x {self.dp} x {self.cp}): expert parallelism splits the "
                "ranks of the expert layers",
            )
        if self.zero not in (0, 1, 2, 3):
            raise SpecError("--zero", self.zero, "must be 0, 1, 2 or 3")
        if not 0 <= self.dp_bucket_mb < float("inf"):
            raise SpecError("--dp-bucket-mb", self.dp_bucket_mb, "must be >= 0")
        if self.sequence_parallel and self.tp == 1:
            raise SpecError("--sequence-parallel", True, "needs --tp > 1")

    @property
    def p2p_overlapped(self) -> bool:
        """Pipeline sends beside a model chunk's compute: Megatron's interleaved schedule
        (overlap_p2p_comm, on with virtual stages in Megatron-LM, NeMo and Megatron-Bridge);
        1F1B batches them and waits."""
        return self.virtual_stages > 1

    @property
    def world_size(self) -> int:
        """Megatron's order: TP innermost, then CP, then DP, then PP."""
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_tp(self) -> int:
        """The expert layers' tensor parallelism (etp, or tp when not given)."""
        return self.etp or self.tp

    @property
    def dp_ranks(self) -> int:
        """The gradient reduction's group: the weights are replicated over dp x cp."""
        return self.dp * self.cp


@dataclass(frozen=True)
class Training:
    """One optimizer step: sequences, micro-batches, recompute and the compute dtype."""

    seq: int
    global_batch: int  # sequences per step
    micro_batch: int = 1
    recompute: str = "none"
    # Layers of each model chunk fully recomputed (Megatron's recompute_num_layers with
    # recompute_method block); the others as `recompute` says. 0: none.
    recompute_layers: int = 0
    dtype: str = "bf16"
    fp8_recipe: str = "current"  # FP8_RECIPES
    attention: str = "flash"
    framework: str = "megatron"  # FRAMEWORKS
    # MoE: each expert computes and exchanges this multiple of its balanced share of the
    # tokens (padded to capacity); 0: dropless, balanced (NVIDIA's benchmarks force it).
    capacity_factor: float = 0.0
    dispatch_bytes: int = 0  # bytes per element the all-to-all dispatch moves (0: activation)
    grad_bytes: int = 4  # gradients reduced in fp32 (Megatron's default for bf16; FSDP's too)
    param_bytes: int = 2  # parameters held in bf16 (their memory; gathered so by ZeRO / FSDP)
    gather_bytes: int = 0  # bytes per parameter ZeRO / FSDP all-gathers (0: param_bytes)
    activation_bytes: int = 2

    @property
    def dtype_name(self) -> str:
        """The dtype as --dtype names it (fp8-delayed: fp8 with delayed scaling)."""
        return "fp8-delayed" if self.dtype == "fp8" and self.fp8_recipe == "delayed" else self.dtype

    def __post_init__(self) -> None:
        _positive(self, "seq", "micro_batch", "global_batch")
        _positive(self, "grad_bytes", "param_bytes", "activation_bytes")
        if not (self.capacity_factor == 0 or 1 <= self.capacity_factor < float("inf")):
            raise SpecError(
                "--capacity-factor", self.capacity_factor, "must be >= 1 (or 0: dropless)"
            )
        if isinstance(self.dispatch_bytes, bool) or self.dispatch_bytes not in (0, 1, 2, 4):
            raise SpecError("--dispatch-bytes", self.dispatch_bytes, "must be 0, 1, 2 or 4")
        _one_of(self, "recompute", RECOMPUTE)
        _non_negative(self, "recompute_layers")
        if self.recompute_layers and self.recompute == "full":
            raise SpecError(
                "--recompute-layers",
                self.recompute_layers,
                "recomputes that many layers of each model chunk in full; with --recompute "
                "full every layer already is (give --recompute none, selective or op for the "
                "rest)",
            )
        _one_of(self, "attention", ATTENTION_KERNELS)
        _one_of(self, "framework", FRAMEWORKS)
        _one_of(self, "dtype", COMPUTE_DTYPES)
        _one_of(self, "fp8_recipe", FP8_RECIPES)
        if self.dtype == "fp8-delayed":
            object.__setattr__(self, "dtype", "fp8")
            object.__setattr__(self, "fp8_recipe", "delayed")
        if self.seq > MAX_SEQ:
            raise SpecError("--seq", self.seq, f"is more than {MAX_SEQ:,} tokens")
        if self.global_batch > MAX_GLOBAL_BATCH:
            raise SpecError(
                "--global-batch", self.global_batch, f"is more than {MAX_GLOBAL_BATCH:,} sequences"
            )


@dataclass(frozen=True)
class Workload:
    """A model trained with a setup and a parallelism: what `collbench mfu` prices."""

    model: Model
    training: Training
    parallelism: Parallelism = field(default_factory=Parallelism)
    # How dp was chosen when --dp was not given (the headline says it); "": given.
    dp_origin: str = ""

    def __post_init__(self) -> None:
        par, run = self.parallelism, self.training
        self._check_layout()
        if self.model.layers < par.pp * par.virtual_stages and not par.pp_layout:
            raise SpecError(
                "--pp",
                par.pp,
                f"x --virtual-stages {par.virtual_stages} is more "
                f"than the layers ({self.model.layers})",
            )
        self._check_interleaving()
        self._check_cp_ep()
        chunk_layers = self.layers_per_stage // par.virtual_stages
        if run.recompute_layers > chunk_layers:
            raise SpecError(
                "--recompute-layers",
                run.recompute_layers,
                f"is more than the {chunk_layers} layers of a model chunk "
                f"(--pp {par.pp} x --virtual-stages {par.virtual_stages})",
            )
        if self.model.heads % par.tp:
            raise SpecError("--tp", par.tp, f"must divide the heads ({self.model.heads})")
        if run.global_batch % (par.dp * run.micro_batch):
            dp = f"dp {par.dp} ({self.dp_origin})" if self.dp_origin else f"--dp {par.dp}"
            raise SpecError(
                "--global-batch",
                run.global_batch,
                f"must be a multiple of {dp} x --micro-batch {run.micro_batch}",
            )

    def _check_interleaving(self) -> None:
        """Megatron's interleaved 1F1B (--virtual-stages > 1) needs a pipeline to interleave
        and equal model chunks: the layers split evenly over pp x virtual stages."""
        par, layers = self.parallelism, self.model.layers
        if par.virtual_stages == 1:
            return
        if par.pp == 1:
            raise SpecError(
                "--virtual-stages",
                par.virtual_stages,
                "interleaves pipeline stages: it needs --pp > 1 (with --pp 1 there is no "
                "pipeline to interleave)",
            )
        chunks = par.pp * par.virtual_stages
        if par.pp_layout:  # its chunks as laid out
            return
        # Megatron's account_for_embedding/loss_in_pipeline_split count the embedding and
        # the loss as a layer each (Llama 3.1 405B: 126 + 2 = 128 over pp 8 x v 8), a
        # pipeline layout the MTP modules too (DeepSeek-V3 "Et|(tt|)*30mL": 61 + 3 = 64).
        padded = layers + 2 + self.model.mtp_layers
        if layers % chunks and padded % chunks:
            raise SpecError(
                "--virtual-stages",
                par.virtual_stages,
                f"x --pp {par.pp} = {chunks} model chunks do not divide the {layers} layers "
                f"({layers} = {layers // chunks} x {chunks} + {layers % chunks}); the "
                "interleaved schedule needs equal chunks",
            )

    def _check_layout(self) -> None:
        """Megatron-Core's rules (PipelineParallelLayerLayout): E first, L last, each once;
        every layer and MTP module laid out; v model chunks per pipeline rank."""
        par, model, text = self.parallelism, self.model, "|".join(self.parallelism.pp_layout)
        want = ("E", "L", 1, 1, model.layers, model.mtp_layers, par.pp * par.virtual_stages)
        if text and (text[0], text[-1], *map(text.count, "ELtm"), len(par.pp_layout)) != want:
            raise SpecError.from_message(
                f"--pp: the layout must hold E first, L last, {model.layers} t and "
                f"{model.mtp_layers} m in --virtual-stages {par.virtual_stages} model chunks per "
                f"pipeline rank (it holds {text.count('t')} t, {text.count('m')} m in "
                f"{len(par.pp_layout)})"
            )

    def _check_cp_ep(self) -> None:
        """Context parallelism splits each sequence into 2 x cp chunks (Megatron's load
        balancing of the causal mask) and needs a fused attention kernel; expert
        parallelism needs experts to split; Megatron-Core refuses MoE with TP but without
        sequence parallelism (TransformerConfig.__post_init__)."""
        par, run, model = self.parallelism, self.training, self.model
        if par.cp > 1 and run.seq % (2 * par.cp):
            raise SpecError("--cp", par.cp, f"x 2 chunks must divide --seq ({run.seq})")
        if par.cp > 1 and run.attention == "unfused":
            raise SpecError("--cp", par.cp, "needs --attention flash (a fused attention kernel)")
        if par.sequence_parallel and run.seq // par.cp % par.tp:  # Megatron: SP splits seq by tp
            raise SpecError("--seq", run.seq, f"/ cp {par.cp} must split over --tp {par.tp} (SP)")
        if model.experts and run.recompute == "op":
            raise SpecError(
                "--recompute",
                "op",
                "is not yet priced for MoE models (torchtitan recomputes "
                "the experts' grouped GEMMs and keeps the all-to-alls' outputs)",
            )
        if not model.experts:
            if par.ep > 1 or par.ep_overlap != "none" or run.capacity_factor:
                raise SpecError("--ep", par.ep, "and its options need --experts (a MoE model)")
            return
        if model.experts % par.ep:
            raise SpecError("--ep", par.ep, f"must divide --experts ({model.experts})")
        if par.tp > 1 and not par.sequence_parallel:
            raise SpecError(
                "--tp", par.tp, "with --experts needs --sequence-parallel (as Megatron-Core)"
            )
        if par.ep_overlap == "dualpipe" and par.pp > 1 and par.pp % 2:
            raise SpecError("--ep-overlap", "dualpipe", f"needs an even --pp (not {par.pp})")

    @property
    def micro_tokens(self) -> int:
        """Tokens of one micro-batch on one rank: its sequences' seq / cp."""
        return self.training.micro_batch * self.training.seq // self.parallelism.cp

    @property
    def uneven_stages(self) -> str | None:
        """What an uneven pipeline split means for the estimate (None: the layers split
        evenly). Uneven stages are priced, not refused (Llama 3 405B trained 126 layers on
        16 stages): the busiest stage sets the pace (`layers_per_stage`)."""
        par, layers = self.parallelism, self.model.layers
        if par.pp_layout:
            most, output = self.busiest_stage
            passes = f"{output} output-layer pass" + "es" * (output != 1)
            return (
                f"pipeline as laid out (--pp LAYOUT, {len(par.pp_layout)} model chunks): priced "
                f"at the pace of the busiest stage, {most} layers and {passes}"
            )
        if layers % par.pp == 0:
            return None
        low, extra = divmod(layers, par.pp)
        return (
            f"uneven pipeline (--pp {par.pp}): {layers} layers do not split evenly over "
            f"{par.pp} stages ({extra} of {low + 1} layers, {par.pp - extra} of {low}); priced "
            f"at the pace of the busiest stage ({low + 1} layers)"
        )

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per step (gradient accumulation steps)."""
        return self.training.global_batch // (self.parallelism.dp * self.training.micro_batch)

    @property
    def layers_per_stage(self) -> int:
        """Layers on the busiest pipeline stage: it sets the pipeline's pace when the
        layers do not split evenly (Llama 3 405B: 126 layers on 16 stages)."""
        return self.busiest_stage[0]

    @property
    def busiest_stage(self) -> tuple[int, int]:
        """(layers, output-layer passes) of the pipeline rank that sets the pace. With --pp
        LAYOUT: the rank whose layers and output-layer passes, weighed by their FLOPs in
        layers, are the most (an MTP module is a layer and a pass of the shared output head,
        DeepSeek-V3 section 2.2); else the last, ceil(layers / chunks) per chunk and L."""
        par, model = self.parallelism, self.model
        if not par.pp_layout:
            return -(-model.layers // (par.pp * par.virtual_stages)) * par.virtual_stages, 1
        layer = 6 * (model.active_params - model.embedding_params) + self.attention_flops_per_token
        weight = 6 * model.vocab * model.hidden * model.layers / layer
        ranks = ["".join(par.pp_layout[rank :: par.pp]) for rank in range(par.pp)]
        stages = [(sum(map(chunks.count, "tm")), sum(map(chunks.count, "Lm"))) for chunks in ranks]
        return max(stages, key=lambda stage: stage[0] + stage[1] * weight)

    @property
    def recomputed_layers(self) -> int:
        """Layers of the busiest stage whose whole forward runs again in the backward: all
        of them with full recompute, else `recompute_layers` of each of its v chunks."""
        if self.training.recompute == "full":
            return self.layers_per_stage
        return self.training.recompute_layers * self.parallelism.virtual_stages

    @property
    def recomputed_share(self) -> float:
        """The share of the model's layers fully recomputed (pp·v chunks of R layers)."""
        if self.training.recompute == "full":
            return 1.0
        par = self.parallelism
        chunks = par.pp * par.virtual_stages
        return min(1.0, self.training.recompute_layers * chunks / self.model.layers)

    @property
    def tokens_per_step(self) -> int:
        return self.training.global_batch * self.training.seq

    @property
    def attention_flops_per_token(self) -> float:
        """PaLM's 12·L·H·Q·T: attention scores and their weighted sum, forward + backward
        (MLA: 6·L·H·(Q_qk + Q_v)·T)."""
        model = self.model
        dims = model.qk_head_dim + model.v_head_dim
        return 6 * model.layers * model.heads * dims * self.training.seq

    @property
    def model_flops_per_token(self) -> float:
        """6·N + 12·L·H·Q·T: the MFU numerator (no recompute; N: the active parameters)."""
        return 6 * self.model.active_params + self.attention_flops_per_token

    @property
    def hardware_flops_per_token(self) -> float:
        """Model FLOPs plus what recompute does again (the HFU numerator)."""
        recompute, model = self.training.recompute, self.model
        if recompute == "full":
            return 8 * model.active_params + 4 / 3 * self.attention_flops_per_token
        attention = self.attention_flops_per_token
        share = self.recomputed_share
        # The recomputed layers' forward again: 2 FLOPs per active layer parameter and
        # their attention forward (a third of forward + backward); selective recompute
        # repeats the attention forward of the others.
        layer_params = self.model.active_params - self.model.embedding_params
        extra = share * (2 * layer_params + attention / 3)
        if recompute == "selective":
            extra += (1 - share) * attention / 3
        if recompute == "op":  # the others: 2 FLOPs per weight of the matmuls run again
            shares = model.op_recompute_shares()
            again = sum(shares[op] * k * n for op, k, n in model.matmuls(1))
            extra += (1 - share) * 2 * model.layers * again
        return self.model_flops_per_token + extra


def pipeline_layout(text: str) -> tuple[str, ...]:
    """Megatron-Core's pipeline_model_parallel_layout ("Et|(tt|)*30mL": E the embedding, t a
    layer, m an MTP module, L the output layer and loss, | between model chunks) as its
    chunks, unrolled as its parse_str_to_list does ((...)*n, then x*n; commas dropped), to
    at most MAX_LAYOUT letters."""
    left = [MAX_LAYOUT]

    def unroll(match: re.Match[str]) -> str:
        left[0] -= len(match.group(1)) * int(match.group(2))
        if left[0] < 0:
            raise SpecError("--pp", text, f"unrolls to more than {MAX_LAYOUT:,} letters")
        return match.group(1) * int(match.group(2))

    layout = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d{1,9})", r"(.)\*(\d{1,9})"):
        layout = re.sub(pattern, unroll, layout)
    if not layout or set(layout) - set("EtmL|"):
        raise SpecError("--pp", text, "is not N or a layout of E, t, m, L and | (Megatron-Core's)")
    return tuple(layout.split("|"))


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _positive(owner: object, *names: str, prefix: str = "--") -> None:
    """SpecError for the first of `owner`'s fields `names` that is not an integer >= 1."""
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(prefix + name.replace("_", "-"), value, "must be an integer >= 1")


def _non_negative(owner: object, *names: str) -> None:
    """SpecError for the first of `owner`'s integer fields `names` below 0 (or a bool)."""
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or value < 0:
            raise SpecError(_flag(name), value, "must be >= 0")


def _one_of(owner: object, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(owner, name)
    if value not in choices:
        raise SpecError(_flag(name), value, f"must be one of {', '.join(choices)}")
