//! `engram_hash`: DeepSeek V4.1 Engram's n-gram hash, `row = (xor_{s<=n} t_s * m_s) mod P_head + offset_head` for n-grams 2..max.

mod cpu;
mod cuda;

pub use cpu::engram_hash;
pub use cuda::engram_hash_cuda;

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

/// V4.1-Flash's compressed vocabulary; multipliers stay below i64::MAX / this so products never overflow.
const COMPRESSED_VOCAB: u64 = 99_092;

fn is_prime(n: u64) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d))
}

pub struct EngramHash;

impl Kernel for EngramHash {
    fn name(&self) -> &'static str {
        "engram_hash"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "integer hashing: exact",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, max_ngram, n_heads, base) in [
            (1, 4, 8, 16_000_000),
            (17, 4, 8, 1000),
            (31, 2, 1, 7),
            (257, 3, 3, 100_000),
            (5, 4, 8, 16_000_000),
        ] {
            cases.push(Case::new(
                rows,
                &[("max_ngram", max_ngram), ("n_heads", n_heads), ("base", base)],
            ));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (max_ngram, n_heads, base) = (case.get("max_ngram"), case.get("n_heads"), case.get("base") as u64);
        let half_bound = i64::MAX as u64 / COMPRESSED_VOCAB / 2;
        let mults: Vec<u64> = (0..max_ngram).map(|_| rng.below(half_bound) * 2 + 1).collect();
        let mut primes = Vec::new();
        let mut p = base;
        while primes.len() < (max_ngram - 1) * n_heads {
            if is_prime(p) {
                primes.push(p as i32);
            }
            p += 1;
        }
        // Pad-filled look-backs (the pad's compressed id) at the sequence start, a repeated token, then random ids.
        let tokens: Vec<i32> = (0..case.rows * max_ngram)
            .map(|i| match (i / max_ngram, i % max_ngram) {
                (0, s) if s > 0 => 2,
                (1, _) => 7,
                _ => rng.below(COMPRESSED_VOCAB) as i32,
            })
            .collect();
        vec![
            Arg::per_row("tokens", Buf::I32(tokens), max_ngram),
            Arg::shared(
                "multipliers",
                Buf::U8(mults.iter().flat_map(|m| m.to_le_bytes()).collect()),
            ),
            Arg::shared("primes", Buf::I32(primes)),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "rows",
            kind: OutKind::I32,
            row_len: (case.get("max_ngram") - 1) * case.get("n_heads"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let (max_ngram, n_heads) = (case.get("max_ngram"), case.get("n_heads"));
        let tokens = inputs[0].buf.i32();
        let mults: Vec<i128> = multipliers(&inputs[1]).iter().map(|&m| m as i128).collect();
        let primes: Vec<i128> = inputs[2].buf.i32().iter().map(|&p| p as i128).collect();
        let mut y = Vec::new();
        for t in tokens.chunks(max_ngram) {
            for n in 2..=max_ngram {
                let mix = (0..n).fold(0i128, |acc, s| acc ^ (t[s] as i128 * mults[s]));
                for h in 0..n_heads {
                    let head = (n - 2) * n_heads + h;
                    let offset: i128 = primes[..head].iter().sum();
                    y.push((mix % primes[head] + offset) as f64);
                }
            }
        }
        vec![y]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["no_offset", "last_gram_only", "stale_mix"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (tokens, primes, n_heads) = (inputs[0].buf.i32(), inputs[2].buf.i32(), case.get("n_heads"));
        let mults = multipliers(&inputs[1]);
        match launch {
            Launch::Cpu(l) => engram_hash(tokens, &mults, primes, n_heads, out[0].i32(), l, faults),
            Launch::Cuda(c) => engram_hash_cuda(c, tokens, &mults, primes, n_heads, out[0].i32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}

/// The shared multipliers, stored as little-endian u64 bytes.
fn multipliers(arg: &Arg) -> Vec<u64> {
    arg.buf
        .u8()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}
