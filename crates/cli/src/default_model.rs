//! The built-in default model (models/tensorfold-demo), carried in the binary and unpacked once into a cache folder.

use std::path::PathBuf;

use anyhow::Context;

const FILES: [(&str, &[u8]); 5] = [
    (
        "config.json",
        include_bytes!("../../../models/tensorfold-demo/config.json"),
    ),
    (
        "generation_config.json",
        include_bytes!("../../../models/tensorfold-demo/generation_config.json"),
    ),
    (
        "tokenizer.json",
        include_bytes!("../../../models/tensorfold-demo/tokenizer.json"),
    ),
    (
        "tokenizer_config.json",
        include_bytes!("../../../models/tensorfold-demo/tokenizer_config.json"),
    ),
    (
        "model.safetensors",
        include_bytes!("../../../models/tensorfold-demo/model.safetensors"),
    ),
];

/// Name shown for the built-in model.
pub const NAME: &str = "tensorfold-demo";

/// The folder holding the built-in model, unpacked on first use (keyed by content so versions never mix).
pub fn dir() -> anyhow::Result<PathBuf> {
    let key = FILES.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, (_, bytes)| {
        bytes.iter().step_by(97).fold(h ^ bytes.len() as u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    });
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join("tensorfold").join(format!("{NAME}-{key:016x}"));
    if dir.join("model.safetensors").exists() {
        return Ok(dir);
    }
    let tmp = dir.with_extension("partial");
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    for (name, bytes) in FILES {
        std::fs::write(tmp.join(name), bytes).with_context(|| format!("writing {}", tmp.join(name).display()))?;
    }
    std::fs::rename(&tmp, &dir).or_else(|e| if dir.exists() { Ok(()) } else { Err(e) })?;
    Ok(dir)
}
