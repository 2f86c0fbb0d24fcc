//! Decode rounds replayed as CUDA graphs (attention fronts and MoE halves) give the same logit bits as the same rounds launched kernel by kernel (skips, saying why, without CUDA).

mod common;

use std::sync::Arc;

use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::forward::device::{CudaDevice, Device};
use tensorfold_model::dsv4::semantics::Semantics;

fn model() -> Dsv4Model {
    common::tiny_dsv4(5, Semantics::official())
}

/// Logit bits of a 9-token prompt, then of `steps` rounds of `rows` tokens each (1 row: plain decode; more: drafted rounds).
fn rounds(m: &Dsv4Model, device: &Arc<CudaDevice>, rows: usize, steps: usize) -> Vec<Vec<u32>> {
    let mut cache = Dsv4Cache::default();
    let prompt: Vec<u32> = (0..9).map(|i| 11 + 37 * i).collect();
    let mut pos = 0;
    let mut out = Vec::new();
    let mut step = |tokens: &[u32], pos: &mut usize| {
        let mut b = Batch::default();
        b.push_seq(SeqSlot(0), *pos as u32, tokens);
        let o = m.forward(&b, &mut cache, Device::Cuda(device.clone()), false).unwrap();
        *pos += tokens.len();
        out.push(o.logits.iter().map(|v| v.to_bits()).collect());
    };
    step(&prompt, &mut pos);
    for s in 0..steps {
        let tokens: Vec<u32> = (0..rows).map(|r| (5 + 97 * s + 13 * r) as u32).collect();
        step(&tokens, &mut pos);
    }
    out
}

#[test]
fn replayed_decode_rounds_match_launched_ones() {
    let open = || CudaDevice::open(0).map(Arc::new);
    let (eager, replayed) = match (open(), open()) {
        (Ok(e), Ok(r)) => (e, r),
        (Err(why), _) | (_, Err(why)) => {
            eprintln!("skipping replayed_decode_rounds_match_launched_ones: {why}");
            return;
        }
    };
    eager.set_graphs(false);
    let m = model();
    for rows in [1, 3] {
        let before = replayed.graph_launches();
        let want = rounds(&m, &eager, rows, 5);
        let got = rounds(&m, &replayed, rows, 5);
        assert_eq!(eager.graph_launches(), 0, "graphs were off");
        let layers = m.config.num_hidden_layers as u64;
        // Each layer's attention front and MoE half, from the second decode round on.
        assert!(
            replayed.graph_launches() - before >= 2 * 4 * layers,
            "{rows} rows: {} graph launches",
            replayed.graph_launches() - before
        );
        assert!(want == got, "{rows} rows: replayed logits differ from launched ones");
    }
    if tensorfold_kernels::cuda::programmatic(replayed.gpu.arch) {
        assert!(
            replayed.graph_programmatic_edges() > 0,
            "sm_{} graphs chained no kernels programmatically",
            replayed.gpu.arch
        );
    }
}

#[test]
fn replayed_rounds_copy_no_streams_and_their_integers_once_a_part() {
    let device = match CudaDevice::open(0).map(Arc::new) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipping replayed_rounds_copy_no_streams_and_their_integers_once_a_part: {why}");
            return;
        }
    };
    let m = model();
    let mut cache = Dsv4Cache::default();
    let mut pos = 0u32;
    let mut step = |tokens: &[u32]| {
        let mut b = Batch::default();
        b.push_seq(SeqSlot(0), pos, tokens);
        m.forward(&b, &mut cache, Device::Cuda(device.clone()), false).unwrap();
        pos += tokens.len() as u32;
    };
    step(&(0..9).map(|i| 11 + 37 * i).collect::<Vec<u32>>());
    // The first round is seen, the second captured; from the third on every graph reads its streams where they were written.
    for s in 0..3 {
        step(&[5 + 97 * s]);
    }
    let (launches, (x0, i0)) = (device.graph_launches(), device.graph_copies_in());
    for s in 3..6 {
        step(&[5 + 97 * s]);
    }
    let (x1, i1) = device.graph_copies_in();
    let layers = m.config.num_hidden_layers as u64;
    assert_eq!(
        device.graph_launches() - launches,
        3 * 2 * layers,
        "every front and MoE half replayed"
    );
    assert_eq!(x1 - x0, 0, "input streams copied into replayed graphs");
    assert_eq!(i1 - i0, 3 * 2, "positions and token ids copied once a part a round");
}

#[test]
fn devices_dropped_beside_a_capturing_pass_leave_its_bits_alone() {
    let open = || CudaDevice::open(0).map(Arc::new);
    let solo = match open() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipping devices_dropped_beside_a_capturing_pass_leave_its_bits_alone: {why}");
            return;
        }
    };
    let m = model();
    let want = rounds(&m, &solo, 1, 6);
    drop(solo);
    let churned = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        // Another engine's device: its weights uploaded, then freed, again and again, while this thread's fresh devices capture graphs.
        s.spawn(|| {
            for _ in 0..24 {
                let d = open().expect("a second device");
                m.upload(&Device::Cuda(d.clone())).expect("an upload");
                drop(d);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            churned.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let mut i = 0;
        while i < 2 || !churned.load(std::sync::atomic::Ordering::Relaxed) {
            let d = open().expect("a fresh device");
            let got = rounds(&m, &d, 1, 6);
            assert!(
                got == want,
                "device {i}: logits differ from the solo run's while another device was dropped beside"
            );
            assert!(d.graph_launches() > 0, "device {i} replayed no graphs");
            i += 1;
        }
    });
}
