"""Model presets for `collbench mfu --model`: published transformer shapes as `Model`s,
each citing its source, and the lookup by name.

Pure: no I/O, no torch.
"""

from __future__ import annotations

from collbench.analysis.mfu.workload import MLA, Model
from collbench.core.errors import SpecError

# What the Llama 3 models share (Llama 3 Herd of Models, arXiv 2407.21783, Table 3):
# grouped-query attention over 8 KV heads, SwiGLU, untied embeddings, no dropout.
_LLAMA3 = {
    "kv_heads": 8,
    "vocab": 128256,
    "gated_mlp": True,
    "tied_embeddings": False,
    "dropout": False,
    "source": "Llama 3 Herd of Models (arXiv 2407.21783), Table 3",
}
# Nemotron-4: squared-ReLU MLP of 4h (priced as the GELU's one read and write),
# grouped-query attention, untied embeddings, no dropout (NVIDIA dgxc-benchmarking
# nemotron4-15b-synth.yaml and nemotron4-340b-synth.yaml: dropouts 0.0).
_NEMOTRON4 = {"kv_heads": 8, "vocab": 256000, "tied_embeddings": False, "dropout": False}
# What the Mixtral models share: grouped-query attention over 8 KV heads, SwiGLU experts
# (2 of 8 routed per token), untied embeddings.
_MIXTRAL = {"kv_heads": 8, "gated_mlp": True, "tied_embeddings": False, "experts": 8, "top_k": 2}
_NEMO_15B = {**_NEMOTRON4, "source": "Nemotron-4 15B Technical Report (arXiv 2402.16819), Table 1"}
_NEMO_340B = {**_NEMOTRON4, "source": "Nemotron-4 340B Technical Report (arXiv 2406.11704), Table 1"}  # fmt: skip
_MIXTRAL_7B = {**_MIXTRAL, "vocab": 32000, "source": "Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088), Table 1"}  # fmt: skip
_MIXTRAL_22B = {**_MIXTRAL, "vocab": 32768, "source": "mistralai/Mixtral-8x22B-v0.1 config.json (Hugging Face)"}  # fmt: skip
# Qwen3 MoE (Megatron-Bridge Qwen3MoEModelProvider, Qwen/Qwen3-*-A*B config.json): every
# layer MoE, 128 experts top 8, no shared ones, heads of 128 dims (not hidden / heads), 4
# KV heads, SwiGLU, untied, no dropout; QK-norm (per-head RMSNorm) not priced.
_QWEN3 = {"kv_heads": 4, "kv_channels": 128, "vocab": 151936, "gated_mlp": True, "tied_embeddings": False, "dropout": False, "experts": 128, "top_k": 8, "source": "Qwen3 (Megatron-Bridge v0.3.1 models/qwen/qwen_provider.py, Qwen3MoEModelProvider)"}  # fmt: skip
_KORTHIKANTI_T3 = "Korthikanti et al. 2022 (arXiv 2205.05198), Table 3"
_NARAYANAN_T1 = "Narayanan et al. SC'21 (arXiv 2104.04473), Table 1"
_GPT = {"vocab": 51200}  # Megatron pads GPT-2's 50257 to 51200
# Presets: shapes as published; vocab the padded size the training code used where given.
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
        Model("gpt-22b", layers=48, hidden=6144, heads=64, source=_KORTHIKANTI_T3, **_GPT),
        Model("gpt-145b", layers=80, hidden=12288, heads=96, source=_NARAYANAN_T1, **_GPT),
        # Megatron-Turing NLG 530B's shape
        Model("gpt-530b", layers=105, hidden=20480, heads=128, source=_KORTHIKANTI_T3, **_GPT),
        Model("gpt-1t", layers=128, hidden=25600, heads=160, source=_NARAYANAN_T1, **_GPT),
        Model("llama3-8b", layers=32, hidden=4096, heads=32, ffn_hidden=14336, **_LLAMA3),
        Model("llama3-70b", layers=80, hidden=8192, heads=64, ffn_hidden=28672, **_LLAMA3),
        Model("llama3-405b", layers=126, hidden=16384, heads=128, ffn_hidden=53248, **_LLAMA3),
        Model("nemotron4-15b", layers=32, hidden=6144, heads=48, ffn_hidden=24576, **_NEMO_15B),
        Model("nemotron4-340b", layers=96, hidden=18432, heads=96, ffn_hidden=73728, **_NEMO_340B),
        Model("mixtral-8x7b", layers=32, hidden=4096, heads=32, ffn_hidden=14336, **_MIXTRAL_7B),
        Model("mixtral-8x22b", layers=56, hidden=6144, heads=48, ffn_hidden=16384, **_MIXTRAL_22B),
        Model("qwen3-30b-a3b", layers=48, hidden=2048, heads=32, moe_ffn_hidden=768, **_QWEN3),
        Model("qwen3-235b-a22b", layers=94, hidden=4096, heads=64, moe_ffn_hidden=1536, **_QWEN3),
        Model(
            "deepseek-v3",
            layers=61,
            hidden=7168,
            heads=128,
            ffn_hidden=18432,
            vocab=129280,
            gated_mlp=True,
            tied_embeddings=False,
            experts=256,
            top_k=8,
            moe_ffn_hidden=2048,
            shared_experts=1,
            dense_layers=3,
            mla=MLA(q_rank=1536, kv_rank=512, qk_nope=128, qk_rope=64, v_dim=128),
            source="DeepSeek-V3 Technical Report (arXiv 2412.19437), section 4.2 "
            "(hyper-parameters; 671B total, 37B active); dense ffn 18432 and vocab 129280 "
            "from deepseek-ai/DeepSeek-V3 config.json; the MTP module is not included",
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
