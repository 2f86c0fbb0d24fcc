//! Keyed sampling: the token at position p is a pure function of (logits row, parameters, request key, p).

use tensorfold_kernels::cpu::math::{exp, exp_f64, ln_f64};

use crate::philox;

/// Sampling parameters of one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// 0 means no top-k cut.
    pub top_k: u32,
    /// 1 means no nucleus cut.
    pub top_p: f32,
    /// 0 means no min-p cut.
    pub min_p: f32,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    /// Checks ranges, naming the field and the allowed values.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(format!(
                "temperature must be a finite number >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(format!("min_p must be in [0, 1], got {}", self.min_p));
        }
        Ok(())
    }
}

/// The request key from its prompt when no seed is given: a stable hash of the token ids.
pub fn prompt_key(tokens: &[u32]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ tokens.len() as u64;
    for &t in tokens {
        h = (h ^ t as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 29;
    }
    h
}

/// The highest logit's token, ties to the lowest id (NaN never wins): the rule `logits_argmax` runs on a device.
pub fn argmax(logits: &[f32]) -> u32 {
    tensorfold_kernels::logits_argmax::pick(logits)
}

/// Draws the token at `position` for a request keyed by `key`.
pub fn sample(logits: &[f32], params: &SamplingParams, key: u64, position: u64) -> u32 {
    if params.temperature <= 0.0 {
        return argmax(logits);
    }
    let scaled: Vec<f32> = logits
        .iter()
        .map(|&l| {
            if l.is_nan() {
                f32::NEG_INFINITY
            } else {
                l / params.temperature
            }
        })
        .collect();
    let max = scaled.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut cand: Vec<(f32, u32)> = scaled
        .iter()
        .enumerate()
        .map(|(i, &v)| (exp(v - max), i as u32))
        .filter(|&(w, _)| w > 0.0)
        .collect();
    let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let k = params.top_k as usize;
    if k > 0 && k < cand.len() {
        cand.select_nth_unstable_by(k - 1, order);
        cand.truncate(k);
    }
    cand.sort_unstable_by(order);
    if params.min_p > 0.0 {
        cand.retain(|&(w, _)| w >= params.min_p);
    }
    let total: f64 = cand.iter().map(|&(w, _)| w as f64).sum();
    if params.top_p < 1.0 {
        let cut = params.top_p as f64 * total;
        let mut cum = 0.0;
        let keep = cand
            .iter()
            .position(|&(w, _)| {
                cum += w as f64;
                cum >= cut
            })
            .map_or(cand.len(), |i| i + 1);
        cand.truncate(keep);
    }
    let kept: f64 = cand.iter().map(|&(w, _)| w as f64).sum();
    let target = philox::uniform(key, position, 0) * kept;
    let mut cum = 0.0;
    for &(w, id) in &cand {
        cum += w as f64;
        if cum > target {
            return id;
        }
    }
    cand.last().map_or_else(|| argmax(logits), |&(_, id)| id)
}

/// A pass's logit rows as the engine reads them: the logits (`vocab` a row), or in a greedy round each row's pick alone.
#[derive(Clone, Copy, Debug)]
pub enum LogitRows<'a> {
    Logits(&'a [f32], usize),
    Picks(&'a [u32]),
}

impl<'a> LogitRows<'a> {
    /// Rows held.
    pub fn len(&self) -> usize {
        match self {
            LogitRows::Logits(l, vocab) => l.len() / vocab.max(&1),
            LogitRows::Picks(p) => p.len(),
        }
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows from row `i` on.
    pub fn from(self, i: usize) -> LogitRows<'a> {
        match self {
            LogitRows::Logits(l, vocab) => LogitRows::Logits(&l[i * vocab..], vocab),
            LogitRows::Picks(p) => LogitRows::Picks(&p[i..]),
        }
    }

    /// Row `i`'s logits, where the pass returned them.
    pub fn logits(&self, i: usize) -> Option<&'a [f32]> {
        match *self {
            LogitRows::Logits(l, vocab) => Some(&l[i * vocab..(i + 1) * vocab]),
            LogitRows::Picks(_) => None,
        }
    }

    /// The token drawn from row `i` at `position`: `sample` of its logits, or its pick (greedy rounds only).
    pub fn sample(&self, i: usize, params: &SamplingParams, key: u64, position: u64) -> u32 {
        match *self {
            LogitRows::Logits(l, vocab) => sample(&l[i * vocab..(i + 1) * vocab], params, key, position),
            LogitRows::Picks(p) => {
                assert!(params.temperature <= 0.0, "a pass's pick stands only for a greedy draw");
                p[i]
            }
        }
    }
}

/// Most alternatives a reply may ask for per token.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The log-probability of the chosen token and of the `top` most likely ones under the raw logits.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    pub logprob: f32,
    /// Most likely first, ties to the lowest id.
    pub top: Vec<(u32, f32)>,
}

/// Log-softmax of the raw logits (temperature 1, no cuts) at `chosen` and the `top` best, summed in f64 in id order.
pub fn logprobs(logits: &[f32], chosen: u32, top: usize) -> TokenLogprobs {
    let clean = |l: f32| if l.is_nan() { f64::NEG_INFINITY } else { l as f64 };
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &l| m.max(clean(l)));
    let term = |l: f32| {
        let d = clean(l) - max;
        if d.is_nan() || d < -700.0 { 0.0 } else { exp_f64(d) }
    };
    let sum: f64 = logits.iter().map(|&l| term(l)).sum();
    let lse = if sum > 0.0 { max + ln_f64(sum) } else { f64::INFINITY };
    let lp = |id: u32| (clean(logits[id as usize]) - lse) as f32;
    let k = top.min(logits.len());
    let mut best: Vec<u32> = if k == 0 {
        Vec::new()
    } else {
        (0..logits.len() as u32).collect()
    };
    let order = |a: &u32, b: &u32| {
        clean(logits[*b as usize])
            .total_cmp(&clean(logits[*a as usize]))
            .then(a.cmp(b))
    };
    if k > 0 && k < best.len() {
        best.select_nth_unstable_by(k - 1, order);
    }
    best.truncate(k);
    best.sort_unstable_by(order);
    TokenLogprobs {
        logprob: lp(chosen),
        top: best.into_iter().map(|id| (id, lp(id))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        (0..1000).map(|i| ((i * 7919) % 1000) as f32 / 100.0).collect()
    }

    #[test]
    fn greedy_is_argmax_with_lowest_id_on_ties() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(sample(&[1.0, 3.0, 3.0], &SamplingParams::greedy(), 5, 0), 1);
    }

    #[test]
    fn draws_are_keyed_by_request_and_position() {
        let l = logits();
        let p = SamplingParams {
            temperature: 1.0,
            ..Default::default()
        };
        let a: Vec<u32> = (0..64).map(|pos| sample(&l, &p, 42, pos)).collect();
        let b: Vec<u32> = (0..64).map(|pos| sample(&l, &p, 42, pos)).collect();
        let c: Vec<u32> = (0..64).map(|pos| sample(&l, &p, 43, pos)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().collect::<std::collections::BTreeSet<_>>().len() > 10);
    }

    #[test]
    fn cuts_restrict_the_candidates() {
        let l = logits();
        let top: Vec<u32> = {
            let mut ids: Vec<u32> = (0..1000).collect();
            ids.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]).then(a.cmp(&b)));
            ids
        };
        for pos in 0..200 {
            let t = sample(
                &l,
                &SamplingParams {
                    top_k: 3,
                    ..Default::default()
                },
                9,
                pos,
            );
            assert!(top[..3].contains(&t));
            let t = sample(
                &l,
                &SamplingParams {
                    top_p: 0.05,
                    temperature: 0.5,
                    ..Default::default()
                },
                9,
                pos,
            );
            assert!(top[..20].contains(&t), "{t}");
            let t = sample(
                &l,
                &SamplingParams {
                    min_p: 0.9,
                    ..Default::default()
                },
                9,
                pos,
            );
            assert!(l[t as usize] >= l[top[0] as usize] + 0.9f32.ln() - 1e-6);
        }
    }

    #[test]
    fn logprobs_are_a_log_softmax_with_ordered_alternatives() {
        let l = [1.0f32, 3.0, 3.0, f32::NAN, -2.0];
        let lp = logprobs(&l, 4, 3);
        let z: f64 = [1.0f64, 3.0, 3.0, -2.0].iter().map(|x| x.exp()).sum();
        assert!((lp.logprob as f64 - (-2.0 - z.ln())).abs() < 1e-6);
        let ids: Vec<u32> = lp.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 2, 0]);
        assert_eq!(lp.top[0].1, lp.top[1].1);
        assert!((lp.top[2].1 as f64 - (1.0 - z.ln())).abs() < 1e-6);
        assert_eq!(logprobs(&l, 3, 0).logprob, f32::NEG_INFINITY);
        assert_eq!(logprobs(&l, 0, 9).top.len(), 5);
        assert_eq!(logprobs(&[f32::NAN; 3], 1, 1).logprob, f32::NEG_INFINITY);
    }

    #[test]
    fn ranges_are_validated() {
        assert!(
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingParams {
                top_p: 0.0,
                ..Default::default()
            }
            .validate()
            .unwrap_err()
            .contains("top_p")
        );
        assert!(SamplingParams::default().validate().is_ok());
    }
}
