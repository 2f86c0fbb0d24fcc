"""DeepSeek V4 at a small size for training: transformers' DeepseekV4ForCausalLM plus the MTP layer in plain PyTorch.

The main model is transformers' own, so the trained function is the one the reference computes. What training
adds around it: an all-experts MoE forward (the same function as the eager per-expert loop, without host syncs),
the MTP layer (`mtp.0` in MODELS.md), the lightning indexer's KL loss against the main attention and the
auxiliary-loss-free router bias update.
"""

import copy
import types

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

PRESETS = {
    # The shipped model: layers with ratios 0, 0, 4, 128, 4, 128 (Flash's pattern), two hash layers, MTP ratio 0.
    "demo": dict(hidden_size=256, num_hidden_layers=6, compress_ratios=[0, 0, 4, 128, 4, 128, 0], num_hash_layers=2,
                 num_attention_heads=4, q_lora_rank=256, o_groups=2, o_lora_rank=128, n_routed_experts=8,
                 num_experts_per_tok=2, moe_intermediate_size=256, index_n_heads=4, index_topk=32,
                 sliding_window=128),
    # CPU smoke tests: every feature at the smallest FP8-block-friendly size.
    "tiny": dict(hidden_size=128, num_hidden_layers=3, compress_ratios=[0, 4, 128, 0], num_hash_layers=1,
                 num_attention_heads=2, q_lora_rank=128, o_groups=2, o_lora_rank=64, n_routed_experts=8,
                 num_experts_per_tok=2, moe_intermediate_size=128, index_n_heads=2, index_topk=8,
                 sliding_window=32),
}
NOT_HF_FIELDS = ("quantization_config", "architectures", "dtype", "expert_dtype")


def official_config(preset: str, vocab_size: int) -> dict:
    """config.json in the official hub layout, the fields `tensorfold synth` writes."""
    cfg = {
        "architectures": ["DeepseekV4ForCausalLM"], "bos_token_id": 0, "compress_rope_theta": 160000.0,
        "dtype": "bfloat16", "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-6, "hc_mult": 4,
        "hc_sinkhorn_iters": 20, "head_dim": 128, "index_head_dim": 128, "max_position_embeddings": 1048576,
        "model_type": "deepseek_v4", "n_shared_experts": 1, "norm_topk_prob": True, "num_key_value_heads": 1,
        "num_nextn_predict_layers": 1, "qk_rope_head_dim": 64,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
        "rms_norm_eps": 1e-6,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 16.0,
                         "original_max_position_embeddings": 65536, "type": "yarn"},
        "rope_theta": 10000.0, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "swiglu_limit": 10.0,
        "tie_word_embeddings": False, "topk_method": "noaux_tc", "vocab_size": vocab_size,
    }
    cfg.update(PRESETS[preset])
    assert len(cfg["compress_ratios"]) == cfg["num_hidden_layers"] + 1 and cfg["compress_ratios"][-1] == 0
    return dict(sorted(cfg.items()))


def hf_config(cfg: dict, num_layers: int | None = None) -> DeepseekV4Config:
    """transformers' config from the official one, as tools/reference/dsv4_load.py builds it."""
    kw = {k: copy.deepcopy(v) for k, v in cfg.items() if k not in NOT_HF_FIELDS}  # transformers edits nested dicts
    if num_layers is not None:
        kw["num_hidden_layers"] = num_layers
    return DeepseekV4Config(**kw)


def random_tid2eid(vocab: int, num_experts: int, top_k: int, gen: torch.Generator) -> torch.Tensor:
    """Distinct random experts per token id."""
    return torch.rand(vocab, num_experts, generator=gen).argsort(dim=1)[:, :top_k].contiguous()


def init_params(module: nn.Module, std: float) -> None:
    """transformers' initialisation for a block built outside a PreTrainedModel."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
        elif isinstance(m, v4.DeepseekV4RMSNorm):
            nn.init.ones_(m.weight)
        elif isinstance(m, v4.DeepseekV4HyperConnection):
            nn.init.normal_(m.fn, std=std)
            nn.init.zeros_(m.base)
            nn.init.ones_(m.scale)
        elif isinstance(m, v4.DeepseekV4HyperHead):
            nn.init.normal_(m.hc_fn, std=std)
            nn.init.zeros_(m.hc_base)
            nn.init.ones_(m.hc_scale)
        elif isinstance(m, v4.DeepseekV4Experts):
            nn.init.normal_(m.gate_up_proj, std=std)
            nn.init.normal_(m.down_proj, std=std)
        elif isinstance(m, (v4.DeepseekV4TopKRouter, v4.DeepseekV4HashRouter)):
            nn.init.normal_(m.weight, std=std)
            if isinstance(m, v4.DeepseekV4TopKRouter):
                nn.init.zeros_(m.e_score_correction_bias)
        elif isinstance(m, v4.DeepseekV4Attention):
            nn.init.zeros_(m.sinks)


class MTP(nn.Module):
    """`mtp.0`: e = enorm(embed(next ids)), h = hnorm(streams), x = e_proj(e) + h_proj(h) per stream, one V4 block."""

    def __init__(self, cfg: dict):
        super().__init__()
        num_layers = cfg["num_hidden_layers"]
        hc = hf_config(cfg, num_layers + 1)
        hc._attn_implementation, hc._experts_implementation = "eager", "eager"
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.block = v4.DeepseekV4DecoderLayer(hc, num_layers)
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.enorm = v4.DeepseekV4RMSNorm(d, eps=eps)
        self.hnorm = v4.DeepseekV4RMSNorm(d, eps=eps)
        self.norm = v4.DeepseekV4RMSNorm(d, eps=eps)
        self.hc_head = v4.DeepseekV4HyperHead(hc)
        init_params(self, hc.initializer_range)

    def forward(self, model: DeepseekV4ForCausalLM, streams: torch.Tensor, next_ids: torch.Tensor,
                layer_kwargs: dict) -> torch.Tensor:
        """streams [B, S, hc, D] from the main model's last layer; next_ids [B, S] the token after each position."""
        e = self.enorm(model.model.embed_tokens(next_ids))  # [B, S, D]
        x = self.e_proj(e).unsqueeze(2) + self.h_proj(self.hnorm(streams))  # [B, S, hc, D]
        x = self.block(x, input_ids=next_ids, **layer_kwargs)
        return model.lm_head(self.norm(self.hc_head(x)))  # [B, S, V]


def dense_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """Every expert on every token, weighted by the routed weights (zero outside the top-k): the eager loop's function."""
    w = (F.one_hot(top_k_index, self.num_experts).to(top_k_weights.dtype) * top_k_weights.unsqueeze(-1)).sum(1)
    gate_up = torch.einsum("td,efd->tef", hidden_states, self.gate_up_proj)  # [T, E, 2I]
    act = self._apply_gate(gate_up) * w.unsqueeze(-1).to(gate_up.dtype)  # [T, E, I]
    return torch.einsum("tei,edi->td", act, self.down_proj).to(hidden_states.dtype)


def use_dense_experts(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, v4.DeepseekV4Experts):
            m.forward = types.MethodType(dense_experts_forward, m)


def build(cfg: dict, seed: int) -> tuple:
    """The main model (f32 master weights) with random fixed tid2eid, and its MTP layer."""
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(hf_config(cfg)).float()
    gen = torch.Generator().manual_seed(seed + 1)
    for i in range(cfg["num_hash_layers"]):
        gate = model.model.layers[i].mlp.gate
        gate.tid2eid.copy_(random_tid2eid(cfg["vocab_size"], cfg["n_routed_experts"], cfg["num_experts_per_tok"], gen))
    mtp = MTP(cfg).float()
    return model, mtp


class Taps:
    """Forward hooks: the first layer's keyword arguments (mask, rope, positions), the last layer's streams,
    each CSA layer's attention probabilities, indexer scores and block mask, and each biased router's picks."""

    def __init__(self, model: DeepseekV4ForCausalLM, mtp: MTP, train: bool = True):
        self.layer_kwargs, self.streams = {}, None
        self.attn, self.scores, self.block_bias, self.picks, self.routers = {}, {}, {}, {}, {}
        layers = model.model.layers
        layers[0].register_forward_pre_hook(self._kwargs, with_kwargs=True)
        layers[-1].register_forward_hook(self._streams)
        if train:
            self._training_taps(layers, mtp)

    def _training_taps(self, layers, mtp: MTP) -> None:
        for i, layer in enumerate(layers):
            comp = layer.self_attn.compressor
            if isinstance(comp, v4.DeepseekV4CSACompressor):
                layer.self_attn.register_forward_hook(self._saver(self.attn, i, lambda o: o[1]))
                comp.register_forward_hook(self._saver(self.block_bias, i, lambda o: o[1]))
                comp.indexer.scorer.register_forward_hook(self._saver(self.scores, i, lambda o: o))
                detach_indexer_inputs(comp.indexer)
        for key, block in [*((i, l) for i, l in enumerate(layers)), ("mtp", mtp.block)]:
            if isinstance(block.mlp.gate, v4.DeepseekV4TopKRouter):
                block.mlp.gate.register_forward_hook(self._saver(self.picks, key, lambda o: o[2]))
        self.routers = {k: b.mlp.gate for k, b in [*enumerate(layers), ("mtp", mtp.block)]
                        if isinstance(b.mlp.gate, v4.DeepseekV4TopKRouter)}

    def _kwargs(self, module, args, kwargs):
        self.layer_kwargs = {k: kwargs[k] for k in ("position_embeddings", "position_ids", "attention_mask")}

    def _streams(self, module, args, output):
        self.streams = output

    @staticmethod
    def _saver(store: dict, key, pick):
        def hook(module, args, output):
            store[key] = pick(output)
        return hook

    def mtp_kwargs(self, length: int) -> dict:
        """The main model's mask, rope and positions cut to the first `length` positions."""
        kw = self.layer_kwargs
        rope = {k: (c[:, :length], s[:, :length]) for k, (c, s) in kw["position_embeddings"].items()}
        mask = kw["attention_mask"]
        mask = mask[..., :length, :length] if isinstance(mask, torch.Tensor) else mask
        return {"position_embeddings": rope, "position_ids": kw["position_ids"][:, :length], "attention_mask": mask}


def detach_indexer_inputs(indexer: nn.Module) -> None:
    """The indexer learns only from its KL loss (its top-k is not differentiable, so the main loss is unchanged)."""
    forward = indexer.forward

    def detached(hidden_states, q_residual, *args, **kwargs):
        return forward(hidden_states.detach(), q_residual.detach(), *args, **kwargs)

    indexer.forward = detached


def token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood in f32 (logsumexp minus the target's logit)."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def indexer_kl(taps: Taps) -> torch.Tensor:
    """KL(main attention over the selected compressed entries || softmax of the indexer's scores over them)."""
    losses = []
    for i, probs in taps.attn.items():
        bias = taps.block_bias[i][:, 0].float().clamp_min(-1e9)  # [B, S, T]: 0 where selected, -1e9 elsewhere
        num_entries = bias.shape[-1]
        target = probs[..., -num_entries:].detach().float().sum(1)  # [B, S, T], summed over heads
        total = target.sum(-1, keepdim=True)
        rows = total.squeeze(-1) > 0
        if not rows.any():
            continue
        target = target / total.clamp_min(1e-20)
        logp = torch.log_softmax(taps.scores[i].float() + bias, dim=-1)
        kl = torch.xlogy(target, target) - target * logp
        losses.append(kl.sum(-1)[rows].mean())
    return torch.stack(losses).mean() if losses else torch.zeros(())


@torch.no_grad()
def update_router_bias(taps: Taps, rate: float) -> None:
    """Auxiliary-loss-free balancing: raise the bias of under-loaded experts and lower that of over-loaded ones."""
    for key, gate in taps.routers.items():
        picks = taps.picks.get(key)
        if picks is None:
            continue
        load = F.one_hot(picks.reshape(-1), gate.num_experts).sum(0).float()
        gate.e_score_correction_bias += rate * torch.sign(load.mean() - load)


def forward_losses(model, mtp, taps: Taps, ids: torch.Tensor) -> dict:
    """ids [B, S+1]: main loss on tokens 1..S, MTP loss on tokens 2..S, indexer KL; per-token NLLs for eval."""
    seq = ids.shape[1] - 1
    inputs = ids[:, :seq]
    logits = model(input_ids=inputs, use_cache=False).logits  # [B, S, V]
    main_nll = token_nll(logits, ids[:, 1:])  # [B, S]
    mtp_logits = mtp(model, taps.streams[:, : seq - 1], ids[:, 1:seq], taps.mtp_kwargs(seq - 1))  # [B, S-1, V]
    mtp_nll = token_nll(mtp_logits, ids[:, 2:])  # [B, S-1]
    mtp_hit = (mtp_logits.argmax(-1) == ids[:, 2:]).float()
    return {"main": main_nll, "mtp": mtp_nll, "mtp_hit": mtp_hit, "indexer": indexer_kl(taps)}
