//! Verification: a draft stands only where it equals the keyed sample of the target row before it (law 3).

use crate::sampler::{LogitRows, SamplingParams};

/// The target's tokens from `rows` (the last known token's row, then one row per draft), the first at `position`: drafts while they equal the keyed sample, then the first sample that differs (or the sample after the last draft).
pub fn verify(rows: LogitRows<'_>, drafts: &[u32], sampling: &SamplingParams, key: u64, position: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(drafts.len() + 1);
    for i in 0..rows.len().min(drafts.len() + 1) {
        let token = rows.sample(i, sampling, key, (position + i) as u64);
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
    use crate::sampler::sample;

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
            let rows = LogitRows::Logits(&r, vocab);
            assert_eq!(verify(rows, &serial[..4], &p, 7, 10), serial, "all drafts right");
            let mut wrong = serial[..4].to_vec();
            wrong[2] = (wrong[2] + 1) % vocab as u32;
            assert_eq!(verify(rows, &wrong, &p, 7, 10), serial[..3], "third draft wrong");
            assert_eq!(verify(rows, &[], &p, 7, 10), serial[..1], "no drafts");
        }
    }

    #[test]
    fn greedy_picks_verify_as_their_logits_do() {
        let vocab = 50;
        let r = rows(5, vocab);
        let p = SamplingParams::greedy();
        let picks: Vec<u32> = r.chunks(vocab).map(tensorfold_kernels::logits_argmax::pick).collect();
        let serial: Vec<u32> = (0..5)
            .map(|i| sample(&r[i * vocab..(i + 1) * vocab], &p, 7, 10 + i as u64))
            .collect();
        for drafts in [&serial[..4], &serial[..2], &[]] {
            let by_logits = verify(LogitRows::Logits(&r, vocab), drafts, &p, 7, 10);
            assert_eq!(verify(LogitRows::Picks(&picks), drafts, &p, 7, 10), by_logits);
        }
        let mut wrong = serial[..4].to_vec();
        wrong[1] = (wrong[1] + 1) % vocab as u32;
        assert_eq!(verify(LogitRows::Picks(&picks), &wrong, &p, 7, 10), serial[..2]);
    }
}
