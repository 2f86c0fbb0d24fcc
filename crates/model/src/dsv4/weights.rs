//! Typed views of a DeepSeek V4 checkpoint's tensors, named as in the checkpoint; quantised weights stay mapped.

use tensorfold_formats::bf16;
use tensorfold_kernels::cpu::{Packing, packing_pays};
use tensorfold_kernels::{fp8_gemm, mxfp4_gemm};

use crate::checkpoint::{Checkpoint, MappedBytes};
use crate::config::dsv4::Dsv4Config;
use crate::dsv4::groups::Groups;

/// An FP8 e4m3 weight `[out_dim, in_dim]` with e8m0 128x128 block scales.
#[derive(Clone, Debug)]
pub struct Fp8 {
    pub codes: MappedBytes,
    pub scales: MappedBytes,
    pub out_dim: usize,
    pub in_dim: usize,
    /// The weight in 16-row groups for the CPU's `fp8_gemm`, made on first use where this CPU and shape allow.
    groups: Groups<fp8_gemm::Packed>,
}

impl Fp8 {
    /// A weight over the checkpoint's bytes.
    pub fn new(codes: MappedBytes, scales: MappedBytes, out_dim: usize, in_dim: usize) -> Fp8 {
        Fp8 {
            codes,
            scales,
            out_dim,
            in_dim,
            groups: Groups::default(),
        }
    }

    /// The weight in 16-row groups (packed on first use), or `None` where this CPU (`packing_pays`) or shape keeps the row layout.
    pub fn cpu_groups(&self) -> Option<&fp8_gemm::Packed> {
        // A rank's dropped weight holds no bytes; CPUs where packing does not pay keep the row layout.
        if self.codes.len() != self.out_dim * self.in_dim || !packing_pays(Packing::Fp8) {
            return None;
        }
        let pack = || fp8_gemm::Packed::new(&self.codes, &self.scales, self.out_dim, self.in_dim);
        self.groups.get_or(self.codes.len() + self.scales.len(), pack)
    }

    /// Bytes of the 16-row copy, if one was made.
    pub fn groups_held(&self) -> u64 {
        self.groups.held(|p| p.parts().iter().map(|b| b.len()).sum())
    }

    /// Forgets the 16-row copy.
    pub fn drop_groups(&mut self) {
        self.groups = Groups::default();
    }
}

/// An MXFP4 weight `[out_dim, in_dim]`: e2m1 pairs (element 2k low nibble) and e8m0 scales per 32 along `in_dim`.
#[derive(Clone, Debug)]
pub struct Mxfp4 {
    pub packed: MappedBytes,
    pub scales: MappedBytes,
    pub out_dim: usize,
    pub in_dim: usize,
    /// The weight in 16-row groups for the CPU's `mxfp4_gemm`, made on first use where this CPU and shape allow.
    groups: Groups<mxfp4_gemm::Packed>,
}

impl Mxfp4 {
    /// A weight over the checkpoint's bytes.
    pub fn new(packed: MappedBytes, scales: MappedBytes, out_dim: usize, in_dim: usize) -> Mxfp4 {
        Mxfp4 {
            packed,
            scales,
            out_dim,
            in_dim,
            groups: Groups::default(),
        }
    }

    /// The weight in 16-row groups (packed on first use), or `None` where this CPU (`packing_pays`) or shape keeps the row layout.
    pub fn cpu_groups(&self) -> Option<&mxfp4_gemm::Packed> {
        // A rank's dropped weight holds no bytes; CPUs where packing does not pay keep the row layout.
        if self.packed.len() != self.out_dim * self.in_dim / 2 || !packing_pays(Packing::Mxfp4) {
            return None;
        }
        let pack = || mxfp4_gemm::Packed::new(&self.packed, &self.scales, self.out_dim, self.in_dim);
        self.groups.get_or(self.packed.len() + self.scales.len(), pack)
    }

    /// Bytes of the 16-row copy, if one was made.
    pub fn groups_held(&self) -> u64 {
        self.groups.held(|p| p.parts().iter().map(|b| b.len()).sum())
    }

    /// Forgets the 16-row copy.
    pub fn drop_groups(&mut self) {
        self.groups = Groups::default();
    }
}

/// A bf16 weight `[out_dim, in_dim]`, little-endian, row-major.
#[derive(Clone, Debug)]
pub struct Bf16 {
    pub bytes: MappedBytes,
    /// A copy of the values, made only when the mapping is not 2-byte aligned.
    unaligned_copy: Option<Vec<u16>>,
    pub out_dim: usize,
    pub in_dim: usize,
}

impl Bf16 {
    /// A weight over `bytes`, copying them only if they are not aligned for u16 access.
    pub fn new(bytes: MappedBytes, out_dim: usize, in_dim: usize) -> Bf16 {
        // SAFETY: every bit pattern is a valid u16; align_to only reinterprets the aligned middle.
        let (head, _, _) = unsafe { bytes.align_to::<u16>() };
        let unaligned_copy = (!head.is_empty()).then(|| {
            bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()
        });
        Bf16 {
            bytes,
            unaligned_copy,
            out_dim,
            in_dim,
        }
    }

    /// The values as bf16 bit patterns (little-endian hosts).
    pub fn words(&self) -> &[u16] {
        match &self.unaligned_copy {
            Some(words) => words,
            // SAFETY: checked aligned in `new`; every bit pattern is a valid u16.
            None => unsafe { self.bytes.align_to::<u16>().1 },
        }
    }
}

/// mHC mixing weights of one sub-block: `fn` [mix, hc*D], `base` [mix], `scale` [3] (or [1] for the head).
#[derive(Clone, Debug)]
pub struct Hc {
    pub fn_: Vec<f32>,
    pub base: Vec<f32>,
    pub scale: Vec<f32>,
}

/// A gated pooling compressor (`attn.compressor` or `attn.indexer.compressor`).
#[derive(Clone, Debug)]
pub struct Compressor {
    pub ratio: usize,
    pub head_dim: usize,
    pub wkv: Bf16,      // [width, D], width = 2*head_dim when ratio == 4
    pub wgate: Bf16,    // [width, D]
    pub ape: Vec<f32>,  // [ratio, width]
    pub norm: Vec<f32>, // [head_dim]
}

/// The lightning indexer of a ratio-4 layer.
#[derive(Clone, Debug)]
pub struct Indexer {
    pub wq_b: Fp8,          // [index_n_heads * index_head_dim, q_lora]
    pub weights_proj: Bf16, // [index_n_heads, D]
    pub compressor: Compressor,
}

/// One layer's attention.
#[derive(Clone, Debug)]
pub struct Attention {
    pub wq_a: Fp8,           // [q_lora, D]
    pub q_norm: Vec<f32>,    // [q_lora]
    pub wq_b: Fp8,           // [H * head_dim, q_lora]
    pub wkv: Fp8,            // [head_dim, D]
    pub kv_norm: Vec<f32>,   // [head_dim]
    pub wo_a: Fp8,           // [o_groups * o_lora, H * head_dim / o_groups]
    pub wo_b: Fp8,           // [D, o_groups * o_lora]
    pub attn_sink: Vec<f32>, // [H]
    pub compressor: Option<Compressor>,
    pub indexer: Option<Indexer>,
}

/// How a MoE layer picks experts.
#[derive(Clone, Debug)]
pub enum Routing {
    /// `gate.bias` [E] added to the scores for selection only.
    Bias(Vec<f32>),
    /// `gate.tid2eid` [vocab, k]: experts fixed by token id.
    Hash(Vec<i32>),
}

/// One routed expert.
#[derive(Clone, Debug)]
pub struct Expert {
    pub w1: Mxfp4, // [inter, D]
    pub w2: Mxfp4, // [D, inter]
    pub w3: Mxfp4, // [inter, D]
}

/// The shared expert.
#[derive(Clone, Debug)]
pub struct SharedExpert {
    pub w1: Fp8,
    pub w2: Fp8,
    pub w3: Fp8,
}

/// One layer's mixture of experts.
#[derive(Clone, Debug)]
pub struct Moe {
    pub gate: Bf16, // [E, D]
    pub routing: Routing,
    pub experts: Vec<Expert>,
    pub shared: Option<SharedExpert>,
}

/// One transformer block (`layers.N` or `mtp.N`).
#[derive(Clone, Debug)]
pub struct Block {
    pub attn_norm: Vec<f32>,
    pub ffn_norm: Vec<f32>,
    pub hc_attn: Hc,
    pub hc_ffn: Hc,
    pub attn: Attention,
    pub ffn: Moe,
}

/// The MTP layer `mtp.N`.
#[derive(Clone, Debug)]
pub struct Mtp {
    pub block: Block,
    pub e_proj: Fp8,
    pub h_proj: Fp8,
    pub enorm: Vec<f32>,
    pub hnorm: Vec<f32>,
    pub norm: Vec<f32>,
    pub hc_head: Hc,
}

/// Every weight of a DeepSeek V4 model.
#[derive(Clone, Debug)]
pub struct Dsv4Weights {
    pub embed: Bf16, // [vocab, D]
    pub layers: Vec<Block>,
    pub mtp: Vec<Mtp>,
    pub norm: Vec<f32>,
    pub hc_head: Hc,
    pub head: Bf16, // [vocab, D]
}

/// Reads tensors of any family from a checkpoint whose manifest has already been checked.
pub(crate) struct Tensors<'a> {
    pub ckpt: &'a Checkpoint,
}

impl Tensors<'_> {
    pub(crate) fn bytes(&self, name: &str) -> MappedBytes {
        self.ckpt
            .mapped(name)
            .unwrap_or_else(|| panic!("manifest-checked tensor `{name}` is missing"))
    }

    pub(crate) fn shape(&self, name: &str) -> Vec<usize> {
        self.ckpt.tensors()[name].shape.clone()
    }

    pub(crate) fn f32s(&self, name: &str) -> Vec<f32> {
        let b = self.bytes(name);
        match self.ckpt.tensors()[name].dtype {
            crate::DType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            crate::DType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
            other => panic!("tensor `{name}` is {other}, not a float vector"),
        }
    }

    pub(crate) fn mxfp4(&self, p: &str) -> Mxfp4 {
        let shape = self.shape(&format!("{p}.weight"));
        Mxfp4::new(
            self.bytes(&format!("{p}.weight")),
            self.bytes(&format!("{p}.scale")),
            shape[0],
            2 * shape[1],
        )
    }

    pub(crate) fn bf16(&self, name: &str) -> Bf16 {
        let shape = self.shape(name);
        Bf16::new(self.bytes(name), shape[0], shape[1])
    }

    pub(crate) fn hc(&self, p: &str) -> Hc {
        Hc {
            fn_: self.f32s(&format!("{p}_fn")),
            base: self.f32s(&format!("{p}_base")),
            scale: self.f32s(&format!("{p}_scale")),
        }
    }
}

/// Reads the DeepSeek V4 tensors.
struct Reader<'a> {
    t: Tensors<'a>,
    config: &'a Dsv4Config,
}

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = Tensors<'a>;
    fn deref(&self) -> &Tensors<'a> {
        &self.t
    }
}

impl Reader<'_> {
    fn fp8(&self, p: &str) -> Fp8 {
        let shape = self.shape(&format!("{p}.weight"));
        Fp8::new(
            self.bytes(&format!("{p}.weight")),
            self.bytes(&format!("{p}.scale")),
            shape[0],
            shape[1],
        )
    }

    fn compressor(&self, p: &str, ratio: usize, head_dim: usize) -> Compressor {
        Compressor {
            ratio,
            head_dim,
            wkv: self.bf16(&format!("{p}.wkv.weight")),
            wgate: self.bf16(&format!("{p}.wgate.weight")),
            ape: self.f32s(&format!("{p}.ape")),
            norm: self.f32s(&format!("{p}.norm.weight")),
        }
    }

    fn attention(&self, p: &str, ratio: usize) -> Attention {
        let c = self.config;
        Attention {
            wq_a: self.fp8(&format!("{p}.wq_a")),
            q_norm: self.f32s(&format!("{p}.q_norm.weight")),
            wq_b: self.fp8(&format!("{p}.wq_b")),
            wkv: self.fp8(&format!("{p}.wkv")),
            kv_norm: self.f32s(&format!("{p}.kv_norm.weight")),
            wo_a: self.fp8(&format!("{p}.wo_a")),
            wo_b: self.fp8(&format!("{p}.wo_b")),
            attn_sink: self.f32s(&format!("{p}.attn_sink")),
            compressor: (ratio != 0).then(|| self.compressor(&format!("{p}.compressor"), ratio, c.head_dim)),
            indexer: (ratio == 4).then(|| Indexer {
                wq_b: self.fp8(&format!("{p}.indexer.wq_b")),
                weights_proj: self.bf16(&format!("{p}.indexer.weights_proj.weight")),
                compressor: self.compressor(&format!("{p}.indexer.compressor"), 4, c.index_head_dim),
            }),
        }
    }

    fn moe(&self, p: &str, hash: bool) -> Moe {
        let routing = if hash {
            let ids = self.bytes(&format!("{p}.gate.tid2eid"));
            Routing::Hash(
                ids.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) as i32)
                    .collect(),
            )
        } else {
            Routing::Bias(self.f32s(&format!("{p}.gate.bias")))
        };
        Moe {
            gate: self.bf16(&format!("{p}.gate.weight")),
            routing,
            experts: (0..self.config.n_routed_experts)
                .map(|e| Expert {
                    w1: self.mxfp4(&format!("{p}.experts.{e}.w1")),
                    w2: self.mxfp4(&format!("{p}.experts.{e}.w2")),
                    w3: self.mxfp4(&format!("{p}.experts.{e}.w3")),
                })
                .collect(),
            shared: (self.config.n_shared_experts > 0).then(|| SharedExpert {
                w1: self.fp8(&format!("{p}.shared_experts.w1")),
                w2: self.fp8(&format!("{p}.shared_experts.w2")),
                w3: self.fp8(&format!("{p}.shared_experts.w3")),
            }),
        }
    }

    fn block(&self, p: &str, ratio: usize, hash: bool) -> Block {
        Block {
            attn_norm: self.f32s(&format!("{p}.attn_norm.weight")),
            ffn_norm: self.f32s(&format!("{p}.ffn_norm.weight")),
            hc_attn: self.hc(&format!("{p}.hc_attn")),
            hc_ffn: self.hc(&format!("{p}.hc_ffn")),
            attn: self.attention(&format!("{p}.attn"), ratio),
            ffn: self.moe(&format!("{p}.ffn"), hash),
        }
    }
}

impl Dsv4Weights {
    /// Views every tensor of `ckpt` (already checked against the manifest of `config`).
    pub fn new(ckpt: &Checkpoint, config: &Dsv4Config) -> Dsv4Weights {
        let r = Reader {
            t: Tensors { ckpt },
            config,
        };
        let c = config;
        let layers = (0..c.num_hidden_layers)
            .map(|i| r.block(&format!("layers.{i}"), c.compress_ratio(i), c.is_hash_layer(i)))
            .collect();
        let mtp = (0..c.num_nextn_predict_layers)
            .map(|i| {
                let p = format!("mtp.{i}");
                Mtp {
                    block: r.block(&p, c.compress_ratios[c.num_hidden_layers + i], false),
                    e_proj: r.fp8(&format!("{p}.e_proj")),
                    h_proj: r.fp8(&format!("{p}.h_proj")),
                    enorm: r.f32s(&format!("{p}.enorm.weight")),
                    hnorm: r.f32s(&format!("{p}.hnorm.weight")),
                    norm: r.f32s(&format!("{p}.norm.weight")),
                    hc_head: r.hc(&format!("{p}.hc_head")),
                }
            })
            .collect();
        Dsv4Weights {
            embed: r.bf16("embed.weight"),
            layers,
            mtp,
            norm: r.f32s("norm.weight"),
            hc_head: r.hc("hc_head"),
            head: r.bf16("head.weight"),
        }
    }
}
