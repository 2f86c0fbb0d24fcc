//! Loads the PyTorch golden tables written by tools/reference/formats.py.

#![allow(dead_code)]

use std::path::PathBuf;

/// Lines of a golden file without comments.
pub fn lines(name: &str) -> Vec<String> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../tools/reference/formats", name]
        .iter()
        .collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run tools/reference/formats.py", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

pub fn hex(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// A decode table: f32 bit patterns, index = code.
pub fn decode_table(name: &str, num_codes: usize) -> Vec<u32> {
    let table: Vec<u32> = lines(name).iter().map(|l| hex(l)).collect();
    assert_eq!(table.len(), num_codes, "{name}");
    table
}

/// An encode table: (input f32, torch's code).
pub fn encode_table(name: &str) -> Vec<(f32, u32)> {
    let table: Vec<(f32, u32)> = lines(name)
        .iter()
        .map(|l| {
            let (x, code) = l.split_once(' ').unwrap_or_else(|| panic!("{name}: bad line {l:?}"));
            (f32::from_bits(hex(x)), hex(code))
        })
        .collect();
    assert!(table.len() > 1000, "{name}: only {} rows", table.len());
    table
}

/// Bit-exact, except that any NaN matches a NaN of the same sign (torch's NaN payloads are path-dependent).
pub fn same_f32(ours: f32, golden: u32) -> bool {
    let g = f32::from_bits(golden);
    if g.is_nan() {
        ours.is_nan() && ours.is_sign_negative() == g.is_sign_negative()
    } else {
        ours.to_bits() == golden
    }
}

/// Checks `decode` against every code of a golden decode table.
pub fn check_decode(name: &str, num_codes: usize, decode: impl Fn(u32) -> f32) {
    let table = decode_table(name, num_codes);
    let bad: Vec<String> = (0..num_codes as u32)
        .filter(|&c| !same_f32(decode(c), table[c as usize]))
        .map(|c| {
            format!(
                "code {c:#x}: ours {:#010x}, torch {:#010x}",
                decode(c).to_bits(),
                table[c as usize]
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{name}: {} mismatches, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(8)]
    );
}

/// Checks `encode` against every row of a golden encode table, comparing with `same`.
pub fn check_encode(name: &str, encode: impl Fn(f32) -> u32, same: impl Fn(u32, u32) -> bool) {
    let bad: Vec<String> = encode_table(name)
        .into_iter()
        .filter(|&(x, code)| !same(encode(x), code))
        .map(|(x, code)| {
            format!(
                "x {x:e} ({:#010x}): ours {:#x}, torch {code:#x}",
                x.to_bits(),
                encode(x)
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{name}: {} mismatches, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(8)]
    );
}
