//! A weight's copy in 16-row groups for the CPU kernels: made on first use, shared by clones of the weight.

use std::sync::{Arc, OnceLock};

/// A weight's copy in 16-row groups for the CPU kernels, made once on first use and shared by clones.
#[derive(Debug)]
pub struct Groups<P>(Arc<OnceLock<Option<P>>>);

impl<P> Default for Groups<P> {
    fn default() -> Groups<P> {
        Groups(Arc::default())
    }
}

impl<P> Clone for Groups<P> {
    fn clone(&self) -> Groups<P> {
        Groups(Arc::clone(&self.0))
    }
}

impl<P> Groups<P> {
    /// The copy, made by `pack` on the first call if memory has room for `bytes` more; else the row layout stays for good.
    pub fn get_or(&self, bytes: usize, pack: impl FnOnce() -> Option<P>) -> Option<&P> {
        self.0
            .get_or_init(|| room_for(bytes as u64).then(pack).flatten())
            .as_ref()
    }

    /// Bytes of the copy (`bytes` of it), 0 if none was made.
    pub fn held(&self, bytes: impl Fn(&P) -> usize) -> u64 {
        self.0.get().and_then(Option::as_ref).map_or(0, |p| bytes(p) as u64)
    }
}

/// Memory the copies leave free for everything else.
const RESERVE: u64 = 1 << 30;

/// Whether the system's available memory (Linux `MemAvailable`) holds `bytes` more and the reserve; true where it cannot be read.
pub fn room_for(bytes: u64) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return true;
    };
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kib.is_none_or(|kib| kib * 1024 >= bytes.saturating_add(RESERVE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_copy_is_made_once_and_shared_by_clones() {
        let g: Groups<Vec<u8>> = Groups::default();
        let packs = Cell::new(0);
        let pack = || {
            packs.set(packs.get() + 1);
            Some(vec![7u8; 48])
        };
        assert_eq!(g.held(Vec::len), 0, "nothing before first use");
        let twin = g.clone();
        assert_eq!(g.get_or(48, pack).map(Vec::len), Some(48));
        assert_eq!(twin.get_or(48, || panic!("packed twice")).map(Vec::len), Some(48));
        assert_eq!((packs.get(), twin.held(Vec::len)), (1, 48));
        let none: Groups<Vec<u8>> = Groups::default();
        assert!(
            none.get_or(48, || None).is_none() && none.held(Vec::len) == 0,
            "an unpackable weight holds nothing"
        );
    }

    #[test]
    fn a_copy_larger_than_memory_is_not_made() {
        let g: Groups<Vec<u8>> = Groups::default();
        if std::fs::read_to_string("/proc/meminfo").is_err() {
            eprintln!("skipped: no /proc/meminfo here");
            return;
        }
        assert!(g.get_or(usize::MAX / 2, || panic!("no room, no packing")).is_none());
        assert!(room_for(0));
    }
}
