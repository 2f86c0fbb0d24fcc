//! `tensorfold bench forward`: the model in-process on a device: prompt rows per second, batch-1 decode time per token and per layer against the bytes a token reads, beside the device's copy bandwidth.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, anyhow};
use clap::Args;
use serde_json::json;
use tensorfold_kernels::cuda::{self, Mark};
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions, readbacks};
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::{load_model, manifest};

#[derive(Args)]
pub struct ForwardArgs {
    /// Checkpoint folder (e.g. written by `tensorfold synth --preset flash-layers --layers N`).
    #[arg(long)]
    model: PathBuf,
    /// Where the model runs: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: DeviceSpec,
    /// CPU threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Prompt rows in one pass.
    #[arg(long, default_value_t = 64)]
    prompt_tokens: usize,
    /// Timed batch-1 decode steps after the prompt (two untimed steps first: the second records the graphs of repeated shapes).
    #[arg(long, default_value_t = 16)]
    decode_tokens: usize,
    /// Untimed decode steps after the timed ones that record a host and GPU timeline of marks (CUDA only).
    #[arg(long, default_value_t = 8)]
    timeline_tokens: usize,
    /// Add a timeline mark after every kernel launch (graph replays record none inside).
    #[arg(long)]
    timeline_kernels: bool,
    /// Record one more prompt pass's timeline with every kernel launch marked: GPU and host microseconds a label (CUDA only).
    #[arg(long)]
    prompt_timeline: bool,
    /// Launch every decode kernel on its own, without replaying repeated shapes as CUDA graphs.
    #[arg(long)]
    eager: bool,
    /// Read every step's logits back to the host, as a round with sampled or log-probability requests does (default: each step's greedy pick, as a greedy round does).
    #[arg(long)]
    full_logits: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Bytes one decode token reads from the weights: per main layer (everything but the unselected routed experts), and the head.
fn bytes_per_token(model: &Dsv4Model) -> (f64, f64) {
    let c = &model.config;
    let share = c.num_experts_per_tok as f64 / c.n_routed_experts as f64;
    let (mut layers, mut head) = (0f64, 0f64);
    for spec in manifest(c).specs {
        let b = spec.num_bytes() as f64;
        if spec.name.starts_with("layers.") {
            if spec.name.contains(".ffn.gate.tid2eid") {
                continue;
            }
            layers += if spec.name.contains(".ffn.experts.") {
                b * share
            } else {
                b
            };
        } else if spec.name.starts_with("head.") || spec.name.starts_with("hc_head") || spec.name.starts_with("norm.") {
            head += b;
        }
    }
    (layers / c.num_hidden_layers as f64, head)
}

/// One pass over `tokens` from `start`, reading back the last row's logits, or its greedy pick with `picks`.
fn step(
    model: &Dsv4Model,
    cache: &mut Dsv4Cache,
    device: &Device,
    start: usize,
    picks: bool,
    tokens: &[u32],
) -> anyhow::Result<()> {
    let mut b = Batch::default();
    b.push_seq(SeqSlot(0), start as u32, tokens);
    let opts = ForwardOptions {
        keep_layers: false,
        logit_rows: Some(vec![tokens.len() - 1]),
        ranks: None,
        picks,
    };
    model
        .forward_with(&b, cache, device.clone(), &opts)
        .map_err(|e| anyhow!(e))?;
    Ok(())
}

/// A timeline of decode steps: each mark's mean `[label, host us, GPU us]` (when every step recorded the same marks), and per label the marks a step and the GPU microseconds a step before them.
#[derive(Default)]
struct Timeline {
    marks: Vec<(String, f64, f64)>,
    by_label: Vec<(String, f64, f64)>,
    /// Mean microseconds between tokens: host from a step's last mark to the next step's start, GPU from a step's read-back copies to the next step's embedding.
    between: Option<(f64, f64)>,
}

/// Marks recorded over consecutive steps, cut into steps at each `start` (marks before the first dropped), each step's times taken from its own first mark.
fn split_steps(marks: &[Mark]) -> Vec<Vec<Mark>> {
    let mut steps: Vec<Vec<Mark>> = Vec::new();
    for m in marks {
        match (m.label == "start", steps.last_mut()) {
            (true, _) => steps.push(vec![m.clone()]),
            (false, Some(step)) => step.push(m.clone()),
            (false, None) => {}
        }
    }
    for step in &mut steps {
        let (h0, g0) = (step[0].host_us, step[0].gpu_us);
        for m in step.iter_mut() {
            m.host_us -= h0;
            m.gpu_us -= g0;
        }
    }
    steps
}

/// Mean gaps between consecutive steps of `marks` (not rebased): host from a step's last mark to the next `start`, GPU from the step's last `read-back copies` mark to the next `embedded`; None without two whole steps.
fn between_tokens(marks: &[Mark]) -> Option<(f64, f64)> {
    let starts: Vec<usize> = (0..marks.len()).filter(|&i| marks[i].label == "start").collect();
    let (mut host, mut gpu, mut n) = (0.0, 0.0, 0.0);
    for w in starts.windows(2) {
        let (prev, next) = (&marks[w[0]..w[1]], &marks[w[1]..]);
        let copies = prev.iter().rev().find(|m| m.label.ends_with("read-back copies"))?;
        let embedded = next.iter().find(|m| m.label == "embedded")?;
        host += marks[w[1]].host_us - prev.last()?.host_us;
        gpu += embedded.gpu_us - copies.gpu_us;
        n += 1.0;
    }
    (n > 0.0).then(|| (host / n, gpu / n))
}

/// The timeline of `steps` decode steps from `pos` (picks as `step`), kernel launches marked too when `kernels`.
fn timeline(
    model: &Dsv4Model,
    cache: &mut Dsv4Cache,
    device: &Device,
    pos: usize,
    picks: bool,
    steps: usize,
    kernels: bool,
) -> anyhow::Result<Timeline> {
    let Some(c) = device.cuda().filter(|_| steps > 0) else {
        return Ok(Timeline::default());
    };
    // One recording over every step, so the gaps between tokens are as they run.
    cuda::record_marks(true, kernels);
    let mut r = Ok(());
    for i in 0..steps {
        r = step(
            model,
            cache,
            device,
            pos + i,
            picks,
            &[(i * 17 % model.config.vocab_size) as u32],
        );
        if r.is_err() {
            break;
        }
    }
    cuda::record_marks(false, false);
    let all = c.gpu.take_marks().map_err(|e| anyhow!(e))?;
    r?;
    let runs = split_steps(&all);
    let n = runs.len().max(1) as f64;
    let by_label = label_times(&runs).into_iter().map(|(l, c, g, _)| (l, c, g)).collect();
    let same = !runs.is_empty() && runs.windows(2).all(|w| w[0].len() == w[1].len());
    let marks = match same {
        true => (0..runs[0].len())
            .map(|i| {
                let mean = |f: fn(&Mark) -> f64| runs.iter().map(|r| f(&r[i])).sum::<f64>() / n;
                (runs[0][i].label.clone(), mean(|m| m.host_us), mean(|m| m.gpu_us))
            })
            .collect(),
        false => Vec::new(),
    };
    Ok(Timeline {
        marks,
        by_label,
        between: between_tokens(&all),
    })
}

/// Per label over `runs`: the marks a run, and the mean GPU and host microseconds a run between each such mark and the mark before it, most GPU time first.
fn label_times(runs: &[Vec<Mark>]) -> Vec<(String, f64, f64, f64)> {
    let n = runs.len().max(1) as f64;
    let mut by_label: Vec<(String, f64, f64, f64)> = Vec::new();
    for run in runs {
        for w in run.windows(2) {
            let at = match by_label.iter().position(|(l, ..)| *l == w[1].label) {
                Some(at) => at,
                None => {
                    by_label.push((w[1].label.clone(), 0.0, 0.0, 0.0));
                    by_label.len() - 1
                }
            };
            by_label[at].1 += 1.0 / n;
            by_label[at].2 += (w[1].gpu_us - w[0].gpu_us) / n;
            by_label[at].3 += (w[1].host_us - w[0].host_us) / n;
        }
    }
    by_label.sort_by(|a, b| b.2.total_cmp(&a.2));
    by_label
}

/// One prompt pass of `prompt` on a fresh cache with every launch marked: its label times (as `label_times`) and its last mark's host and GPU microseconds from its start; None off CUDA.
fn prompt_timeline(
    model: &Dsv4Model,
    device: &Device,
    picks: bool,
    prompt: &[u32],
) -> anyhow::Result<Option<PromptTimeline>> {
    let Some(c) = device.cuda() else {
        return Ok(None);
    };
    let mut cache = Dsv4Cache::default();
    cuda::record_marks(true, true);
    let r = step(model, &mut cache, device, 0, picks, prompt);
    cuda::record_marks(false, false);
    let all = c.gpu.take_marks().map_err(|e| anyhow!(e))?;
    r?;
    let runs = split_steps(&all);
    let end = runs
        .first()
        .and_then(|r| r.last())
        .map_or((0.0, 0.0), |m| (m.host_us, m.gpu_us));
    Ok(Some(PromptTimeline {
        by_label: label_times(&runs),
        end,
    }))
}

/// A prompt pass's timeline: per label (marks, GPU us, host us), and the last mark's (host us, GPU us).
struct PromptTimeline {
    by_label: Vec<(String, f64, f64, f64)>,
    end: (f64, f64),
}

/// CUDA graph launches so far on `device` (none on the CPU).
fn graph_launches(device: &Device) -> u64 {
    device.cuda().map_or(0, |c| c.graph_launches())
}

/// Copies made ahead of graph replays so far: (input streams, integers).
fn graph_copies(device: &Device) -> (u64, u64) {
    device.cuda().map_or((0, 0), |c| c.graph_copies_in())
}

pub fn run(args: ForwardArgs) -> anyhow::Result<()> {
    let model =
        load_model(&args.model, Semantics::official()).with_context(|| format!("loading {}", args.model.display()))?;
    let device = args.device.open(args.threads).map_err(|e| anyhow!(e))?;
    if let (Device::Cuda(c), true) = (&device, args.eager) {
        c.set_graphs(false);
    }
    let t = Instant::now();
    let resident = model.upload(&device).map_err(|e| anyhow!(e))?;
    let upload_s = t.elapsed().as_secs_f64();
    let c = &model.config;
    let prompt: Vec<u32> = (0..args.prompt_tokens.max(1))
        .map(|i| (i * 7919 % c.vocab_size) as u32)
        .collect();
    let picks = !args.full_logits;
    let mut cache = Dsv4Cache::default();
    let t = Instant::now();
    step(&model, &mut cache, &device, 0, picks, &prompt)?;
    let first_prompt_s = t.elapsed().as_secs_f64();
    let mut cache2 = Dsv4Cache::default();
    let t = Instant::now();
    step(&model, &mut cache2, &device, 0, picks, &prompt)?;
    let prompt_s = t.elapsed().as_secs_f64();
    let mut pos = prompt.len();
    for _ in 0..2 {
        step(&model, &mut cache, &device, pos, picks, &[1])?;
        pos += 1;
    }
    let (reads0, wait0) = readbacks();
    let (graphs0, copies0) = (graph_launches(&device), graph_copies(&device));
    let t = Instant::now();
    for i in 0..args.decode_tokens {
        step(
            &model,
            &mut cache,
            &device,
            pos,
            picks,
            &[(i * 31 % c.vocab_size) as u32],
        )?;
        pos += 1;
    }
    let decode_s = t.elapsed().as_secs_f64() / args.decode_tokens.max(1) as f64;
    let (reads1, wait1) = readbacks();
    let graphs = (graph_launches(&device) - graphs0) as f64;
    let copies = graph_copies(&device);
    let copies = [(copies.0 - copies0.0) as f64, (copies.1 - copies0.1) as f64];
    let marks = timeline(
        &model,
        &mut cache,
        &device,
        pos,
        picks,
        args.timeline_tokens,
        args.timeline_kernels,
    )?;
    let prompt_marks = match args.prompt_timeline {
        true => prompt_timeline(&model, &device, picks, &prompt)?,
        false => None,
    };
    let tenth = |v: f64| (v * 10.0).round() / 10.0;
    let prompt_by_label: Vec<_> = prompt_marks
        .iter()
        .flat_map(|p| &p.by_label)
        .map(|(l, c, g, h)| json!([l, tenth(*c), tenth(*g), tenth(*h)]))
        .collect();
    let prompt_end = prompt_marks.as_ref().map(|p| [tenth(p.end.0), tenth(p.end.1)]);
    let round = |(label, a, b): (String, f64, f64)| json!([label, tenth(a), tenth(b)]);
    let between = marks.between;
    let by_label: Vec<_> = marks.by_label.into_iter().map(round).collect();
    let marks: Vec<_> = marks.marks.into_iter().map(round).collect();
    let per_token = args.decode_tokens.max(1) as f64;
    let (layer_bytes, head_bytes) = bytes_per_token(&model);
    let layers = c.num_hidden_layers as f64;
    let layer_ms = decode_s * 1e3 / layers;
    let copy = match &device {
        Device::Cuda(d) => Some(d.gpu.copy_bandwidth(1 << 30, 10).map_err(|e| anyhow!(e))?),
        Device::Cpu(_) => None,
    };
    let token_gbs = (layer_bytes * layers + head_bytes) / decode_s / 1e9;
    let refused = match &device {
        Device::Cuda(_) => tensorfold_kernels::cuda::chaining(),
        Device::Cpu(_) => (0, Vec::new()),
    };
    let report = json!({
        "device": DeviceSpec::describe(&device),
        "layers": c.num_hidden_layers,
        "prompt_tokens": prompt.len(),
        "upload_s": upload_s,
        "resident_gb": resident as f64 / 1e9,
        "first_prompt_s": first_prompt_s,
        "prompt_tokens_per_s": prompt.len() as f64 / prompt_s,
        "decode_ms_per_token": decode_s * 1e3,
        "decode_ms_per_layer": layer_ms,
        "decode_reads_back": if picks { "picks" } else { "logits" },
        "decode_readbacks_per_token": (reads1 - reads0) as f64 / per_token,
        "decode_readback_ms_per_token": (wait1 - wait0) * 1e3 / per_token,
        "decode_graph_launches_per_token": graphs / per_token,
        "decode_graph_copies_in_per_token": [copies[0] / per_token, copies[1] / per_token],
        "graph_programmatic_edges": device.cuda().map_or(0, |c| c.graph_programmatic_edges()),
        "graph_chained_captures_failed": refused.0,
        "graph_chain_failures": refused.1,
        "weight_mb_per_layer_token": layer_bytes / 1e6,
        "head_mb_per_token": head_bytes / 1e6,
        "decode_weight_gbs": token_gbs,
        "device_copy_gbs": copy.map(|b| b / 1e9),
        "decode_share_of_copy_bandwidth": copy.map(|b| token_gbs * 1e9 / b),
        "decode_timeline_host_gpu_us": marks,
        "decode_timeline_by_label_count_gpu_us": by_label,
        "prompt_timeline_end_host_gpu_us": prompt_end,
        "prompt_timeline_by_label_count_gpu_host_us": prompt_by_label,
        "decode_timeline_between_tokens_host_gpu_us": between.map(|(h, g)| [tenth(h), tenth(g)]),
    });
    if args.json {
        println!("{report}");
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(label: &str, host_us: f64, gpu_us: f64) -> Mark {
        Mark {
            label: label.into(),
            host_us,
            gpu_us,
        }
    }

    /// Two steps as one recording: a stray mark first, then each step's start, embedding, copies and last mark.
    fn two_steps() -> Vec<Mark> {
        vec![
            mark("stray", 0.0, 0.0),
            mark("start", 10.0, 12.0),
            mark("embedded", 30.0, 40.0),
            mark("12 read-back copies", 900.0, 1500.0),
            mark("cache written", 1600.0, 1601.0),
            mark("start", 1650.0, 1652.0),
            mark("embedded", 1675.0, 1690.0),
            mark("12 read-back copies", 2500.0, 3100.0),
            mark("cache written", 3200.0, 3201.0),
        ]
    }

    #[test]
    fn steps_split_at_each_start_and_time_from_it() {
        let steps = split_steps(&two_steps());
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0][0], mark("start", 0.0, 0.0));
        assert_eq!(steps[1][1], mark("embedded", 25.0, 38.0));
        assert!(steps.iter().all(|s| s.len() == 4));
        assert!(split_steps(&[mark("stray", 1.0, 1.0)]).is_empty());
    }

    #[test]
    fn gaps_between_tokens_run_from_copies_and_last_mark_to_the_next_step() {
        assert_eq!(between_tokens(&two_steps()), Some((50.0, 190.0)));
        assert_eq!(between_tokens(&two_steps()[..5]), None);
    }

    #[test]
    fn label_times_average_each_label_over_runs_most_gpu_time_first() {
        let times = label_times(&split_steps(&two_steps()));
        let want = [
            ("12 read-back copies", 1.0, 1435.0, 847.5),
            ("cache written", 1.0, 101.0, 700.0),
            ("embedded", 1.0, 33.0, 22.5),
        ];
        assert_eq!(times.len(), want.len());
        for ((label, count, gpu, host), (wl, wc, wg, wh)) in times.iter().zip(want) {
            assert_eq!((label.as_str(), *count, *gpu, *host), (wl, wc, wg, wh));
        }
        assert!(label_times(&[]).is_empty());
    }
}
