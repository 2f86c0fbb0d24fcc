//! Every tensor of a DeepSeek V4.1 checkpoint in the hub layout, from its config.

use crate::config::dsv41::{Dsv41TextConfig, FP8_BLOCK};
use crate::dtype::DType::{self, BF16, F8E4M3, F8E8M0, F32, I8};
use crate::manifest::{Manifest, TensorSpec};

/// MXFP4 scale block along K.
const FP4_BLOCK: usize = 32;
/// Engram table scale block along each row.
const ENGRAM_SCALE_BLOCK: usize = 32;

struct Builder<'a> {
    c: &'a Dsv41TextConfig,
    specs: Vec<TensorSpec>,
}

impl Builder<'_> {
    fn push(&mut self, name: String, dtype: DType, shape: &[usize]) {
        self.specs.push(TensorSpec::new(name, dtype, shape));
    }

    /// An FP8 e4m3 weight `[out, in]` with its e8m0 32x32 block scales.
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

    fn bf16(&mut self, name: String, out_dim: usize, in_dim: usize) {
        self.push(name, BF16, &[out_dim, in_dim]);
    }

    fn norm(&mut self, name: String, dim: usize) {
        self.push(name, BF16, &[dim]);
    }

    /// The mHC mixing tensors `{p}_fn`, `{p}_base`, `{p}_scale` for one sub-block.
    fn hc(&mut self, p: &str) {
        let c = self.c;
        let mix = (2 + c.hc_mult) * c.hc_mult;
        self.push(format!("{p}_fn"), F32, &[mix, c.hc_mult * c.hidden_size]);
        self.push(format!("{p}_base"), F32, &[mix]);
        self.push(format!("{p}_scale"), F32, &[3]);
    }

    /// Attention of main layer `layer_idx`, or of a DSpark stage when `layer_idx` is `None`.
    fn attention(&mut self, p: &str, layer_idx: Option<usize>) {
        let c = self.c;
        let (d, h, hd) = (c.hidden_size, c.num_attention_heads, c.head_dim);
        self.fp8(&format!("{p}.wq_a"), c.q_lora_rank, d);
        self.norm(format!("{p}.q_norm.weight"), c.q_lora_rank);
        self.fp8(&format!("{p}.wq_b"), h * hd, c.q_lora_rank);
        self.fp8(&format!("{p}.wkv"), hd, d);
        self.norm(format!("{p}.kv_norm.weight"), hd);
        self.fp8(&format!("{p}.wo_a"), c.o_groups * c.o_lora_rank, h * hd / c.o_groups);
        self.fp8(&format!("{p}.wo_b"), d, c.o_groups * c.o_lora_rank);
        self.push(format!("{p}.attn_sink"), F32, &[h]);
        let Some(layer_idx) = layer_idx else { return };
        let plan = c.layer_plan(layer_idx);
        if plan.kv_source == Some(layer_idx) {
            let cp = format!("{p}.compressor");
            self.bf16(format!("{cp}.wkv.weight"), hd, d);
            if plan.ratio == 2 {
                self.bf16(format!("{cp}.wgate.weight"), hd, d);
            }
            self.norm(format!("{cp}.norm.weight"), hd);
        }
        let ip = format!("{p}.indexer");
        if c.owns_index_keys(layer_idx) {
            self.bf16(format!("{ip}.wk.weight"), c.index_head_dim, hd);
            self.norm(format!("{ip}.k_norm.weight"), c.index_head_dim);
        }
        if plan.index_source {
            self.bf16(format!("{ip}.weights_proj.weight"), c.index_n_heads, d);
            self.fp8(&format!("{ip}.wq_b"), c.index_n_heads * c.index_head_dim, c.q_lora_rank);
        }
    }

    fn moe(&mut self, p: &str, num_experts: usize) {
        let c = self.c;
        let (d, inter) = (c.hidden_size, c.moe_intermediate_size);
        self.bf16(format!("{p}.gate.weight"), num_experts, d);
        self.push(format!("{p}.gate.bias"), F32, &[num_experts]);
        self.push(format!("{p}.gate.bias_vl"), F32, &[num_experts]);
        for e in 0..num_experts {
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

    /// Engram tables and gates of layer `table_rows`' owner.
    fn engram(&mut self, p: &str, table_rows: usize) {
        let c = self.c;
        let (d, hd) = (c.hidden_size, c.engram_head_dim);
        let heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
        self.push(format!("{p}.embed.weight"), F8E4M3, &[table_rows, hd]);
        self.push(
            format!("{p}.embed.scale"),
            F8E8M0,
            &[table_rows, hd / ENGRAM_SCALE_BLOCK],
        );
        self.bf16(format!("{p}.q_weight"), c.hc_mult, d);
        self.bf16(format!("{p}.k_weight"), c.hc_mult, d);
        self.fp8(&format!("{p}.wkv"), (c.hc_mult + 1) * d, heads * hd);
    }

    /// One block under prefix `p`: a main layer (`Some(idx)`) or a DSpark stage.
    fn block(&mut self, p: &str, layer_idx: Option<usize>) {
        let c = self.c;
        let d = c.hidden_size;
        self.norm(format!("{p}.attn_norm.weight"), d);
        self.norm(format!("{p}.ffn_norm.weight"), d);
        self.hc(&format!("{p}.hc_attn"));
        self.hc(&format!("{p}.hc_ffn"));
        self.attention(&format!("{p}.attn"), layer_idx);
        let experts = if layer_idx.is_some() {
            c.n_routed_experts
        } else {
            c.dspark_n_routed_experts
        };
        self.moe(&format!("{p}.ffn"), experts);
    }
}

/// The tensors a DeepSeek V4.1 checkpoint with text config `c` holds, in file order.
pub fn manifest(c: &Dsv41TextConfig) -> Manifest {
    let mut b = Builder { c, specs: Vec::new() };
    let d = c.hidden_size;
    b.bf16("embed.weight".into(), c.vocab_size, d);
    for layer_idx in 0..c.num_hidden_layers {
        let p = format!("layers.{layer_idx}");
        if let Some(e) = c.engram_layer_ids.iter().position(|&l| l == layer_idx) {
            b.engram(&format!("{p}.engram"), c.engram_num_embeddings[e] as usize);
        }
        b.block(&p, Some(layer_idx));
    }
    let num_stages = c.num_nextn_predict_layers;
    for stage in 0..num_stages {
        let p = format!("mtp.{stage}");
        b.block(&p, None);
        if stage == 0 {
            b.fp8(&format!("{p}.main_proj"), d, c.dspark_target_layer_ids.len() * d);
            b.norm(format!("{p}.main_norm.weight"), d);
        }
        if stage + 1 == num_stages {
            b.norm(format!("{p}.norm.weight"), d);
            b.bf16(
                format!("{p}.markov_head.embed.weight"),
                c.vocab_size,
                c.dspark_markov_rank,
            );
            b.bf16(
                format!("{p}.markov_head.head.weight"),
                c.vocab_size,
                c.dspark_markov_rank,
            );
            b.bf16(format!("{p}.confidence_head.proj.weight"), 1, d + c.dspark_markov_rank);
        }
    }
    b.norm("norm.weight".into(), d);
    b.bf16("head.weight".into(), c.vocab_size, d);
    Manifest {
        family: super::FAMILY,
        specs: b.specs,
    }
}
