//! The forward pass against `transformers`' DeepseekV4ForCausalLM on the tiny checkpoint (goldens in tests/goldens).

use std::path::PathBuf;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::device::{Device, DeviceSpec};
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::weights::Dsv4Weights;
use tensorfold_model::synth::{self, Preset, SynthOptions};

struct Golden {
    ids: Vec<u32>,
    positions: Vec<usize>,
    logits_last: Vec<f32>,
    top_ids: Vec<i32>,
    top_logits: Vec<f32>,
    greedy: Vec<u32>,
    layers: Vec<Vec<f32>>,
}

fn golden(name: &str) -> Golden {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/goldens/dsv4_tiny/{name}.safetensors"));
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |n: &str| {
        st.tensor(n)
            .unwrap()
            .data()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    let i32s = |n: &str| {
        st.tensor(n)
            .unwrap()
            .data()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<_>>()
    };
    let layers = (0..)
        .map_while(|i| {
            st.tensor(&format!("layer.{i}"))
                .ok()
                .map(|_| f32s(&format!("layer.{i}")))
        })
        .collect();
    Golden {
        ids: i32s("input_ids").into_iter().map(|v| v as u32).collect(),
        positions: i32s("positions").into_iter().map(|v| v as usize).collect(),
        logits_last: f32s("logits_last"),
        top_ids: i32s("top_ids"),
        top_logits: f32s("top_logits"),
        greedy: i32s("greedy").into_iter().map(|v| v as u32).collect(),
        layers,
    }
}

fn model(semantics: Semantics) -> Dsv4Model {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let opts = SynthOptions {
            preset: Preset::Tiny,
            seed: 0,
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
    Dsv4Model::new(ckpt.config, weights, semantics)
}

fn rel(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|&y| (y as f64).powi(2)).sum();
    (num / den).sqrt()
}

fn argmax(row: &[f32]) -> u32 {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32
}

/// Layer streams and logits within this relative-norm bound of transformers (f32 sums in another order).
const REL_BOUND: f64 = 1e-5;

#[test]
fn matches_transformers() {
    check(&Device::Cpu(CpuLaunch::serial()), REL_BOUND);
}

/// Bound on CUDA: the same f32 formulas with other summation orders (GEMM tiles, warp reductions), so the CPU's bound.
const CUDA_REL_BOUND: f64 = 1e-5;

#[test]
fn matches_transformers_on_cuda() {
    match DeviceSpec::Cuda(0).open(1) {
        Ok(device) => check(&device, CUDA_REL_BOUND),
        Err(why) => eprintln!("skipping matches_transformers_on_cuda: {why}"),
    }
}

fn check(device: &Device, bound: f64) {
    let m = model(Semantics::transformers());
    let (d, hc, vocab) = (m.config.hidden_size, m.config.hc_mult, m.config.vocab_size);
    for name in ["short", "long"] {
        let g = golden(name);
        let mut cache = Dsv4Cache::default();
        let mut batch = Batch::default();
        batch.push_seq(SeqSlot(0), 0, &g.ids);
        let out = m.forward(&batch, &mut cache, device.clone(), true).unwrap();
        for (l, want) in g.layers.iter().enumerate() {
            let n = hc * d;
            let got: Vec<f32> = g
                .positions
                .iter()
                .flat_map(|&p| out.layer_streams[l][p * n..(p + 1) * n].to_vec())
                .collect();
            let err = rel(&got, want);
            eprintln!("{name}: layer {l} streams rel err {err:.2e}");
            assert!(err < bound, "{name} layer {l}: {err:e}");
        }
        let last = &out.logits[(g.ids.len() - 1) * vocab..];
        let err = rel(last, &g.logits_last);
        eprintln!("{name}: final logits rel err {err:.2e}");
        assert!(err < bound, "{name} logits: {err:e}");
        for (i, &p) in g.positions.iter().enumerate() {
            let row = &out.logits[p * vocab..(p + 1) * vocab];
            let top = g.top_ids[i * 64] as usize;
            assert_eq!(argmax(row) as usize, top, "{name} position {p}: argmax differs");
            for j in 0..64 {
                let (id, want) = (g.top_ids[i * 64 + j] as usize, g.top_logits[i * 64 + j]);
                assert!(
                    (row[id] - want).abs() < 1e-4,
                    "{name} position {p} token {id}: {} vs {want}",
                    row[id]
                );
            }
        }
        let mut next = argmax(last);
        let mut greedy = vec![next];
        for step in 1..g.greedy.len() {
            let mut b = Batch::default();
            b.push_seq(SeqSlot(0), (g.ids.len() + step - 1) as u32, &[next]);
            let o = m.forward(&b, &mut cache, device.clone(), false).unwrap();
            next = argmax(&o.logits);
            greedy.push(next);
        }
        assert_eq!(greedy, g.greedy, "{name}: greedy continuation differs");
    }
}
