"""Training workloads for the MFU estimator: a transformer's shape, its training setup and
its parallelism, as frozen dataclasses validated field by field, plus model presets.

FLOP counts follow PaLM (Chowdhery et al. 2022, appendix B): model FLOPs per token =
6·N + 12·L·H·Q·T (N parameters, L layers, H heads, Q head dim, T sequence length). The
hardware FLOPs add what recomputation does again: full recompute repeats the forward
(8·N + 16·L·H·Q·T); selective recompute (Korthikanti et al. 2022) repeats only the
attention core, the 4·L·H·Q·T of its forward (6·N + 16·L·H·Q·T).

Pure: no I/O, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collbench.core.errors import SpecError

RECOMPUTE = ("none", "selective", "full")
COMPUTE_DTYPES = ("bf16", "fp8")
# The attention core's kernel: FlashAttention / cuDNN fused attention, or Megatron's
# unfused batched GEMMs around a fused softmax (before 2022).
ATTENTION_KERNELS = ("flash", "unfused")
# Bounds past anything trained (the largest dense models have ~2e12 parameters and
# contexts of ~1e7 tokens): beyond them the figures are nonsense, not an estimate.
MAX_PARAMS = 1e15
MAX_SEQ = 2**27
MAX_GLOBAL_BATCH = 2**27
# --params may refine the shape's own count (biases, padding) by this share, not replace it:
# the attention FLOPs and the traffic come from the shape.
PARAMS_MARGIN = 0.25


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
    gated_mlp: bool = False  # SwiGLU: three ffn matrices instead of two
    tied_embeddings: bool = True  # GPT ties input and output embeddings; Llama 3 does not
    params: float = 0.0  # 0: computed from the shape
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab"):
            _positive(f"model.{name}", getattr(self, name))
        if not 0 <= self.params < float("inf"):
            raise SpecError("--params", self.params, "must be a finite number >= 0")
        for name in ("ffn_hidden", "kv_heads"):
            if getattr(self, name) < 0:
                raise SpecError(f"--{name.replace('_', '-')}", getattr(self, name), "must be >= 0")
        if self.hidden % self.heads:
            raise SpecError("--heads", self.heads, f"must divide --hidden ({self.hidden})")
        if self.heads % self.kv_heads_or_heads:
            raise SpecError("--kv-heads", self.kv_heads, f"must divide --heads ({self.heads})")
        self._check_magnitude()

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
        return self.hidden // self.heads

    @property
    def kv_heads_or_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def layer_params(self) -> float:
        """Weights of one layer: attention (q, k, v, o) and the MLP; norms and biases."""
        kv_dim = self.kv_heads_or_heads * self.head_dim
        attention = self.hidden * (2 * self.hidden + 2 * kv_dim)
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.ffn
        return attention + mlp + 4 * self.hidden

    @property
    def embedding_params(self) -> float:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def shape_params(self) -> float:
        """The parameter count the shape implies (whatever --params says)."""
        return self.layers * self.layer_params + self.embedding_params

    @property
    def n_params(self) -> float:
        if self.params:
            return self.params
        return self.shape_params


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
    # DP collectives issued in buckets of this many MiB (PyTorch DDP's bucket_cap_mb
    # default); 0: one collective over all of it, which cannot overlap anything.
    dp_bucket_mb: float = 25.0

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "virtual_stages"):
            _positive(f"--{name.replace('_', '-')}", getattr(self, name))
        if self.zero not in (0, 1, 2, 3):
            raise SpecError("--zero", self.zero, "must be 0, 1, 2 or 3")
        if not 0 <= self.dp_bucket_mb < float("inf"):
            raise SpecError("--dp-bucket-mb", self.dp_bucket_mb, "must be >= 0")
        if self.sequence_parallel and self.tp == 1:
            raise SpecError("--sequence-parallel", True, "needs --tp > 1")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class Training:
    """One optimizer step: sequences, micro-batches, recompute and the compute dtype."""

    seq: int
    global_batch: int  # sequences per step
    micro_batch: int = 1
    recompute: str = "none"
    dtype: str = "bf16"
    attention: str = "flash"
    grad_bytes: int = 4  # gradients reduced in fp32 (Megatron's default for bf16; FSDP's too)
    param_bytes: int = 2  # parameters gathered in bf16 (ZeRO / FSDP)
    activation_bytes: int = 2

    def __post_init__(self) -> None:
        for name in (
            "seq",
            "micro_batch",
            "global_batch",
            "grad_bytes",
            "param_bytes",
            "activation_bytes",
        ):
            _positive(f"--{name.replace('_', '-')}", getattr(self, name))
        if self.recompute not in RECOMPUTE:
            raise SpecError("--recompute", self.recompute, f"must be one of {', '.join(RECOMPUTE)}")
        if self.attention not in ATTENTION_KERNELS:
            raise SpecError(
                "--attention", self.attention, f"must be one of {', '.join(ATTENTION_KERNELS)}"
            )
        if self.dtype not in COMPUTE_DTYPES:
            raise SpecError("--dtype", self.dtype, f"must be one of {', '.join(COMPUTE_DTYPES)}")
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
        if self.model.layers < par.pp * par.virtual_stages:
            raise SpecError(
                "--pp",
                par.pp,
                f"x --virtual-stages {par.virtual_stages} is more "
                f"than the layers ({self.model.layers})",
            )
        self._check_interleaving()
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
        if layers % chunks:
            raise SpecError(
                "--virtual-stages",
                par.virtual_stages,
                f"x --pp {par.pp} = {chunks} model chunks do not divide the {layers} layers "
                f"({layers} = {layers // chunks} x {chunks} + {layers % chunks}); the "
                "interleaved schedule needs equal chunks",
            )

    @property
    def uneven_stages(self) -> str | None:
        """What an uneven pipeline split means for the estimate (None: the layers split
        evenly). Uneven stages are priced, not refused (Llama 3 405B trained 126 layers on
        16 stages): the busiest stage sets the pace (`layers_per_stage`)."""
        par, layers = self.parallelism, self.model.layers
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
        chunks = self.parallelism.pp * self.parallelism.virtual_stages
        return -(-self.model.layers // chunks) * self.parallelism.virtual_stages

    @property
    def tokens_per_step(self) -> int:
        return self.training.global_batch * self.training.seq

    @property
    def attention_flops_per_token(self) -> float:
        """PaLM's 12·L·H·Q·T: attention scores and their weighted sum, forward + backward."""
        model = self.model
        return 12 * model.layers * model.heads * model.head_dim * self.training.seq

    @property
    def model_flops_per_token(self) -> float:
        """6·N + 12·L·H·Q·T: the MFU numerator (no recompute)."""
        return 6 * self.model.n_params + self.attention_flops_per_token

    @property
    def hardware_flops_per_token(self) -> float:
        """Model FLOPs plus what recompute does again (the HFU numerator)."""
        recompute = self.training.recompute
        if recompute == "full":
            return 8 * self.model.n_params + 4 / 3 * self.attention_flops_per_token
        if recompute == "selective":
            return self.model_flops_per_token + self.attention_flops_per_token / 3
        return self.model_flops_per_token


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(name, value, "must be an integer >= 1")


# Presets: shapes as published. vocab is the padded size the training code used where the
# paper gives it (Megatron pads GPT-2's 50257 to 51200).
PRESETS: dict[str, Model] = {
    model.name: model
    for model in (
        Model(
            "gpt3-175b",
            layers=96,
            hidden=12288,
            heads=96,
            vocab=51200,
            source="Brown et al. 2020 (GPT-3), Table 2.1; vocab padded to 51200 as in Megatron-LM",
        ),
        Model(
            "gpt-22b",
            layers=48,
            hidden=6144,
            heads=64,
            vocab=51200,
            source="Korthikanti et al. 2022 (arXiv 2205.05198), Table 3",
        ),
        Model(
            "gpt-145b",
            layers=80,
            hidden=12288,
            heads=96,
            vocab=51200,
            source="Narayanan et al. SC'21 (arXiv 2104.04473), Table 1",
        ),
        Model(
            "gpt-530b",
            layers=105,
            hidden=20480,
            heads=128,
            vocab=51200,
            source="Korthikanti et al. 2022, Table 3 (Megatron-Turing NLG 530B shape)",
        ),
        Model(
            "gpt-1t",
            layers=128,
            hidden=25600,
            heads=160,
            vocab=51200,
            source="Narayanan et al. SC'21, Table 1",
        ),
        Model(
            "llama3-8b",
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            ffn_hidden=14336,
            vocab=128256,
            gated_mlp=True,
            tied_embeddings=False,
            source="Llama 3 Herd of Models (arXiv 2407.21783), Table 3",
        ),
        Model(
            "llama3-70b",
            layers=80,
            hidden=8192,
            heads=64,
            kv_heads=8,
            ffn_hidden=28672,
            vocab=128256,
            gated_mlp=True,
            tied_embeddings=False,
            source="Llama 3 Herd of Models (arXiv 2407.21783), Table 3",
        ),
        Model(
            "llama3-405b",
            layers=126,
            hidden=16384,
            heads=128,
            kv_heads=8,
            ffn_hidden=53248,
            vocab=128256,
            gated_mlp=True,
            tied_embeddings=False,
            source="Llama 3 Herd of Models (arXiv 2407.21783), Table 3",
        ),
    )
}


def preset(name: str) -> Model:
    """A preset model by name; SpecError listing the presets otherwise."""
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise SpecError(
            "--model",
            name,
            f"is not a preset ({', '.join(PRESETS)}); or give --layers --hidden --heads --vocab",
        ) from None
