//! The contract's routed-slots runs: a three-expert table whose middle entry holds the case's weights, every slot routed to it; then ids outside the table, which give zero rows.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::cuda::{KERNEL, mxfp4_gemm_slots_cuda};
use crate::contract::Case;
use crate::cuda;
use crate::faults::Faults;

/// An expert table over `real.len()` experts: the case's weights `w`, `s` where `real[e]`, others (codes flipped, scales a step up) elsewhere; the device copies (held while the table is read) and the table of their addresses.
pub(super) fn case_table(
    gpu: &cuda::Gpu,
    w: &[u8],
    s: &[u8],
    real: &[bool],
) -> Result<(Vec<CudaSlice<u8>>, CudaSlice<u64>), String> {
    let flipped: Vec<u8> = w.iter().map(|b| b ^ 0x99).collect();
    let bumped: Vec<u8> = s.iter().map(|c| c.wrapping_add(1)).collect();
    let mut bufs = Vec::with_capacity(2 * real.len());
    for &r in real {
        let (codes, scales) = if r { (w, s) } else { (&flipped[..], &bumped[..]) };
        bufs.push(gpu.upload(codes)?);
        bufs.push(gpu.upload(scales)?);
    }
    let table: Vec<u64> = bufs.iter().map(|b| b.device_ptr(&gpu.stream).0).collect();
    Ok((bufs, gpu.upload(&table)?))
}

/// Whether `case` asks for the routed-slots entry.
pub(super) fn marked(case: &Case) -> bool {
    case.opt("slots").is_some()
}

/// `mxfp4_gemm` through `mxfp4_gemm_slots`; the other two experts hold different weights, so a slot that ignored its route would read them.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    launch: &cuda::CudaLaunch,
    x: &[f32],
    w: &[u8],
    s: &[u8],
    n: usize,
    k: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    let gpu = cuda::gpu()?;
    gpu.function(&KERNEL, "mxfp4_gemm_slots", faults)?;
    let (bufs, table) = case_table(gpu, w, s, &[false, true, false])?;
    let idx = vec![1i32; out.len() / n.max(1)];
    // Two tables in one launch: the second output must equal the first bit for bit.
    let mut twin = vec![0f32; out.len()];
    let outs = vec![out.into(), twin.as_mut_slice().into()];
    let r = mxfp4_gemm_slots_cuda(launch, x, &[&table, &table], idx.as_slice(), 1, n, k, outs, faults);
    // Every other slot names an expert outside the table (-1, 3, ...): those rows must come out zero, the others as before.
    let odd: Vec<i32> = (0..idx.len()).map(|s| [1, -1, 1, 3][s % 4]).collect();
    let mut zeroed = vec![f32::NAN; out.len()];
    let r = r.and_then(|()| {
        let outs = vec![zeroed.as_mut_slice().into()];
        mxfp4_gemm_slots_cuda(launch, x, &[&table], odd.as_slice(), 1, n, k, outs, faults)
    });
    gpu.sync()?;
    drop(bufs);
    r?;
    if let Some(i) = out.iter().zip(&twin).position(|(a, b)| a.to_bits() != b.to_bits()) {
        return Err(format!("mxfp4_gemm_slots: the second matrix's output differs at {i}"));
    }
    let wrong = (0..zeroed.len()).find(|&i| {
        let want = if odd[i / n] == 1 { out[i] } else { 0.0 };
        zeroed[i].to_bits() != want.to_bits()
    });
    match wrong {
        Some(i) => Err(format!(
            "mxfp4_gemm_slots: slot {} (expert {}) gives {} at {i}",
            i / n,
            odd[i / n],
            zeroed[i]
        )),
        None => Ok(()),
    }
}
