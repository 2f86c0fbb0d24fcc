//! `tensorfold kernel-contract`: proves every registered kernel (gates 1-4, planted controls, limits).

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use tensorfold_kernels::contract::{self, Backend, KnownFindings, RunOptions};
use tensorfold_kernels::registry;

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
    /// Only the kernel of this name.
    #[arg(long)]
    kernel: Option<String>,
    /// List the registered kernels with their cases, launch records, bound and controls, and exit.
    #[arg(long)]
    list: bool,
}

pub fn run(args: ContractArgs) -> anyhow::Result<()> {
    let backend = match args.backend {
        BackendArg::Cpu => Backend::Cpu,
        BackendArg::Cuda => Backend::Cuda,
    };
    let kernels = registry::all();
    if let Some(name) = &args.kernel
        && !kernels.iter().any(|k| k.name() == name)
    {
        let names: Vec<_> = kernels.iter().map(|k| k.name()).collect();
        return Err(anyhow!("no kernel named `{name}`; registered: {}", names.join(", ")));
    }
    if args.list {
        for k in &kernels {
            let b = k.bound();
            println!(
                "{} ({}): {} cases, {} {backend} launch records, controls [{}]; bound rel-norm {:e}, per element {:e} + {:e}|ref|: {}",
                k.name(),
                k.family(),
                k.cases().len(),
                k.launches(backend).len(),
                k.controls().join(", "),
                b.rel_norm,
                b.abs,
                b.rel,
                b.why
            );
        }
        return Ok(());
    }
    if !cfg!(feature = "contract") {
        eprintln!("note: this build has no planted controls; build with `--features contract` to check them");
    }
    let opts = RunOptions {
        backend,
        only: args.only,
        kernel: args.kernel,
    };
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
