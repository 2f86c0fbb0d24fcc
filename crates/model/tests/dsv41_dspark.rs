//! DSpark drafting on the V4.1 tiny synth: block drafts are deterministic (they only read the cache), rows run under a mark and settled back leave the rings as if never drafted, drafts agree with the float64 reference.

mod common;

use sha2::{Digest, Sha256};
use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::{Dsv4Cache, Stage};
use tensorfold_model::dsv4::forward::ForwardOptions;
use tensorfold_model::dsv41::forward::Dsv41Model;
use tensorfold_model::dsv41::forward::dspark::Draft;

const DRAFTED: SeqSlot = SeqSlot(0);
const SERIAL: SeqSlot = SeqSlot(1);

fn model() -> Dsv41Model {
    common::tiny_dsv41(7)
}

fn tokens(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 7919 + salt * 104_729) % 129_000 + 3)
        .collect()
}

fn feed(m: &Dsv41Model, cache: &mut Dsv4Cache, seq: SeqSlot, tokens: &[u32], launch: CpuLaunch) -> Vec<f32> {
    let mut batch = Batch::default();
    batch.push_seq(seq, cache.seqs.get(&seq).map_or(0, |s| s.len), tokens);
    m.forward_with(&batch, cache, launch, &ForwardOptions::default())
        .unwrap()
        .logits
}

/// Greedy drafts (argmax, lowest id on ties) of each lane, with their confidences.
fn draft(m: &Dsv41Model, cache: &Dsv4Cache, lanes: &[(SeqSlot, u32)], launch: CpuLaunch) -> Vec<Vec<Draft>> {
    let mut pick = |_: usize, _: usize, logits: &[f32]| {
        let best = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        logits.iter().position(|&v| v == best).unwrap() as u32
    };
    m.dspark_draft(lanes, cache, launch, &mut pick).unwrap()
}

fn bits(d: &[Vec<Draft>]) -> Vec<(u32, u32)> {
    d.iter().flatten().map(|d| (d.token, d.confidence.to_bits())).collect()
}

/// Every window row of every layer and ring of `seq`, as bits.
fn windows(m: &Dsv41Model, cache: &Dsv4Cache, seq: SeqSlot) -> Vec<Vec<u32>> {
    let layers = m.config.num_hidden_layers + m.config.num_nextn_predict_layers;
    (0..layers)
        .map(|l| {
            let rows = cache.window_rows(seq, l, &m.config, &m.layout);
            rows.iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

#[test]
fn dspark_blocks_are_deterministic() {
    let m = model();
    assert!(m.weights.dspark.is_some(), "the tiny synth has DSpark stages");
    let mut cache = Dsv4Cache::default();
    feed(&m, &mut cache, DRAFTED, &tokens(40, 1), CpuLaunch::serial());
    feed(&m, &mut cache, SERIAL, &tokens(9, 2), CpuLaunch::serial());
    let lanes = [(DRAFTED, 17), (SERIAL, 4242)];
    let first = draft(&m, &cache, &lanes, CpuLaunch::serial());
    assert_eq!(first.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5], "blocks of 5");
    assert!(first.iter().flatten().all(|d| d.confidence > 0.0 && d.confidence < 1.0));
    let threads = CpuLaunch {
        threads: 3,
        ..CpuLaunch::serial()
    };
    assert_eq!(bits(&draft(&m, &cache, &lanes, threads)), bits(&first), "threads");
    let alone = draft(&m, &cache, &lanes[1..], CpuLaunch::serial());
    assert_eq!(
        bits(&alone),
        bits(&first[1..]),
        "a lane drafts alike alone and with another"
    );
    let other = draft(&m, &cache, &[(DRAFTED, 18)], CpuLaunch::serial());
    assert_ne!(bits(&other), bits(&first[..1]), "the block reads its first token");
}

#[test]
fn a_rejected_block_rolls_back_to_never_drafted() {
    let m = model();
    let c = &m.config;
    let prompt = tokens(37, 3);
    let mut cache = Dsv4Cache::default();
    for seq in [DRAFTED, SERIAL] {
        feed(&m, &mut cache, seq, &prompt, CpuLaunch::serial());
    }
    let block = tokens(5, 4);
    let keep = 2;
    // Five drafted rows overwrite ring slots the next draft reads (the window is 16).
    assert!(c.sliding_window < prompt.len() + block.len());
    cache.mark(DRAFTED, Stage::Main, block.len(), &m.config, &m.layout);
    feed(&m, &mut cache, DRAFTED, &block, CpuLaunch::serial());
    cache.settle(DRAFTED, (prompt.len() + keep) as u32, &m.config, &m.layout);
    feed(&m, &mut cache, SERIAL, &block[..keep], CpuLaunch::serial());
    assert_eq!(cache.seqs[&DRAFTED], cache.seqs[&SERIAL], "sequence state");
    let same = windows(&m, &cache, DRAFTED) == windows(&m, &cache, SERIAL);
    assert!(same, "the windows and rings differ from a serial run's");
    let lanes = |s| [(s, 99)];
    assert_eq!(
        bits(&draft(&m, &cache, &lanes(DRAFTED), CpuLaunch::serial())),
        bits(&draft(&m, &cache, &lanes(SERIAL), CpuLaunch::serial())),
        "the next block"
    );
    let next = tokens(3, 5);
    let a = feed(&m, &mut cache, DRAFTED, &next, CpuLaunch::serial());
    let b = feed(&m, &mut cache, SERIAL, &next, CpuLaunch::serial());
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "next logits");
}

fn golden(name: &str) -> Vec<u8> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../tests/goldens/dsv41_tiny/dspark_{name}.safetensors"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run tools/reference/dsv41_dspark_f64.py", path.display()))
}

fn golden_ints(st: &safetensors::SafeTensors, name: &str) -> Vec<u32> {
    let t = st.tensor(name).unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::I32, "golden tensor {name}");
    t.data()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect()
}

fn golden_floats(st: &safetensors::SafeTensors, name: &str) -> Vec<f64> {
    let t = st.tensor(name).unwrap();
    match t.dtype() {
        safetensors::Dtype::F64 => t
            .data()
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        _ => t
            .data()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
    }
}

/// Draft logits within this relative-norm bound of the float64 reference: f32 sums through the target layers, the rings and three stage blocks.
const DRAFT_REL_BOUND: f64 = 2e-6;
/// Confidences (sigmoids) within this of the reference.
const CONFIDENCE_ABS_BOUND: f64 = 2e-6;

#[test]
fn dspark_drafts_match_the_reference() {
    let dir = common::tiny_dsv41_dir(0);
    let sha = Sha256::digest(std::fs::read(dir.path().join("model.safetensors")).unwrap());
    let m = tensorfold_model::dsv41::forward::load_model(dir.path()).unwrap();
    let vocab = m.config.vocab_size;
    for name in ["short", "long"] {
        let bytes = golden(name);
        let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        let made_from = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get("checkpoint_sha256"))
            .cloned();
        assert_eq!(
            made_from,
            Some(format!("{sha:x}")),
            "{name}: synth tiny seed 0 changed; regenerate the goldens"
        );
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (ids, y) = (golden_ints(&st, "input_ids"), golden_ints(&st, "y")[0]);
        let mut cache = Dsv4Cache::default();
        feed(&m, &mut cache, DRAFTED, &ids, CpuLaunch::serial());
        let mut rows = Vec::new();
        let mut pick = |_: usize, _: usize, logits: &[f32]| {
            rows.extend_from_slice(logits);
            let best = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            logits.iter().position(|&v| v == best).unwrap() as u32
        };
        let drafts = m
            .dspark_draft(&[(DRAFTED, y)], &cache, CpuLaunch::serial(), &mut pick)
            .unwrap();
        let want = golden_floats(&st, "draft_logits");
        assert_eq!(rows.len(), want.len());
        let num: f64 = rows.iter().zip(&want).map(|(&a, &b)| (a as f64 - b).powi(2)).sum();
        let err = (num / want.iter().map(|b| b * b).sum::<f64>()).sqrt();
        let conf = golden_floats(&st, "confidence");
        let conf_err = drafts[0]
            .iter()
            .zip(&conf)
            .map(|(d, &w)| (d.confidence as f64 - w).abs())
            .fold(0f64, f64::max);
        eprintln!("{name}: DSpark draft logits rel err {err:.2e}, confidence max abs err {conf_err:.2e}");
        assert!(err < DRAFT_REL_BOUND, "{name}: draft logits rel err {err:e}");
        assert!(conf_err < CONFIDENCE_ABS_BOUND, "{name}: confidence err {conf_err:e}");
        let tokens: Vec<u32> = drafts[0].iter().map(|d| d.token).collect();
        assert_eq!(tokens, golden_ints(&st, "drafts"), "{name}: greedy drafts");
        assert_eq!(rows.len(), 5 * vocab);
    }
}
