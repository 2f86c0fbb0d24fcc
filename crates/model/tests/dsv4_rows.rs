//! Row independence: a sequence's logits are the same bits in any chunking, beside any other rows, on 1 or 2 threads.

mod common;

use tensorfold_kernels::cpu::{CpuLaunch, SimdPath};
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::semantics::Semantics;

fn model() -> Dsv4Model {
    common::tiny_dsv4(3, Semantics::official())
}

fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 7919 + salt * 104_729) % 129_000 + 3)
        .collect()
}

/// Logit bits of `tokens` fed in chunks of `chunk`, each chunk beside a chunk of `other` (another sequence).
fn run(m: &Dsv4Model, tokens: &[u32], chunk: usize, other: Option<&[u32]>, launch: CpuLaunch) -> Vec<u32> {
    let vocab = m.config.vocab_size;
    let mut cache = Dsv4Cache::default();
    let mut bits = Vec::new();
    for (c, part) in tokens.chunks(chunk).enumerate() {
        let start = (c * chunk) as u32;
        let mut b = Batch::default();
        if let Some(o) = other {
            let o_part = &o[(c * chunk).min(o.len())..((c + 1) * chunk).min(o.len())];
            b.push_seq(SeqSlot(9), start.min(o.len() as u32), o_part);
        }
        b.push_seq(SeqSlot(1), start, part);
        let out = m.forward(&b, &mut cache, launch, false).unwrap();
        let first = b.len() - part.len();
        bits.extend(out.logits[first * vocab..].iter().map(|v| v.to_bits()));
    }
    bits
}

#[test]
fn chunking_neighbours_and_threads_do_not_change_bits() {
    let m = model();
    let tokens = prompt(150, 1);
    let neighbour = prompt(150, 2);
    let serial = CpuLaunch::serial();
    let whole = run(&m, &tokens, tokens.len(), None, serial);
    for chunk in [1, 7, 64] {
        assert!(
            run(&m, &tokens, chunk, None, serial) == whole,
            "chunks of {chunk} differ from one chunk"
        );
    }
    assert!(
        run(&m, &tokens, 7, Some(&neighbour), serial) == whole,
        "a neighbouring sequence changed the bits"
    );
    let two = CpuLaunch {
        threads: 2,
        simd: SimdPath::Portable,
        tile_rows: 8,
        split_min: 0,
        gemv_simd: None,
        packed: false,
    };
    assert!(
        run(&m, &tokens, 64, Some(&neighbour), two) == whole,
        "2 threads and the portable path changed the bits"
    );
}
