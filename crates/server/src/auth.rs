//! API keys held as SHA-256 digests, compared in constant time; a key file is permission-checked and re-read on change.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type KeyDigest = [u8; 32];

fn digest(key: &str) -> KeyDigest {
    Sha256::digest(key.trim().as_bytes()).into()
}

struct FileKeys {
    path: PathBuf,
    stamp: Option<(SystemTime, u64)>,
    digests: Vec<KeyDigest>,
}

/// The accepted keys; none configured means the API is open.
pub struct Keys {
    fixed: Vec<KeyDigest>,
    file: Option<Mutex<FileKeys>>,
}

/// Reads a key file (one key a line, `#` comments), refusing one that others can read.
pub fn read_key_file(path: &Path) -> Result<Vec<KeyDigest>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "key file {} has mode {:o}; it must not be readable by group or others (chmod 600)",
                path.display(),
                mode & 0o777
            ));
        }
    }
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(digest)
        .collect())
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Keys {
    /// Keys from the command line and an optional file; fails when the file is unreadable or too open.
    pub fn new(keys: &[String], file: Option<&Path>) -> Result<Keys, String> {
        let file = match file {
            Some(p) => Some(Mutex::new(FileKeys {
                path: p.to_path_buf(),
                stamp: stamp(p),
                digests: read_key_file(p)?,
            })),
            None => None,
        };
        Ok(Keys {
            fixed: keys.iter().map(|k| digest(k)).collect(),
            file,
        })
    }

    pub fn open() -> Keys {
        Keys {
            fixed: Vec::new(),
            file: None,
        }
    }

    /// Whether a request with this `Authorization` header may pass.
    pub fn allows(&self, header: Option<&str>) -> bool {
        if self.fixed.is_empty() && self.file.is_none() {
            return true;
        }
        let Some(key) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
            return false;
        };
        let d = digest(key);
        let mut ok = subtle::Choice::from(0);
        for k in &self.fixed {
            ok |= k.ct_eq(&d);
        }
        if let Some(file) = &self.file {
            let mut f = file.lock().expect("key file lock");
            let now = stamp(&f.path);
            if now != f.stamp {
                f.stamp = now;
                // A file that became unreadable or too open grants nothing until fixed.
                f.digests = read_key_file(&f.path).unwrap_or_else(|e| {
                    eprintln!("warning: {e}");
                    Vec::new()
                });
            }
            for k in &f.digests {
                ok |= k.ct_eq(&d);
            }
        }
        ok.into()
    }
}
