//! CPU `dspark_markov`: rows split over threads; the previous token's Markov embedding widened once, then a fixed-lane dot per vocab entry.

use crate::cpu::{CpuLaunch, dot, par_chunks_mut};
use crate::faults::Faults;

/// Little-endian bf16 bytes to f32, exactly.
fn widen(bytes: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

/// `logits[r, v] += head[v] . embed[prev[r]]` for bf16 `embed` and `head` of `[vocab, rank]` (the checkpoint's bytes).
pub fn dspark_markov(
    embed: &[u8],
    head: &[u8],
    rank: usize,
    prev: &[i32],
    logits: &mut [f32],
    launch: &CpuLaunch,
    faults: Faults,
) {
    assert!(rank > 0, "dspark_markov: rank is 0");
    assert_eq!(embed.len(), head.len(), "dspark_markov: embed and head differ in size");
    assert!(
        embed.len().is_multiple_of(2 * rank),
        "dspark_markov: tables are not whole rows of {rank} bf16 values"
    );
    let vocab = embed.len() / (2 * rank);
    assert_eq!(
        logits.len(),
        prev.len() * vocab,
        "dspark_markov: logits are not [rows, {vocab}]"
    );
    assert!(
        prev.iter().all(|&t| t >= 0 && (t as usize) < vocab),
        "dspark_markov: a previous token lies outside the vocab of {vocab}"
    );
    let off_by_one = faults.on("prev_off_by_one");
    let used = if faults.on("drop_last_rank") { rank - 1 } else { rank };
    let skip_last_vocab = faults.on("skip_last_vocab");
    par_chunks_mut(logits, vocab, launch.split_threads(logits.len()), |first, chunk| {
        let (mut e, mut h) = (vec![0f32; rank], vec![0f32; rank]);
        for (i, y) in chunk.chunks_mut(vocab).enumerate() {
            let t = prev[first + i] as usize;
            let t = if off_by_one { (t + 1) % vocab } else { t };
            widen(&embed[2 * t * rank..2 * (t + 1) * rank], &mut e);
            let last = if skip_last_vocab { vocab - 1 } else { vocab };
            for (v, o) in y[..last].iter_mut().enumerate() {
                widen(&head[2 * v * rank..2 * (v + 1) * rank], &mut h);
                *o += dot(&h[..used], &e[..used], launch.simd);
            }
        }
    });
}
