//! `tensorfold synth`: writes a synthetic checkpoint.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, anyhow};
use clap::Args;
use tensorfold_model::synth::{self, Dsv41Preset, Preset, SynthOptions};

#[derive(Args)]
pub struct SynthArgs {
    /// Model family: `dsv4` (DeepSeek V4) or `dsv41` (DeepSeek V4.1, presets tiny and small).
    #[arg(long, default_value = "dsv4")]
    family: String,
    /// Size: `tiny` (CI), `small` (about 0.8 B parameters), `flash-layers` (V4-Flash dimensions; needs --layers).
    #[arg(long, default_value = "tiny")]
    preset: String,
    /// Number of layers for `--preset flash-layers`.
    #[arg(long)]
    layers: Option<usize>,
    /// Folder to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Random seed; the same seed writes the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Largest shard in MiB; bigger checkpoints are split with model.safetensors.index.json.
    #[arg(long, default_value_t = synth::DEFAULT_SHARD_BYTES >> 20)]
    shard_mib: u64,
    /// Leave the Jinja chat template out of tokenizer_config.json, as DeepSeek V4's own checkpoints do.
    #[arg(long)]
    no_chat_template: bool,
    /// Overwrite a checkpoint already in --out.
    #[arg(long)]
    force: bool,
}

pub fn run(args: SynthArgs) -> anyhow::Result<()> {
    if args.shard_mib == 0 {
        return Err(anyhow!("--shard-mib must be at least 1"));
    }
    let start = Instant::now();
    let opts = SynthOptions {
        preset: (),
        seed: args.seed,
        out: args.out.clone(),
        shard_bytes: args.shard_mib << 20,
        chat_template: !args.no_chat_template,
        force: args.force,
    };
    let (report, preset) = match args.family.as_str() {
        "dsv4" => {
            let preset = Preset::parse(&args.preset, args.layers).map_err(|e| anyhow!(e))?;
            (synth::write(&opts.with_preset(preset)), format!("{preset:?}"))
        }
        "dsv41" => {
            if args.layers.is_some() {
                return Err(anyhow!("--layers applies only to family dsv4, preset flash-layers"));
            }
            let preset = Dsv41Preset::parse(&args.preset).map_err(|e| anyhow!(e))?;
            (
                synth::write_dsv41(&opts.with_preset(preset)),
                format!("dsv41 {preset:?}"),
            )
        }
        other => {
            return Err(anyhow!(
                "unknown family `{other}`; synth writes `dsv4` (DeepSeek V4) or `dsv41` (DeepSeek V4.1)"
            ));
        }
    };
    let report = report.with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} ({}, seed {}): {} files, {:.1} MiB of tensors in {:.1} s",
        args.out.display(),
        preset,
        args.seed,
        report.files.len(),
        report.tensor_bytes as f64 / (1 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
