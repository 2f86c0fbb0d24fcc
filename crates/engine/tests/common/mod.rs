//! Shared by the engine's integration tests: the tiny synth model, an engine on it, and request recorders.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tensorfold_engine::runner::Dsv4Runner;
use tensorfold_engine::{Engine, EngineConfig, Event, FinishReason, GenerateParams, Usage};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::weights::Dsv4Weights;
use tensorfold_model::synth::{self, Preset, SynthOptions};

pub fn model() -> Dsv4Model {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let opts = SynthOptions {
            preset: Preset::Tiny,
            seed: 5,
            out: dir.path().to_path_buf(),
            shard_bytes: synth::DEFAULT_SHARD_BYTES,
            chat_template: true,
            force: false,
        };
        synth::write(&opts).unwrap();
        dir
    });
    let ckpt = Dsv4Checkpoint::open(dir.path()).unwrap();
    let weights = Dsv4Weights::new(&ckpt.weights, &ckpt.config);
    Dsv4Model::new(ckpt.config, weights, Semantics::official())
}

/// An engine on the tiny model, on the device `TENSORFOLD_TEST_DEVICE` names (`cpu` by default; `cuda` runs these suites on the GPU).
pub fn engine(cfg: EngineConfig, threads: usize) -> Engine {
    let launch = CpuLaunch {
        threads,
        ..CpuLaunch::serial()
    };
    let spec = std::env::var("TENSORFOLD_TEST_DEVICE").unwrap_or_else(|_| "cpu".into());
    let device = match spec.parse::<DeviceSpec>() {
        Ok(DeviceSpec::Cpu) => Device::Cpu(launch),
        Ok(cuda) => cuda
            .open(threads)
            .unwrap_or_else(|e| panic!("TENSORFOLD_TEST_DEVICE={spec}: {e}")),
        Err(e) => panic!("TENSORFOLD_TEST_DEVICE={spec}: {e}"),
    };
    engine_on(cfg, device)
}

pub fn engine_on(cfg: EngineConfig, device: Device) -> Engine {
    Engine::new(Box::new(Dsv4Runner::new(model(), device)), cfg)
}

/// A fresh CUDA device for a test, or `None` after printing why the test skips.
pub fn cuda(test: &str) -> Option<Device> {
    match DeviceSpec::Cuda(0).open(1) {
        Ok(d) => Some(d),
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

/// Everything a request's sink saw, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Done {
    pub tokens: Vec<u32>,
    pub positions: Vec<u32>,
    /// Bits of each token's logprob and its alternatives, when asked for.
    pub logprobs: Vec<(u32, Vec<(u32, u32)>)>,
    pub reason: Option<FinishReason>,
    pub usage: Usage,
    pub sha: String,
    pub errors: Vec<String>,
    /// Terminal events (Finished or Error) seen; exactly one is right.
    pub ends: usize,
    /// Events after the terminal one; zero is right.
    pub late: usize,
}

pub type Rec = Arc<Mutex<Done>>;

/// A sink recording into a fresh `Done`.
pub fn recorder() -> (Rec, Box<dyn FnMut(Event) + Send>) {
    let done = Arc::new(Mutex::new(Done::default()));
    let d = done.clone();
    let sink = Box::new(move |ev| {
        let mut d = d.lock().unwrap();
        if d.ends > 0 {
            d.late += 1;
        }
        match ev {
            Event::Token { id, position, logprobs } => {
                d.tokens.push(id);
                d.positions.push(position);
                if let Some(lp) = logprobs {
                    let top = lp.top.iter().map(|&(t, l)| (t, l.to_bits())).collect();
                    d.logprobs.push((lp.logprob.to_bits(), top));
                }
            }
            Event::Finished {
                reason,
                usage,
                token_sha,
            } => {
                d.ends += 1;
                d.reason = Some(reason);
                d.usage = usage;
                d.sha = token_sha;
            }
            Event::Error(e) => {
                d.ends += 1;
                d.errors.push(e);
            }
        }
    });
    (done, sink)
}

pub fn submit(e: &mut Engine, prompt: Vec<u32>, params: GenerateParams) -> Rec {
    let (done, sink) = recorder();
    e.submit(prompt, params, sink).unwrap();
    done
}

pub fn drain(e: &mut Engine) {
    while e.has_work() {
        assert!(e.step(), "work left but nothing ran");
    }
}

/// Blocks the engine holds out of the pool for the state one request on the tiny model keeps outside its blocks.
pub fn state_blocks() -> usize {
    let m = model();
    (tensorfold_model::dsv4::cache::SeqCache::max_floats(&m.config, 0) * size_of::<f32>()).div_ceil(m.layout.bytes())
}

/// A pool with `blocks` blocks for tokens beside the blocks one running request's state takes.
pub fn pool(blocks: usize) -> usize {
    blocks + state_blocks()
}

pub fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 7919 + salt * 104_729) % 129_000 + 3)
        .collect()
}
