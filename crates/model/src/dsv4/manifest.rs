//! Every tensor of a DeepSeek V4 checkpoint in the official (hub) layout, from its config.

use crate::config::dsv4::Dsv4Config;
use crate::dtype::DType::{BF16, F8E4M3, F8E8M0, F32, I8, I64};
use crate::manifest::{Manifest, TensorSpec};

/// FP8 weight block edge.
const FP8_BLOCK: usize = 128;
/// MXFP4 scale block along K.
const FP4_BLOCK: usize = 32;

struct Builder<'a> {
    config: &'a Dsv4Config,
    specs: Vec<TensorSpec>,
}

impl Builder<'_> {
    fn push(&mut self, name: String, dtype: crate::dtype::DType, shape: &[usize]) {
        self.specs.push(TensorSpec::new(name, dtype, shape));
    }

    /// An FP8 e4m3 weight `[out, in]` with its e8m0 128x128 block scales.
    fn fp8(&mut self, prefix: &str, out_dim: usize, in_dim: usize) {
        self.push(format!("{prefix}.weight"), F8E4M3, &[out_dim, in_dim]);
        let grid = [out_dim.div_ceil(FP8_BLOCK), in_dim.div_ceil(FP8_BLOCK)];
        self.push(format!("{prefix}.scale"), F8E8M0, &grid);
    }

    /// An MXFP4 weight `[out, in]` packed two per byte, with e8m0 scales per 32 along `in`.
    fn fp4(&mut self, prefix: &str, out_dim: usize, in_dim: usize) {
        self.push(format!("{prefix}.weight"), I8, &[out_dim, in_dim / 2]);
        self.push(format!("{prefix}.scale"), F8E8M0, &[out_dim, in_dim / FP4_BLOCK]);
    }

    fn norm(&mut self, name: String, dim: usize) {
        self.push(name, BF16, &[dim]);
    }

    /// The mHC mixing tensors `{p}_fn`, `{p}_base`, `{p}_scale` for one sub-block.
    fn hc(&mut self, p: &str) {
        let c = self.config;
        let mix = (2 + c.hc_mult) * c.hc_mult;
        self.push(format!("{p}_fn"), F32, &[mix, c.hc_mult * c.hidden_size]);
        self.push(format!("{p}_base"), F32, &[mix]);
        self.push(format!("{p}_scale"), F32, &[3]);
    }

    /// The final stream collapse `{p}hc_head_*`.
    fn hc_head(&mut self, p: &str) {
        let c = self.config;
        self.push(format!("{p}hc_head_fn"), F32, &[c.hc_mult, c.hc_mult * c.hidden_size]);
        self.push(format!("{p}hc_head_base"), F32, &[c.hc_mult]);
        self.push(format!("{p}hc_head_scale"), F32, &[1]);
    }

    /// A gated pooling compressor producing `head_dim` entries; overlapping when `ratio == 4`.
    fn compressor(&mut self, p: &str, ratio: usize, head_dim: usize) {
        let c = self.config;
        let width = if ratio == 4 { 2 * head_dim } else { head_dim };
        self.push(format!("{p}.wkv.weight"), BF16, &[width, c.hidden_size]);
        self.push(format!("{p}.wgate.weight"), BF16, &[width, c.hidden_size]);
        self.push(format!("{p}.ape"), F32, &[ratio, width]);
        self.norm(format!("{p}.norm.weight"), head_dim);
    }

    fn attention(&mut self, p: &str, ratio: usize) {
        let c = self.config;
        let (d, h, hd) = (c.hidden_size, c.num_attention_heads, c.head_dim);
        self.fp8(&format!("{p}.wq_a"), c.q_lora_rank, d);
        self.norm(format!("{p}.q_norm.weight"), c.q_lora_rank);
        self.fp8(&format!("{p}.wq_b"), h * hd, c.q_lora_rank);
        self.fp8(&format!("{p}.wkv"), hd, d);
        self.norm(format!("{p}.kv_norm.weight"), hd);
        self.fp8(&format!("{p}.wo_a"), c.o_groups * c.o_lora_rank, h * hd / c.o_groups);
        self.fp8(&format!("{p}.wo_b"), d, c.o_groups * c.o_lora_rank);
        self.push(format!("{p}.attn_sink"), F32, &[h]);
        if ratio != 0 {
            self.compressor(&format!("{p}.compressor"), ratio, hd);
        }
        if ratio == 4 {
            let ip = format!("{p}.indexer");
            self.fp8(&format!("{ip}.wq_b"), c.index_n_heads * c.index_head_dim, c.q_lora_rank);
            self.push(format!("{ip}.weights_proj.weight"), BF16, &[c.index_n_heads, d]);
            self.compressor(&format!("{ip}.compressor"), 4, c.index_head_dim);
        }
    }

    fn moe(&mut self, p: &str, hash: bool) {
        let c = self.config;
        let (d, inter) = (c.hidden_size, c.moe_intermediate_size);
        self.push(format!("{p}.gate.weight"), BF16, &[c.n_routed_experts, d]);
        if hash {
            self.push(format!("{p}.gate.tid2eid"), I64, &[c.vocab_size, c.num_experts_per_tok]);
        } else {
            self.push(format!("{p}.gate.bias"), F32, &[c.n_routed_experts]);
        }
        for e in 0..c.n_routed_experts {
            self.fp4(&format!("{p}.experts.{e}.w1"), inter, d);
            self.fp4(&format!("{p}.experts.{e}.w2"), d, inter);
            self.fp4(&format!("{p}.experts.{e}.w3"), inter, d);
        }
        if c.n_shared_experts > 0 {
            let shared = inter * c.n_shared_experts;
            self.fp8(&format!("{p}.shared_experts.w1"), shared, d);
            self.fp8(&format!("{p}.shared_experts.w2"), d, shared);
            self.fp8(&format!("{p}.shared_experts.w3"), shared, d);
        }
    }

    /// One transformer block under prefix `p` (`layers.N` or `mtp.N`).
    fn block(&mut self, p: &str, ratio: usize, hash: bool) {
        let d = self.config.hidden_size;
        self.norm(format!("{p}.attn_norm.weight"), d);
        self.norm(format!("{p}.ffn_norm.weight"), d);
        self.hc(&format!("{p}.hc_attn"));
        self.hc(&format!("{p}.hc_ffn"));
        self.attention(&format!("{p}.attn"), ratio);
        self.moe(&format!("{p}.ffn"), hash);
    }
}

/// The tensors a DeepSeek V4 checkpoint with `config` holds, in file order.
pub fn manifest(config: &Dsv4Config) -> Manifest {
    let c = config;
    let mut b = Builder {
        config,
        specs: Vec::new(),
    };
    b.push("embed.weight".into(), BF16, &[c.vocab_size, c.hidden_size]);
    for layer_idx in 0..c.num_hidden_layers {
        b.block(
            &format!("layers.{layer_idx}"),
            c.compress_ratio(layer_idx),
            c.is_hash_layer(layer_idx),
        );
    }
    for mtp_idx in 0..c.num_nextn_predict_layers {
        let p = format!("mtp.{mtp_idx}");
        b.block(&p, c.compress_ratios[c.num_hidden_layers + mtp_idx], false);
        b.fp8(&format!("{p}.e_proj"), c.hidden_size, c.hidden_size);
        b.fp8(&format!("{p}.h_proj"), c.hidden_size, c.hidden_size);
        b.norm(format!("{p}.enorm.weight"), c.hidden_size);
        b.norm(format!("{p}.hnorm.weight"), c.hidden_size);
        b.norm(format!("{p}.norm.weight"), c.hidden_size);
        b.hc_head(&format!("{p}."));
    }
    b.norm("norm.weight".into(), c.hidden_size);
    b.hc_head("");
    b.push("head.weight".into(), BF16, &[c.vocab_size, c.hidden_size]);
    Manifest {
        family: super::FAMILY,
        specs: b.specs,
    }
}
