//! `synth` writes complete, deterministic checkpoints that the reference safetensors reader accepts.

mod common;

use common::base;
use tensorfold_formats::{block_fp8, mxfp4};
use tensorfold_model::Checkpoint;
use tensorfold_model::synth::{self, Preset, SynthOptions};

fn write(seed: u64, chat_template: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Preset::Tiny,
        seed,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template,
        force: false,
    };
    synth::write(&opts).unwrap();
    dir
}

fn weights(dir: &std::path::Path) -> Vec<u8> {
    std::fs::read(dir.join("model.safetensors")).unwrap()
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let again = write(1, true);
    assert!(
        weights(base(0)) == weights(again.path()),
        "seed 1 wrote different bytes twice"
    );
    let other = write(2, true);
    assert!(
        weights(base(0)) != weights(other.path()),
        "seeds 1 and 2 wrote the same bytes"
    );
}

#[test]
fn sharded_and_single_hold_the_same_tensors() {
    let single = Checkpoint::open(base(0)).unwrap();
    let sharded = Checkpoint::open(base(8)).unwrap();
    assert_eq!(single.tensors().len(), sharded.tensors().len());
    for name in single.tensors().keys() {
        assert_eq!(
            single.get(name).unwrap().bytes,
            sharded.get(name).unwrap().bytes,
            "{name}"
        );
    }
}

#[test]
fn reference_reader_agrees_with_ours() {
    let bytes = weights(base(0));
    let reference = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let ours = Checkpoint::open(base(0)).unwrap();
    assert_eq!(reference.len(), ours.tensors().len());
    for (name, view) in reference.tensors() {
        let mine = ours.get(&name).unwrap();
        assert_eq!(format!("{:?}", view.dtype()), mine.dtype.name(), "{name}");
        assert_eq!(view.shape(), mine.shape, "{name}");
        assert_eq!(view.data(), mine.bytes, "{name}");
    }
}

fn std_dev(xs: &[f32]) -> f64 {
    let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
}

#[test]
fn quantized_weights_decode_to_fan_in_scaled_values() {
    let ckpt = Checkpoint::open(base(0)).unwrap();
    let q = ckpt.get("layers.0.attn.wq_b.weight").unwrap();
    let s = ckpt.get("layers.0.attn.wq_b.scale").unwrap();
    let (rows, cols) = (q.shape[0], q.shape[1]);
    let mut w = vec![0f32; rows * cols];
    block_fp8::dequantize(q.bytes, block_fp8::BlockScales::E8m0(s.bytes), rows, cols, &mut w).unwrap();
    let want = 1.0 / (cols as f64).sqrt();
    assert!(
        (std_dev(&w) / want - 1.0).abs() < 0.05,
        "FP8 std {} want {want}",
        std_dev(&w)
    );

    let p = ckpt.get("layers.3.ffn.experts.5.w2.weight").unwrap();
    let s = ckpt.get("layers.3.ffn.experts.5.w2.scale").unwrap();
    let k = p.shape[1] * 2;
    let mut row = vec![0f32; k];
    let mut all = Vec::new();
    for r in 0..p.shape[0] {
        let blocks = k / mxfp4::BLOCK;
        mxfp4::dequantize_row(
            &p.bytes[r * k / 2..(r + 1) * k / 2],
            &s.bytes[r * blocks..(r + 1) * blocks],
            &mut row,
        )
        .unwrap();
        all.extend_from_slice(&row);
    }
    let want = 1.0 / (k as f64).sqrt();
    assert!(
        (std_dev(&all) / want - 1.0).abs() < 0.2,
        "FP4 std {} want {want}",
        std_dev(&all)
    );
}

#[test]
fn hash_tables_hold_distinct_experts() {
    let ckpt = Checkpoint::open(base(0)).unwrap();
    let t = ckpt.get("layers.1.ffn.gate.tid2eid").unwrap();
    let ids: Vec<i64> = t
        .bytes
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut seen = [0usize; 8];
    for row in ids.chunks(t.shape[1]) {
        assert!(row.iter().all(|&e| (0..8).contains(&e)), "{row:?}");
        assert_ne!(row[0], row[1], "a token routed twice to one expert");
        for &e in row {
            seen[e as usize] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n > 10_000), "experts unevenly used: {seen:?}");
}

#[test]
fn tokenizer_and_chat_template_files() {
    let dir = base(0);
    let tok = std::fs::read(dir.join("tokenizer.json")).unwrap();
    assert_eq!(tok, synth::tokenizer::TOKENIZER_JSON);
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap()).unwrap();
    assert_eq!(cfg["bos_token"], synth::tokenizer::BOS);
    assert_eq!(cfg["eos_token"], synth::tokenizer::EOS);
    assert!(cfg["chat_template"].as_str().unwrap().contains("<｜User｜>"));
    let plain = write(1, false);
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plain.path().join("tokenizer_config.json")).unwrap()).unwrap();
    assert!(cfg.get("chat_template").is_none());
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = common::copy_of(base(0));
    let mut opts = SynthOptions {
        preset: Preset::Tiny,
        seed: 3,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template: true,
        force: false,
    };
    let err = synth::write(&opts).unwrap_err().to_string();
    assert!(err.contains("pass --force"), "{err}");
    opts.force = true;
    synth::write(&opts).unwrap();
    assert!(weights(dir.path()) != weights(base(0)));
}
