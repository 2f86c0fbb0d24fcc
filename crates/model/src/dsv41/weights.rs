//! Typed views of a DeepSeek V4.1 checkpoint's tensors, named as in the checkpoint; FP8 32x32 weights decoded once to bf16 (exact), experts stay mapped.

use tensorfold_formats::bf16::{bf16_to_f32, f32_to_bf16};
use tensorfold_formats::block_fp8::{self, Block as ScaleBlock, BlockScales};

use crate::checkpoint::{Checkpoint, MappedBytes};
use crate::config::dsv41::Dsv41TextConfig;
use crate::dsv4::weights::{Bf16, Hc, Mxfp4, Tensors};

/// A dense bf16 weight `[out_dim, in_dim]` held in memory (an FP8 weight times its power-of-two scales, which bf16 holds exactly).
#[derive(Clone, Debug)]
pub struct Dense {
    pub words: Vec<u16>,
    pub out_dim: usize,
    pub in_dim: usize,
}

/// The compressor of a KV-source layer: ratio 1 (`wkv` only) or ratio 2 (`wkv` and `wgate` over pairs).
#[derive(Clone, Debug)]
pub struct Compressor {
    pub ratio: usize,
    pub wkv: Bf16,           // [head_dim, D]
    pub wgate: Option<Bf16>, // [head_dim, D], ratio 2 only
    pub norm: Vec<f32>,      // [head_dim]
}

/// The index keys of a layer that is both a KV and an index source.
#[derive(Clone, Debug)]
pub struct IndexKeys {
    pub wk: Bf16,         // [index_head_dim, head_dim]
    pub k_norm: Vec<f32>, // [index_head_dim]
}

/// The query side of an index source.
#[derive(Clone, Debug)]
pub struct IndexQuery {
    pub wq_b: Dense,        // [index_n_heads * index_head_dim, q_lora]
    pub weights_proj: Bf16, // [index_n_heads, D]
}

/// One layer's attention.
#[derive(Clone, Debug)]
pub struct Attention {
    pub wq_a: Dense,         // [q_lora, D]
    pub q_norm: Vec<f32>,    // [q_lora]
    pub wq_b: Dense,         // [H * head_dim, q_lora]
    pub wkv: Dense,          // [head_dim, D]
    pub kv_norm: Vec<f32>,   // [head_dim]
    pub wo_a: Dense,         // [o_groups * o_lora, H * head_dim / o_groups]
    pub wo_b: Dense,         // [D, o_groups * o_lora]
    pub attn_sink: Vec<f32>, // [H]
    pub compressor: Option<Compressor>,
    pub index_keys: Option<IndexKeys>,
    pub index_query: Option<IndexQuery>,
}

/// One routed expert (MXFP4).
#[derive(Clone, Debug)]
pub struct Expert {
    pub w1: Mxfp4, // [inter, D]
    pub w2: Mxfp4, // [D, inter]
    pub w3: Mxfp4, // [inter, D]
}

/// One layer's mixture of experts (biased routing only; `bias_vl` is for image tokens and unread).
#[derive(Clone, Debug)]
pub struct Moe {
    pub gate: Bf16,     // [E, D]
    pub bias: Vec<f32>, // [E]
    pub experts: Vec<Expert>,
    /// Experts each row is routed to.
    pub top_k: usize,
    pub shared: Option<[Dense; 3]>, // w1 [inter, D], w2 [D, inter], w3 [inter, D]
}

/// The Engram module in front of a block.
#[derive(Clone, Debug)]
pub struct Engram {
    pub embed: MappedBytes,       // FP8 e4m3 [rows, engram_head_dim]
    pub embed_scale: MappedBytes, // e8m0 [rows, engram_head_dim / 32]
    pub q_weight: Vec<f32>,       // [hc, D]
    pub k_weight: Vec<f32>,       // [hc, D]
    pub wkv: Dense,               // [(hc + 1) * D, heads * engram_head_dim]
}

/// One main block `layers.N`.
#[derive(Clone, Debug)]
pub struct Block {
    pub engram: Option<Engram>,
    pub attn_norm: Vec<f32>,
    pub ffn_norm: Vec<f32>,
    pub hc_attn: Hc,
    pub hc_ffn: Hc,
    pub attn: Attention,
    pub ffn: Moe,
}

/// The DSpark drafter `mtp.*`: its stages (ratio-0 blocks without Engram), the input projection of the target layers' mean streams, and the last stage's heads.
#[derive(Clone, Debug)]
pub struct Dspark {
    pub stages: Vec<Block>,
    pub main_proj: Dense,    // [D, targets * D]
    pub main_norm: Vec<f32>, // [D]
    pub norm: Vec<f32>,      // [D]
    pub markov_embed: Bf16,  // [vocab, rank]
    pub markov_head: Bf16,   // [vocab, rank]
    pub confidence: Bf16,    // [1, D + rank]
}

/// Every weight of a DeepSeek V4.1 checkpoint's text model.
#[derive(Clone, Debug)]
pub struct Dsv41Weights {
    pub embed: Bf16, // [vocab, D]
    pub layers: Vec<Block>,
    pub norm: Vec<f32>,
    pub head: Bf16, // [vocab, D]
    /// The DSpark stages, when the config has any.
    pub dspark: Option<Dspark>,
}

/// Reads the DeepSeek V4.1 tensors.
struct Reader<'a> {
    t: Tensors<'a>,
    config: &'a Dsv41TextConfig,
}

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = Tensors<'a>;
    fn deref(&self) -> &Tensors<'a> {
        &self.t
    }
}

impl Reader<'_> {
    fn dense(&self, p: &str) -> Dense {
        let shape = self.shape(&format!("{p}.weight"));
        let (rows, cols) = (shape[0], shape[1]);
        let mut f = vec![0f32; rows * cols];
        let scales = self.bytes(&format!("{p}.scale"));
        block_fp8::dequantize_blocks(
            &self.bytes(&format!("{p}.weight")),
            BlockScales::E8m0(&scales),
            ScaleBlock::B32,
            rows,
            cols,
            &mut f,
        )
        .unwrap_or_else(|e| panic!("manifest-checked FP8 weight `{p}`: {e}"));
        let words = f
            .iter()
            .map(|&v| {
                let w = f32_to_bf16(v);
                debug_assert_eq!(bf16_to_f32(w), v, "FP8 times a power of two is exact in bf16");
                w
            })
            .collect();
        Dense {
            words,
            out_dim: rows,
            in_dim: cols,
        }
    }

    /// Attention of main layer `layer_idx`, or of a DSpark stage (`None`: window only).
    fn attention(&self, p: &str, layer_idx: Option<usize>) -> Attention {
        let c = self.config;
        let Some(layer_idx) = layer_idx else {
            return self.attention_core(p, None, None, None);
        };
        let plan = c.layer_plan(layer_idx);
        let compressor = (plan.kv_source == Some(layer_idx)).then(|| Compressor {
            ratio: plan.ratio,
            wkv: self.bf16(&format!("{p}.compressor.wkv.weight")),
            wgate: (plan.ratio == 2).then(|| self.bf16(&format!("{p}.compressor.wgate.weight"))),
            norm: self.f32s(&format!("{p}.compressor.norm.weight")),
        });
        let index_keys = c.owns_index_keys(layer_idx).then(|| IndexKeys {
            wk: self.bf16(&format!("{p}.indexer.wk.weight")),
            k_norm: self.f32s(&format!("{p}.indexer.k_norm.weight")),
        });
        let index_query = plan.index_source.then(|| IndexQuery {
            wq_b: self.dense(&format!("{p}.indexer.wq_b")),
            weights_proj: self.bf16(&format!("{p}.indexer.weights_proj.weight")),
        });
        self.attention_core(p, compressor, index_keys, index_query)
    }

    fn attention_core(
        &self,
        p: &str,
        compressor: Option<Compressor>,
        index_keys: Option<IndexKeys>,
        index_query: Option<IndexQuery>,
    ) -> Attention {
        Attention {
            wq_a: self.dense(&format!("{p}.wq_a")),
            q_norm: self.f32s(&format!("{p}.q_norm.weight")),
            wq_b: self.dense(&format!("{p}.wq_b")),
            wkv: self.dense(&format!("{p}.wkv")),
            kv_norm: self.f32s(&format!("{p}.kv_norm.weight")),
            wo_a: self.dense(&format!("{p}.wo_a")),
            wo_b: self.dense(&format!("{p}.wo_b")),
            attn_sink: self.f32s(&format!("{p}.attn_sink")),
            compressor,
            index_keys,
            index_query,
        }
    }

    fn moe(&self, p: &str, num_experts: usize, top_k: usize) -> Moe {
        let c = self.config;
        Moe {
            gate: self.bf16(&format!("{p}.gate.weight")),
            bias: self.f32s(&format!("{p}.gate.bias")),
            experts: (0..num_experts)
                .map(|e| Expert {
                    w1: self.mxfp4(&format!("{p}.experts.{e}.w1")),
                    w2: self.mxfp4(&format!("{p}.experts.{e}.w2")),
                    w3: self.mxfp4(&format!("{p}.experts.{e}.w3")),
                })
                .collect(),
            top_k,
            shared: (c.n_shared_experts > 0)
                .then(|| ["w1", "w2", "w3"].map(|w| self.dense(&format!("{p}.shared_experts.{w}")))),
        }
    }

    fn engram(&self, p: &str) -> Engram {
        Engram {
            embed: self.bytes(&format!("{p}.embed.weight")),
            embed_scale: self.bytes(&format!("{p}.embed.scale")),
            q_weight: self.f32s(&format!("{p}.q_weight")),
            k_weight: self.f32s(&format!("{p}.k_weight")),
            wkv: self.dense(&format!("{p}.wkv")),
        }
    }

    /// Main block `layers.{layer_idx}` or DSpark stage `mtp.{stage}` (`layer_idx` `None`).
    fn block(&self, p: &str, layer_idx: Option<usize>) -> Block {
        let c = self.config;
        let (experts, top_k) = match layer_idx {
            Some(_) => (c.n_routed_experts, c.num_experts_per_tok),
            None => (c.dspark_n_routed_experts, c.dspark_num_experts_per_tok),
        };
        Block {
            engram: layer_idx
                .filter(|&l| c.is_engram_layer(l))
                .map(|_| self.engram(&format!("{p}.engram"))),
            attn_norm: self.f32s(&format!("{p}.attn_norm.weight")),
            ffn_norm: self.f32s(&format!("{p}.ffn_norm.weight")),
            hc_attn: self.hc(&format!("{p}.hc_attn")),
            hc_ffn: self.hc(&format!("{p}.hc_ffn")),
            attn: self.attention(&format!("{p}.attn"), layer_idx),
            ffn: self.moe(&format!("{p}.ffn"), experts, top_k),
        }
    }

    fn dspark(&self) -> Option<Dspark> {
        let n = self.config.num_nextn_predict_layers;
        let last = format!("mtp.{}", n.checked_sub(1)?);
        Some(Dspark {
            stages: (0..n).map(|s| self.block(&format!("mtp.{s}"), None)).collect(),
            main_proj: self.dense("mtp.0.main_proj"),
            main_norm: self.f32s("mtp.0.main_norm.weight"),
            norm: self.f32s(&format!("{last}.norm.weight")),
            markov_embed: self.bf16(&format!("{last}.markov_head.embed.weight")),
            markov_head: self.bf16(&format!("{last}.markov_head.head.weight")),
            confidence: self.bf16(&format!("{last}.confidence_head.proj.weight")),
        })
    }
}

impl Dsv41Weights {
    /// Reads every text-model tensor of `ckpt` (already checked against the manifest of `config`).
    pub fn new(ckpt: &Checkpoint, config: &Dsv41TextConfig) -> Dsv41Weights {
        let r = Reader {
            t: Tensors { ckpt },
            config,
        };
        Dsv41Weights {
            embed: r.bf16("embed.weight"),
            layers: (0..config.num_hidden_layers)
                .map(|l| r.block(&format!("layers.{l}"), Some(l)))
                .collect(),
            norm: r.f32s("norm.weight"),
            head: r.bf16("head.weight"),
            dspark: r.dspark(),
        }
    }
}
