//! The shipped demo model in the engine: held-out perplexity equals what the training script's evaluation reports.

use std::path::PathBuf;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::weights::Dsv4Weights;

/// `tools/train/evaluate.py --windows 4` (transformers 5.24, CPU, f32): mean NLL of the main model and the MTP layer.
const MAIN_NLL: f64 = 4.212246879672818;
const MTP_NLL: f64 = 3.970768148057601;
const WINDOWS: usize = 4;
const SEQ: usize = 512;

fn demo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

fn nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    max + sum.ln() - logits[target as usize] as f64
}

/// Mean NLL of the main model and the MTP layer over the first `WINDOWS` held-out windows.
fn held_out_nll(semantics: Semantics) -> (f64, f64) {
    let ckpt = Dsv4Checkpoint::open(&demo_dir().join("tensorfold-demo")).unwrap();
    let weights = Dsv4Weights::new(&ckpt.weights, &ckpt.config);
    let m = Dsv4Model::new(ckpt.config, weights, semantics);
    let vocab = m.config.vocab_size;
    let bytes = std::fs::read(demo_dir().join("tensorfold-demo-heldout.bin")).unwrap();
    let ids: Vec<u32> = bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
        .collect();
    let launch = CpuLaunch {
        threads: 2,
        ..CpuLaunch::serial()
    };
    let (mut main, mut mtp, mut n_main, mut n_mtp) = (0f64, 0f64, 0usize, 0usize);
    for w in 0..WINDOWS {
        let window = &ids[w * SEQ..(w + 1) * SEQ];
        let mut cache = Dsv4Cache::default();
        let mut batch = Batch::default();
        batch.push_seq(SeqSlot(0), 0, window);
        let out = m.forward(&batch, &mut cache, launch, false).unwrap();
        for t in 0..SEQ - 1 {
            main += nll(&out.logits[t * vocab..(t + 1) * vocab], window[t + 1]);
            n_main += 1;
        }
        let d = m.config.hidden_size * m.config.hc_mult;
        let mut mtp_batch = Batch::default();
        mtp_batch.push_seq(SeqSlot(0), 0, &window[1..]);
        let logits = m
            .forward_mtp(0, &mtp_batch, &out.last_streams[..(SEQ - 1) * d], &mut cache, launch)
            .unwrap();
        for t in 0..SEQ - 2 {
            mtp += nll(&logits[t * vocab..(t + 1) * vocab], window[t + 2]);
            n_mtp += 1;
        }
    }
    assert_eq!((n_main, n_mtp), (2044, 2040));
    (main / n_main as f64, mtp / n_mtp as f64)
}

#[test]
fn held_out_perplexity_matches_the_training_report() {
    let (main, mtp) = held_out_nll(Semantics::transformers());
    eprintln!(
        "engine: main NLL {main:.6} (ppl {:.4}) vs {MAIN_NLL:.6}; MTP NLL {mtp:.6} (ppl {:.4}) vs {MTP_NLL:.6}",
        main.exp(),
        mtp.exp()
    );
    assert!((main - MAIN_NLL).abs() < 1e-4, "main NLL {main} vs {MAIN_NLL}");
    assert!((mtp - MTP_NLL).abs() < 1e-4, "MTP NLL {mtp} vs {MTP_NLL}");
}

#[test]
fn official_semantics_cost_little_perplexity() {
    let (main, mtp) = held_out_nll(Semantics::official());
    eprintln!(
        "official semantics: main NLL {main:.6} (ppl {:.4}), MTP NLL {mtp:.6} (ppl {:.4})",
        main.exp(),
        mtp.exp()
    );
    assert!(
        (main - MAIN_NLL).abs() < 0.02 && (mtp - MTP_NLL).abs() < 0.02,
        "official {main} / {mtp}"
    );
}
