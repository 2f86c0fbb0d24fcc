//! A pass asked for picks returns each logit row's greedy pick, the sampler's argmax of the logits the same pass returns otherwise, on the CPU and on CUDA (skips, saying why, without it).

mod common;

use std::sync::Arc;

use tensorfold_kernels::cpu::CpuLaunch;
use tensorfold_kernels::logits_argmax::pick;
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::Dsv4Cache;
use tensorfold_model::dsv4::forward::device::{CudaDevice, Device};
use tensorfold_model::dsv4::forward::{Dsv4Model, ForwardOptions};
use tensorfold_model::dsv4::semantics::Semantics;

/// Per round (a 9-token prompt, then decode rounds of 1 and 3 rows): the logits' argmax per logit row, and the picks of the same rounds run asking for them.
fn both(m: &Dsv4Model, device: &Device) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let vocab = m.config.vocab_size;
    let run = |picks: bool| {
        let mut cache = Dsv4Cache::default();
        let mut pos = 0u32;
        let mut out = Vec::new();
        let prompt: Vec<u32> = (0..9).map(|i| 11 + 37 * i).collect();
        let rounds = [prompt, vec![5], vec![102], vec![7, 8, 9], vec![300]];
        for tokens in rounds {
            let mut b = Batch::default();
            b.push_seq(SeqSlot(0), pos, &tokens);
            let opts = ForwardOptions {
                logit_rows: Some(vec![0, tokens.len() - 1]),
                picks,
                ..ForwardOptions::default()
            };
            let o = m.forward_with(&b, &mut cache, device.clone(), &opts).unwrap();
            pos += tokens.len() as u32;
            out.push(match picks {
                true => {
                    assert!(o.logits.is_empty(), "logits came back beside the picks");
                    o.picks
                }
                false => o.logits.chunks(vocab).map(pick).collect(),
            });
        }
        out
    };
    (run(false), run(true))
}

#[test]
fn picks_are_the_argmax_of_the_logits_on_the_cpu() {
    let m = common::tiny_dsv4(3, Semantics::official());
    let (want, got) = both(&m, &Device::Cpu(CpuLaunch::serial()));
    assert_eq!(got, want);
    assert!(want.iter().all(|r| r.len() == 2));
}

#[test]
fn picks_are_the_argmax_of_the_logits_on_cuda() {
    let device = match CudaDevice::open(0).map(Arc::new) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipping picks_are_the_argmax_of_the_logits_on_cuda: {why}");
            return;
        }
    };
    let m = common::tiny_dsv4(5, Semantics::official());
    let (want, got) = both(&m, &Device::Cuda(device));
    assert_eq!(got, want);
}
