//! Shared fixtures: one tiny synth checkpoint per test binary, copied per test so faults can be planted; tiny V4.1 synths.

#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::forward::Dsv4Model;
use tensorfold_model::dsv4::semantics::Semantics;
use tensorfold_model::dsv4::weights::Dsv4Weights;
use tensorfold_model::dsv41::forward::{Dsv41Model, load_model};
use tensorfold_model::synth::{self, Dsv41Preset, Preset, SynthOptions};

/// A tiny checkpoint written once, sharded at `shard_mib`.
pub fn base(shard_mib: u64) -> &'static Path {
    static SINGLE: OnceLock<tempfile::TempDir> = OnceLock::new();
    static SHARDED: OnceLock<tempfile::TempDir> = OnceLock::new();
    let cell = if shard_mib == 0 { &SINGLE } else { &SHARDED };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let opts = SynthOptions {
            preset: Preset::Tiny,
            seed: 1,
            out: dir.path().to_path_buf(),
            shard_bytes: if shard_mib == 0 {
                synth::DEFAULT_SHARD_BYTES
            } else {
                shard_mib << 20
            },
            chat_template: true,
            force: false,
        };
        synth::write(&opts).unwrap();
        dir
    })
    .path()
}

/// A tiny V4 synth of `seed` with `semantics`, its checkpoint written to a temp dir that is gone once the weights are mapped.
pub fn tiny_dsv4(seed: u64, semantics: Semantics) -> Dsv4Model {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Preset::Tiny,
        seed,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template: true,
        force: false,
    };
    synth::write(&opts).unwrap();
    let ckpt = Dsv4Checkpoint::open(dir.path()).unwrap();
    let weights = Dsv4Weights::new(&ckpt.weights, &ckpt.config);
    Dsv4Model::new(ckpt.config, weights, semantics)
}

/// A private copy of a base checkpoint.
pub fn copy_of(src: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// A tiny V4.1 synth of `seed` in a fresh temp dir.
pub fn tiny_dsv41_dir(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Dsv41Preset::Tiny,
        seed,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template: true,
        force: false,
    };
    synth::write_dsv41(&opts).unwrap();
    dir
}

/// A tiny V4.1 synth of `seed`, loaded (its files go with the temp dir).
pub fn tiny_dsv41(seed: u64) -> Dsv41Model {
    load_model(tiny_dsv41_dir(seed).path()).unwrap()
}
