//! CUDA `hc_post`: one block per row, comb and post in shared memory, one FMA chain per element (the CPU's bits).

use cudarc::driver::PushKernelArg;

use crate::cuda::{self, CudaKernel, CudaLaunch};
use crate::faults::Faults;

/// The most streams the kernel's shared weights hold.
pub const MAX_HC: usize = 16;

pub static KERNEL: CudaKernel = CudaKernel {
    name: "hc_post",
    source: include_str!("hc_post.cu"),
    entries: &["hc_post"],
    controls: &["race_no_sync", "comb_not_transposed", "skip_last_row"],
    records: &[
        CudaLaunch::new(256, 65_535),
        CudaLaunch::new(256, 1),
        CudaLaunch::new(64, 7),
        CudaLaunch::new(1024, 65_535),
    ],
};

/// `out[r, j] = sum_i comb[r, i, j] * x[r, i] + post[r, j] * f[r]`, on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn hc_post_cuda(
    launch: &CudaLaunch,
    f: &[f32],
    x: &[f32],
    post: &[f32],
    comb: &[f32],
    hc: usize,
    dim: usize,
    out: &mut [f32],
    faults: Faults,
) -> Result<(), String> {
    if !(1..=MAX_HC).contains(&hc) || post.len() % hc != 0 {
        return Err(format!(
            "hc_post on CUDA: hc {hc} must be in 1..={MAX_HC} and post whole rows of it"
        ));
    }
    let rows = post.len() / hc;
    if (f.len(), x.len(), comb.len(), out.len()) != (rows * dim, rows * hc * dim, rows * hc * hc, rows * hc * dim) {
        return Err(format!(
            "hc_post on CUDA: f must be [{rows}, {dim}], x and out [{rows}, {hc}, {dim}], comb [{rows}, {hc}, {hc}]"
        ));
    }
    let gpu = cuda::gpu()?;
    let func = gpu.function(&KERNEL, "hc_post", faults)?;
    let (fd, xd, pd, cd) = (gpu.upload(f)?, gpu.upload(x)?, gpu.upload(post)?, gpu.upload(comb)?);
    let mut y = gpu.output(out)?;
    {
        let mut yv = y.view();
        let (r, h, d) = (rows as i32, hc as i32, dim as i32);
        let mut b = gpu.stream.launch_builder(&func);
        b.arg(&fd).arg(&xd).arg(&pd).arg(&cd).arg(&mut yv).arg(&r).arg(&h).arg(&d);
        // SAFETY: the arguments match the kernel's signature; every buffer holds what rows, hc and dim index, checked above.
        cuda::launched("hc_post", unsafe { b.launch(launch.config(rows)) })?;
    }
    y.finish(gpu, out)
}
