//! Verification: a draft stands only where it equals the keyed sample of the target row before it (law 3).

use crate::sampler::{SamplingParams, sample};

/// The target's tokens from `rows` (logits of the last known token's row, then one row per draft), the first at `position`: drafts while they equal the keyed sample, then the first sample that differs (or the sample after the last draft).
pub fn verify(
    rows: &[f32],
    vocab: usize,
    drafts: &[u32],
    sampling: &SamplingParams,
    key: u64,
    position: usize,
) -> Vec<u32> {
    let mut out = Vec::with_capacity(drafts.len() + 1);
    for (i, row) in rows.chunks_exact(vocab).take(drafts.len() + 1).enumerate() {
        let token = sample(row, sampling, key, (position + i) as u64);
        out.push(token);
        if drafts.get(i) != Some(&token) {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows whose logits favour a different token each, so samples vary with the row and the position.
    fn rows(n: usize, vocab: usize) -> Vec<f32> {
        (0..n * vocab)
            .map(|i| (((i / vocab) * 31 + (i % vocab) * 17) % 23) as f32 / 4.0)
            .collect()
    }

    #[test]
    fn verified_tokens_are_the_serial_samples_at_every_temperature() {
        let vocab = 50;
        let r = rows(5, vocab);
        for temperature in [0.0, 0.7, 1.0] {
            let p = SamplingParams {
                temperature,
                ..Default::default()
            };
            let serial: Vec<u32> = (0..5)
                .map(|i| sample(&r[i * vocab..(i + 1) * vocab], &p, 7, 10 + i as u64))
                .collect();
            assert_eq!(verify(&r, vocab, &serial[..4], &p, 7, 10), serial, "all drafts right");
            let mut wrong = serial[..4].to_vec();
            wrong[2] = (wrong[2] + 1) % vocab as u32;
            assert_eq!(verify(&r, vocab, &wrong, &p, 7, 10), serial[..3], "third draft wrong");
            assert_eq!(verify(&r, vocab, &[], &p, 7, 10), serial[..1], "no drafts");
        }
    }
}
