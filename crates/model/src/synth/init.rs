//! Random values for each synthetic tensor, scaled so activations stay in a realistic range.

use std::sync::atomic::{AtomicUsize, Ordering};

use tensorfold_formats::block_fp8::Block;
use tensorfold_formats::{bf16, block_fp8, mxfp4};

use crate::config::dsv4::Dsv4Config;
use crate::config::dsv41::Dsv41TextConfig;
use crate::dtype::DType;
use crate::manifest::TensorSpec;
use tensorfold_kernels::rng::{Rng, hash_str};

/// Rows per independently seeded chunk; a multiple of the FP8 block so block scales stay within a chunk.
const CHUNK_ROWS: usize = 128;

/// Bytes of one tensor and, for a quantized weight, of its `.scale` companion.
pub struct Filled {
    pub bytes: Vec<u8>,
    pub scale: Option<Vec<u8>>,
}

/// What the initialisers need to know of a model.
#[derive(Clone, Copy, Debug)]
pub struct InitParams {
    pub hidden_size: usize,
    /// Expert count for `tid2eid` tables.
    pub n_routed_experts: usize,
    /// FP8 scale block of the tensor with this name.
    pub fp8_block: fn(&str) -> Block,
}

impl InitParams {
    /// DeepSeek V4: 128x128 FP8 blocks.
    pub fn dsv4(config: &Dsv4Config) -> InitParams {
        InitParams {
            hidden_size: config.hidden_size,
            n_routed_experts: config.n_routed_experts,
            fp8_block: |_| Block::B128,
        }
    }

    /// DeepSeek V4.1: 32x32 FP8 blocks, Engram tables one scale per 32 columns of a row.
    pub fn dsv41(config: &Dsv41TextConfig) -> InitParams {
        InitParams {
            hidden_size: config.hidden_size,
            n_routed_experts: config.n_routed_experts,
            fp8_block: |name| {
                if name.ends_with(".engram.embed.weight") {
                    Block::ROW32
                } else {
                    Block::B32
                }
            },
        }
    }
}

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug)]
enum Init {
    /// `mean + std * N(0, 1)`.
    Normal { mean: f32, std: f32 },
    /// Distinct random expert ids per token row.
    ExpertIds,
}

fn init_for(spec: &TensorSpec, params: &InitParams) -> Init {
    let name = spec.name.as_str();
    let fan_in = *spec.shape.last().unwrap_or(&1) as f32 * if spec.dtype == DType::I8 { 2.0 } else { 1.0 };
    let normal = |mean: f32, std: f32| Init::Normal { mean, std };
    let d = params.hidden_size as f32;
    if name.ends_with("tid2eid") {
        Init::ExpertIds
    } else if name == "embed.weight" || name.ends_with(".embed.weight") {
        normal(0.0, 1.0)
    } else if name == "head.weight" {
        normal(0.0, 2.0 / d.sqrt())
    } else if name.ends_with("norm.weight") || name.ends_with(".q_weight") || name.ends_with(".k_weight") {
        normal(1.0, 0.1)
    } else if name.ends_with("_fn") {
        normal(0.0, 1.0 / fan_in.sqrt())
    } else if name.ends_with("_base") {
        normal(0.0, 0.5)
    } else if name.ends_with("_scale") {
        normal(0.5, 0.1)
    } else if name.ends_with("attn_sink") {
        normal(0.0, 1.0)
    } else if name.ends_with(".ape") {
        normal(0.0, 0.5)
    } else if name.ends_with("gate.bias") || name.ends_with("gate.bias_vl") {
        normal(0.0, 0.1)
    } else {
        normal(0.0, 1.0 / fan_in.sqrt())
    }
}

/// Fills `spec` deterministically from `(seed, name)`; the result does not depend on the thread count.
pub fn fill(spec: &TensorSpec, params: &InitParams, seed: u64) -> Filled {
    let key = seed ^ hash_str(&spec.name);
    let init = init_for(spec, params);
    let rows = spec.shape.first().copied().unwrap_or(1).max(1);
    let row_len = if spec.shape.len() <= 1 {
        spec.numel()
    } else {
        spec.shape[1..].iter().product()
    };
    let rows = if spec.shape.len() <= 1 { 1 } else { rows };
    let num_chunks = rows.div_ceil(CHUNK_ROWS);
    let parts = par_map(num_chunks, |chunk_idx| {
        let row_range = chunk_idx * CHUNK_ROWS..((chunk_idx + 1) * CHUNK_ROWS).min(rows);
        let mut rng = Rng::new(key, chunk_idx as u64);
        fill_chunk(spec, init, row_range.len(), row_len, params, &mut rng)
    });
    let mut bytes = Vec::with_capacity(spec.num_bytes());
    let mut scale: Option<Vec<u8>> = None;
    for part in parts {
        bytes.extend_from_slice(&part.bytes);
        if let Some(s) = part.scale {
            scale.get_or_insert_with(Vec::new).extend_from_slice(&s);
        }
    }
    Filled { bytes, scale }
}

fn fill_chunk(
    spec: &TensorSpec,
    init: Init,
    rows: usize,
    row_len: usize,
    params: &InitParams,
    rng: &mut Rng,
) -> Filled {
    let n = rows * row_len;
    let Init::Normal { mean, std } = init else {
        return Filled {
            bytes: expert_ids(rows, row_len, params.n_routed_experts, rng),
            scale: None,
        };
    };
    let logical = if spec.dtype == DType::I8 { 2 * n } else { n };
    let values: Vec<f32> = (0..logical).map(|_| mean + std * rng.normal()).collect();
    match spec.dtype {
        DType::F32 => Filled {
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            scale: None,
        },
        DType::BF16 => Filled {
            bytes: values
                .iter()
                .flat_map(|v| bf16::f32_to_bf16(*v).to_le_bytes())
                .collect(),
            scale: None,
        },
        DType::F8E4M3 => {
            let block = (params.fp8_block)(&spec.name);
            let (codes, scales) =
                block_fp8::quantize_e8m0_blocks(&values, block, rows, row_len).expect("chunk shape is consistent");
            Filled {
                bytes: codes,
                scale: Some(scales),
            }
        }
        DType::I8 => {
            let k = 2 * row_len;
            let mut packed = vec![0u8; n];
            let mut scales = vec![0u8; rows * k / mxfp4::BLOCK];
            for r in 0..rows {
                mxfp4::quantize_row(
                    &values[r * k..(r + 1) * k],
                    &mut packed[r * row_len..(r + 1) * row_len],
                    &mut scales[r * k / mxfp4::BLOCK..(r + 1) * k / mxfp4::BLOCK],
                )
                .expect("row shape is consistent");
            }
            Filled {
                bytes: packed,
                scale: Some(scales),
            }
        }
        other => unreachable!("synth has no initialiser for {other} tensor {}", spec.name),
    }
}

/// `k` distinct expert ids in `[0, num_experts)` per row, as little-endian i64.
fn expert_ids(rows: usize, k: usize, num_experts: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * k * 8);
    let mut ids: Vec<i64> = (0..num_experts as i64).collect();
    for _ in 0..rows {
        for i in 0..k {
            let j = i + rng.below((num_experts - i) as u64) as usize;
            ids.swap(i, j);
            out.extend_from_slice(&ids[i].to_le_bytes());
        }
    }
    out
}

/// Runs `f` on `0..n` over the machine's threads and returns the results in index order.
fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n)
        .max(1);
    if workers == 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break out;
                        }
                        out.push((i, f(i)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("synth worker panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}
