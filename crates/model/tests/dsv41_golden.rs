//! DeepSeek V4.1 goldens from the float64 reference (tools/reference/dsv41_f64.py) on the tiny synth checkpoint.

mod common;

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use tensorfold_formats::bf16::bf16_to_f32;
use tensorfold_formats::block_fp8::{self, Block, BlockScales};
use tensorfold_kernels::Faults;
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::engram_gate::engram_gate;
use tensorfold_model::Checkpoint;
use tensorfold_model::dsv41::engram::{TokenMap, layer_tables, row_ids};
use tensorfold_model::synth::Dsv41Preset;
use tensorfold_model::synth::tokenizer::TOKENIZER_JSON;

fn golden_bytes(name: &str) -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/goldens/dsv41_tiny/{name}.safetensors"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run tools/reference/dsv41_f64.py", path.display()))
}

fn ints(st: &safetensors::SafeTensors, name: &str) -> Vec<i64> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("golden tensor {name}: {e}"));
    match t.dtype() {
        safetensors::Dtype::I32 => t
            .data()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect(),
        safetensors::Dtype::I64 => t
            .data()
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        other => panic!("golden tensor {name} is {other:?}, expected an integer"),
    }
}

fn metadata(bytes: &[u8], key: &str) -> String {
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    meta.metadata()
        .as_ref()
        .and_then(|m| m.get(key))
        .cloned()
        .unwrap_or_default()
}

fn floats(st: &safetensors::SafeTensors, name: &str) -> Vec<f32> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("golden tensor {name}: {e}"));
    assert_eq!(t.dtype(), safetensors::Dtype::F32, "golden tensor {name}");
    t.data()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The tiny V4.1 checkpoint with seed 0, written once per test binary.
fn tiny_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| common::tiny_dsv41_dir(0)).path()
}

/// A dense f32 copy of an FP8 weight with `block` scales.
fn fp8_weight(ckpt: &Checkpoint, prefix: &str, block: Block) -> (Vec<f32>, usize, usize) {
    let w = ckpt.get(&format!("{prefix}.weight")).unwrap();
    let s = ckpt.get(&format!("{prefix}.scale")).unwrap();
    let (rows, cols) = (w.shape[0], w.shape[1]);
    let mut out = vec![0f32; rows * cols];
    block_fp8::dequantize_blocks(w.bytes, BlockScales::E8m0(s.bytes), block, rows, cols, &mut out).unwrap();
    (out, rows, cols)
}

fn bf16_tensor(ckpt: &Checkpoint, name: &str) -> Vec<f32> {
    let t = ckpt.get(name).unwrap();
    t.bytes
        .chunks(2)
        .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// Relative norm of `a - b` against `b`.
fn rel(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|&y| (y as f64).powi(2)).sum();
    (num / den).sqrt()
}

#[test]
fn goldens_were_made_from_the_current_tiny_synth() {
    let dir = tiny_dir();
    let sha = format!(
        "{:x}",
        Sha256::digest(std::fs::read(dir.join("model.safetensors")).unwrap())
    );
    for name in ["short", "long"] {
        let want = metadata(&golden_bytes(name), "checkpoint_sha256");
        assert_eq!(
            sha, want,
            "{name}: synth tiny seed 0 changed; regenerate with tools/reference/dsv41_f64.py"
        );
    }
}

#[test]
fn engram_ids_and_rows_match_the_reference() {
    let tokenizer = tokenizers::Tokenizer::from_bytes(TOKENIZER_JSON).unwrap();
    let map = TokenMap::build(&tokenizer).unwrap();
    let c = Dsv41Preset::Tiny.config().text_config;
    let tables = layer_tables(
        &c.engram_layer_ids,
        &c.engram_vocab_size,
        c.engram_n_heads,
        map.num_compressed as u64,
    );
    let pad = map.get(c.engram_pad_id);
    let heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    for name in ["short", "long"] {
        let bytes = golden_bytes(name);
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let ids: Vec<u32> = ints(&st, "input_ids").iter().map(|&v| v as u32).collect();
        let text = metadata(&bytes, "text");
        let encoded = tokenizer.encode(text.as_str(), false).unwrap();
        assert_eq!(ids[0], c.bos_token_id);
        assert_eq!(
            &ids[1..],
            encoded.get_ids(),
            "{name}: tokenization differs from the reference"
        );
        let compressed: Vec<u64> = ids.iter().map(|&id| map.get(id)).collect();
        let want: Vec<u64> = ints(&st, "compressed_ids").iter().map(|&v| v as u64).collect();
        assert_eq!(compressed, want, "{name}: compressed ids");
        for t in &tables {
            let want = ints(&st, &format!("engram_rows.{}", t.layer_idx));
            let mut got = vec![0u64; heads];
            for pos in 0..ids.len() {
                row_ids(t, &compressed, pos, pad, c.engram_n_heads, &mut got);
                let want_row: Vec<u64> = want[pos * heads..(pos + 1) * heads].iter().map(|&v| v as u64).collect();
                assert_eq!(got, want_row, "{name}: layer {} rows at position {pos}", t.layer_idx);
            }
        }
    }
}

/// Engram step against float64: inputs and outputs rounded to f32 (2^-24 each), the wkv product in f64 here, the gate by the `engram_gate` kernel.
const ENGRAM_REL_BOUND: f64 = 1e-6;

#[test]
fn engram_step_matches_the_reference() {
    let ckpt = Checkpoint::open(tiny_dir()).unwrap();
    let c = Dsv41Preset::Tiny.config().text_config;
    let tokenizer = tokenizers::Tokenizer::from_bytes(TOKENIZER_JSON).unwrap();
    let map = TokenMap::build(&tokenizer).unwrap();
    let tables = layer_tables(
        &c.engram_layer_ids,
        &c.engram_vocab_size,
        c.engram_n_heads,
        map.num_compressed as u64,
    );
    let (d, hc, hd) = (c.hidden_size, c.hc_mult, c.engram_head_dim);
    let heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    for name in ["short", "long"] {
        let bytes = golden_bytes(name);
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let compressed: Vec<u64> = ints(&st, "input_ids").iter().map(|&id| map.get(id as u32)).collect();
        let positions: Vec<usize> = ints(&st, "positions").iter().map(|&p| p as usize).collect();
        for t in &tables {
            let l = t.layer_idx;
            let p = format!("layers.{l}.engram");
            let table = ckpt.get(&format!("{p}.embed.weight")).unwrap();
            let table_scale = ckpt.get(&format!("{p}.embed.scale")).unwrap();
            let num_rows = table.shape[0];
            let (wkv, kv_dim, in_dim) = fp8_weight(&ckpt, &format!("{p}.wkv"), Block::B32);
            assert_eq!((kv_dim, in_dim), ((hc + 1) * d, heads * hd));
            let (qw, kw) = (
                bf16_tensor(&ckpt, &format!("{p}.q_weight")),
                bf16_tensor(&ckpt, &format!("{p}.k_weight")),
            );
            let mut x = floats(&st, &format!("layer.{}", l - 1));
            let (mut keys, mut v) = (Vec::new(), Vec::new());
            let mut ids = vec![0u64; heads];
            for &pos in &positions {
                row_ids(
                    t,
                    &compressed,
                    pos,
                    map.get(c.engram_pad_id),
                    c.engram_n_heads,
                    &mut ids,
                );
                let mut emb = vec![0f32; heads * hd];
                for (h, &r) in ids.iter().enumerate() {
                    let r = r as usize;
                    let scales = BlockScales::E8m0(table_scale.bytes);
                    let q_row = &table.bytes[r * hd..(r + 1) * hd];
                    let out = &mut emb[h * hd..(h + 1) * hd];
                    block_fp8::dequantize_row_blocks(q_row, scales, Block::ROW32, num_rows, r, out).unwrap();
                }
                let kv: Vec<f32> = wkv
                    .chunks(in_dim)
                    .map(|w| w.iter().zip(&emb).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() as f32)
                    .collect();
                keys.extend_from_slice(&kv[..hc * d]);
                v.extend_from_slice(&kv[hc * d..]);
            }
            let eps = c.rms_norm_eps as f32;
            engram_gate(&mut x, &keys, &v, &qw, &kw, hc, eps, &CpuLaunch::serial(), Faults::NONE);
            let want = floats(&st, &format!("engram_out.{l}"));
            let err = rel(&x, &want);
            eprintln!("{name}: Engram before layer {l}: rel err {err:.2e}");
            assert!(
                err < ENGRAM_REL_BOUND,
                "{name}: Engram before layer {l}: rel err {err:e}"
            );
        }
    }
}

fn argmax(row: &[f32]) -> u32 {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32
}

fn f64s(st: &safetensors::SafeTensors, name: &str) -> Vec<f64> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("golden tensor {name}: {e}"));
    match t.dtype() {
        safetensors::Dtype::F64 => t
            .data()
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        _ => floats(st, name).into_iter().map(f64::from).collect(),
    }
}

/// Layer streams and logits within this relative-norm bound of the float64 reference: f32 sums over at most a few thousand terms per layer, eight layers.
const FORWARD_REL_BOUND: f64 = 5e-6;
/// Each of the top-64 logits at the checked positions within this of the reference (logits of order 1).
const LOGIT_ABS_BOUND: f64 = 5e-5;

#[test]
fn forward_matches_the_reference() {
    use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
    use tensorfold_model::dsv4::cache::Dsv4Cache;
    use tensorfold_model::dsv41::forward::{ForwardOptions, load_model};

    let m = load_model(tiny_dir()).unwrap();
    let c = &m.config;
    let (n, vocab) = (c.hc_mult * c.hidden_size, c.vocab_size);
    for name in ["short", "long"] {
        let bytes = golden_bytes(name);
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let ids: Vec<u32> = ints(&st, "input_ids").iter().map(|&v| v as u32).collect();
        let positions: Vec<usize> = ints(&st, "positions").iter().map(|&p| p as usize).collect();
        let mut cache = Dsv4Cache::default();
        let mut batch = Batch::default();
        batch.push_seq(SeqSlot(0), 0, &ids);
        let opts = ForwardOptions {
            keep_layers: true,
            logit_rows: None,
            ..ForwardOptions::default()
        };
        let out = m.forward_with(&batch, &mut cache, CpuLaunch::serial(), &opts).unwrap();
        let mut worst = 0f64;
        for (l, streams) in out.layer_streams.iter().enumerate() {
            let got: Vec<f32> = positions
                .iter()
                .flat_map(|&p| streams[p * n..(p + 1) * n].to_vec())
                .collect();
            let err = rel(&got, &floats(&st, &format!("layer.{l}")));
            eprintln!("{name}: layer {l} streams rel err {err:.2e}");
            worst = worst.max(err);
        }
        let last = &out.logits[(ids.len() - 1) * vocab..];
        let err = rel(last, &floats(&st, "logits_last"));
        eprintln!("{name}: final logits rel err {err:.2e}");
        worst = worst.max(err);
        assert!(worst < FORWARD_REL_BOUND, "{name}: worst rel err {worst:e}");
        let (top_ids, top_logits) = (ints(&st, "top_ids"), f64s(&st, "top_logits"));
        let mut max_abs = 0f64;
        for (i, &p) in positions.iter().enumerate() {
            let row = &out.logits[p * vocab..(p + 1) * vocab];
            assert_eq!(
                argmax(row) as i64,
                top_ids[i * 64],
                "{name} position {p}: argmax differs"
            );
            for j in 0..64 {
                let (id, want) = (top_ids[i * 64 + j] as usize, top_logits[i * 64 + j]);
                max_abs = max_abs.max((row[id] as f64 - want).abs());
            }
        }
        eprintln!("{name}: top-64 logits max abs err {max_abs:.2e}");
        assert!(
            max_abs < LOGIT_ABS_BOUND,
            "{name}: top-64 logits max abs err {max_abs:e}"
        );
        let want: Vec<u32> = ints(&st, "greedy").iter().map(|&v| v as u32).collect();
        let mut next = argmax(last);
        let mut greedy = vec![next];
        for step in 1..want.len() {
            let mut b = Batch::default();
            b.push_seq(SeqSlot(0), (ids.len() + step - 1) as u32, &[next]);
            let o = m
                .forward_with(&b, &mut cache, CpuLaunch::serial(), &ForwardOptions::default())
                .unwrap();
            next = argmax(&o.logits);
            greedy.push(next);
        }
        assert_eq!(greedy, want, "{name}: greedy continuation differs");
    }
}
