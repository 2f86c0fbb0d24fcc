//! `tensorfold kernel-contract`: proves every registered kernel (gates 1-4, planted controls, limits).

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use tensorfold_kernels::contract::{self, Backend, KnownFindings, RunOptions};
use tensorfold_kernels::registry;
use tensorfold_model::dsv4::forward::device::DeviceSpec;

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    Cpu,
    Cuda,
}

#[derive(Args)]
pub struct ContractArgs {
    /// Only kernels of this model family (e.g. `dsv4`).
    #[arg(long)]
    only: Option<String>,
    /// Backend to check.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendArg,
    /// Device to check on (cpu, cuda or cuda:N); overrides --backend.
    #[arg(long)]
    device: Option<DeviceSpec>,
    /// Only the kernel of this name.
    #[arg(long)]
    kernel: Option<String>,
    /// List the registered kernels with their cases, launch records, bound and controls, and exit.
    #[arg(long)]
    list: bool,
    /// CUDA only: compile every kernel (and each planted control) with NVRTC and check limits; needs no GPU.
    #[arg(long)]
    compile_only: bool,
    /// Architectures for `--compile-only`, e.g. `sm_80,sm_90` (default: every supported one).
    #[arg(long, value_delimiter = ',')]
    arch: Vec<String>,
}

/// `sm_90` or `90` as 90; only the architectures the limits table knows.
fn parse_arch(a: &str) -> anyhow::Result<u32> {
    let n: u32 = a
        .trim()
        .trim_start_matches("sm_")
        .parse()
        .map_err(|_| anyhow!("--arch {a}: expected sm_NN, e.g. sm_90"))?;
    if tensorfold_kernels::cuda::limits::of(n).is_none() {
        return Err(anyhow!(
            "--arch {a}: supported are {}",
            tensorfold_kernels::cuda::ARCHS.map(|a| format!("sm_{a}")).join(", ")
        ));
    }
    Ok(n)
}

pub fn run(args: ContractArgs) -> anyhow::Result<()> {
    let backend = match (args.device, args.backend) {
        (Some(DeviceSpec::Cpu), _) | (None, BackendArg::Cpu) => Backend::Cpu,
        (Some(DeviceSpec::Cuda(_)), _) | (None, BackendArg::Cuda) => Backend::Cuda,
    };
    if let Some(DeviceSpec::Cuda(n)) = args.device
        && !args.compile_only
        && !args.list
    {
        tensorfold_kernels::cuda::select(n)
            .map_err(|why| anyhow!("--device cuda:{n}: CUDA is unavailable: {why}; run with --device cpu"))?;
    }
    let kernels = registry::all();
    if let Some(name) = &args.kernel
        && !kernels.iter().any(|k| k.name() == name)
    {
        let names: Vec<_> = kernels.iter().map(|k| k.name()).collect();
        return Err(anyhow!("no kernel named `{name}`; registered: {}", names.join(", ")));
    }
    let opts = RunOptions {
        backend,
        only: args.only,
        kernel: args.kernel,
    };
    if !kernels.iter().any(|k| opts.selects(*k)) {
        let mut families: Vec<_> = kernels
            .iter()
            .flat_map(|k| std::iter::once(k.family()).chain(k.also_in().iter().copied()))
            .collect();
        families.sort_unstable();
        families.dedup();
        return Err(anyhow!(
            "no registered kernel is in family `{}`{}; families: {}",
            opts.only.as_deref().unwrap_or_default(),
            opts.kernel
                .as_deref()
                .map(|k| format!(" and named `{k}`"))
                .unwrap_or_default(),
            families.join(", ")
        ));
    }
    if args.list {
        for k in kernels.iter().filter(|k| opts.selects(**k)) {
            let b = k.bound();
            println!(
                "{} ({}): {} cases, {} {backend} launch records, controls [{}]; bound rel-norm {:e}, per element {:e} + {:e}|ref|: {}",
                k.name(),
                std::iter::once(k.family())
                    .chain(k.also_in().iter().copied())
                    .collect::<Vec<_>>()
                    .join(", "),
                k.cases().len(),
                k.launches(backend).len(),
                k.controls_on(backend).join(", "),
                b.rel_norm,
                b.abs,
                b.rel,
                b.why
            );
            // Outputs that state their own bound.
            for spec in k.cases().first().map(|c| k.outputs(c)).unwrap_or_default() {
                let o = k.output_bound(spec.name);
                if o.why != b.why {
                    println!(
                        "  output {}: bound rel-norm {:e}, per element {:e} + {:e}|ref|: {}",
                        spec.name, o.rel_norm, o.abs, o.rel, o.why
                    );
                }
            }
        }
        return Ok(());
    }
    if args.compile_only {
        if backend != Backend::Cuda {
            return Err(anyhow!("--compile-only checks CUDA kernels; add `--backend cuda`"));
        }
        let archs = if args.arch.is_empty() {
            tensorfold_kernels::cuda::ARCHS.to_vec()
        } else {
            args.arch
                .iter()
                .map(|a| parse_arch(a))
                .collect::<anyhow::Result<Vec<_>>>()?
        };
        tensorfold_kernels::cuda::nvrtc_available().map_err(|why| anyhow!("CUDA compile check impossible: {why}"))?;
        let s = contract::compile_only(&kernels, &archs, &opts, &mut std::io::stdout());
        println!("{}", s.line(&archs));
        return if s.ok() {
            Ok(())
        } else {
            Err(anyhow!(
                "CUDA kernels failed to compile or exceed limits (see FAIL and LIMIT lines above)"
            ))
        };
    }
    if backend == Backend::Cuda
        && let Err(why) = tensorfold_kernels::cuda::gpu()
    {
        return Err(anyhow!("CUDA is unavailable: {why}"));
    }
    if !cfg!(feature = "contract") {
        eprintln!("note: this build has no planted controls; build with `--features contract` to check them");
    }
    let summary = contract::run(&kernels, &opts, &KnownFindings::bundled(), &mut std::io::stdout());
    println!("{}", summary.line(backend));
    if summary.ok() {
        Ok(())
    } else {
        Err(anyhow!(
            "the kernel contract failed (see the FAIL and MISSED lines above)"
        ))
    }
}
