//! `tensorfold bench exchange`: per layer, the gathers `--tp` does (every head's attention output, every routed slot's expert output) against the all-reduces of `[rows, D]` a reduction-splitting split would do.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use clap::Args;
use tensorfold_model::dsv4::forward::collective::{Collective, ThreadCollective};
use tensorfold_model::synth::Preset;

#[derive(Args)]
pub struct ExchangeArgs {
    /// Model shapes: a synth preset (flash-layers, small, tiny).
    #[arg(long, default_value = "flash-layers")]
    preset: String,
    /// Ranks (threads of this process).
    #[arg(long, default_value_t = 2)]
    tp: usize,
    /// Rows per pass (1 is batch-1 decode).
    #[arg(long, default_value_t = 1)]
    rows: usize,
    /// Layers' worth of exchanges timed per measurement.
    #[arg(long, default_value_t = 200)]
    layers: usize,
}

/// Seconds for `layers` rounds of `f` on every rank, the slowest rank's.
fn time(tp: usize, layers: usize, f: impl Fn(&ThreadCollective) + Send + Sync + 'static) -> f64 {
    let f = Arc::new(f);
    let handles: Vec<_> = ThreadCollective::group(tp)
        .into_iter()
        .map(|c| {
            let f = f.clone();
            std::thread::spawn(move || {
                c.barrier();
                let t = Instant::now();
                for _ in 0..layers {
                    f(&c);
                }
                c.barrier();
                t.elapsed().as_secs_f64()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("rank thread"))
        .fold(0.0, f64::max)
}

pub fn run(a: ExchangeArgs) -> anyhow::Result<()> {
    let c = Preset::parse(&a.preset, Some(1)).map_err(|e| anyhow!(e))?.config();
    let tp = a.tp.max(1);
    if c.num_attention_heads % tp != 0 || c.n_routed_experts % tp != 0 {
        return Err(anyhow!(
            "--tp {tp} does not divide the {} heads and {} experts",
            c.num_attention_heads,
            c.n_routed_experts
        ));
    }
    let (rows, d) = (a.rows, c.hidden_size);
    let attn = rows * c.num_attention_heads * c.head_dim / tp;
    let slots = rows * c.num_experts_per_tok;
    let moe = slots * d / tp;
    let gather = time(tp, a.layers, move |c| {
        std::hint::black_box(c.all_gather(&vec![1.0; attn]));
        std::hint::black_box(c.all_gather(&vec![1.0; moe]));
    });
    let reduce = time(tp, a.layers, move |c| {
        let mut buf = vec![1.0f32; rows * d];
        c.all_reduce_sum(&mut buf);
        c.all_reduce_sum(&mut buf);
        std::hint::black_box(buf);
    });
    let per = |s: f64| s / a.layers as f64 * 1e6;
    println!(
        "preset {} tp {tp} rows {rows}: gather {:.1} us/layer ({} + {} floats per rank), all-reduce {:.1} us/layer (2 x {} floats), ratio {:.2}",
        a.preset,
        per(gather),
        attn,
        moe,
        per(reduce),
        rows * d,
        gather / reduce
    );
    Ok(())
}
