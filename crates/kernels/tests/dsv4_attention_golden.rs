//! compress and sparse_attn against transformers' DeepSeek V4 modules (goldens from tools/reference/dsv4_attention.py).

use std::collections::HashMap;
use std::path::PathBuf;

use tensorfold_kernels::Faults;
use tensorfold_kernels::compress::{CompressShape, compress};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::sparse_attn::{AttnShape, sparse_attn};

/// Named sections of a golden file, as raw 32-bit patterns.
fn golden(name: &str) -> HashMap<String, Vec<u32>> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../tools/reference/dsv4_attention", name]
        .iter()
        .collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run tools/reference/dsv4_attention.py", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut words = l.split(' ');
            let key = words.next().unwrap().to_owned();
            let bits = words.map(|w| u32::from_str_radix(w, 16).unwrap()).collect();
            (key, bits)
        })
        .collect()
}

fn f32s(g: &HashMap<String, Vec<u32>>, key: &str) -> Vec<f32> {
    g[key].iter().map(|&b| f32::from_bits(b)).collect()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}[{i}]: {a} vs transformers {b}"
        );
    }
}

/// Entries of a compressor over consecutive tokens `0..`, built as the engine would: per-entry token lists.
fn compress_tokens(g: &HashMap<String, Vec<u32>>, shape: CompressShape) -> Vec<f32> {
    let (kv, gate, ape) = (f32s(g, "kv"), f32s(g, "gate"), f32s(g, "ape"));
    let entries = kv.len() / shape.width() / shape.ratio;
    let mut token_idx = Vec::new();
    for w in 0..entries {
        if shape.overlap {
            token_idx.extend((0..shape.ratio).map(|i| if w == 0 { -1 } else { ((w - 1) * shape.ratio + i) as i32 }));
        }
        token_idx.extend((0..shape.ratio).map(|i| (w * shape.ratio + i) as i32));
    }
    let mut out = vec![0f32; entries * shape.head_dim];
    compress(
        &kv,
        &gate,
        &ape,
        &token_idx,
        shape,
        &mut out,
        &CpuLaunch::serial(),
        Faults::NONE,
    );
    out
}

#[test]
fn csa_compress_matches_transformers() {
    let g = golden("compress_csa.txt");
    let shape = CompressShape {
        ratio: 4,
        head_dim: 16,
        overlap: true,
    };
    assert_close(&compress_tokens(&g, shape), &f32s(&g, "entries"), 1e-5, "csa entries");
}

#[test]
fn hca_compress_matches_transformers() {
    let g = golden("compress_hca.txt");
    let shape = CompressShape {
        ratio: 128,
        head_dim: 16,
        overlap: false,
    };
    assert_close(&compress_tokens(&g, shape), &f32s(&g, "entries"), 1e-5, "hca entries");
}

#[test]
fn sparse_attn_matches_transformers() {
    let g = golden("sparse_attn.txt");
    let (q, kv, sinks, want) = (f32s(&g, "q"), f32s(&g, "kv"), f32s(&g, "sinks"), f32s(&g, "o"));
    let idx: Vec<i32> = g["idx"].iter().map(|&b| b as i32).collect();
    // transformers keeps probabilities in f32: exact up to f32 rounding without bf16, within 2^-8 of each with it.
    for (bf16_probs, per_element, norm_bound) in [(false, 1e-5, 1e-5), (true, 2e-2, 4e-3)] {
        let shape = AttnShape {
            num_heads: sinks.len(),
            head_dim: 32,
            softmax_scale: 32f32.sqrt().recip(),
            bf16_probs,
        };
        let mut out = vec![0f32; q.len()];
        sparse_attn(
            &q,
            &idx,
            &kv,
            &sinks,
            shape,
            &mut out,
            &CpuLaunch::serial(),
            Faults::NONE,
        );
        assert_close(&out, &want, per_element, "o");
        let err: f32 = out
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f32>()
            .sqrt();
        let norm: f32 = want.iter().map(|b| b * b).sum::<f32>().sqrt();
        assert!(
            err / norm < norm_bound,
            "bf16_probs {bf16_probs}: relative norm error {}",
            err / norm
        );
    }
}
