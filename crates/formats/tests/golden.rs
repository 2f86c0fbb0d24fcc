//! Every code point decoded and every golden input encoded, against PyTorch's dtypes.

mod common;

use common::{check_decode, check_encode};
use tensorfold_formats::{bf16, e2m1, e4m3, e8m0};

#[test]
fn e4m3_decode_all_codes() {
    check_decode("e4m3_decode.txt", 256, |c| e4m3::decode(c as u8));
    check_decode("e4m3_decode.txt", 256, |c| e4m3::TABLE[c as usize]);
}

#[test]
fn e8m0_decode_all_codes() {
    check_decode("e8m0_decode.txt", 256, |c| e8m0::decode(c as u8));
    check_decode("e8m0_decode.txt", 256, |c| e8m0::TABLE[c as usize]);
}

#[test]
fn e2m1_decode_all_codes() {
    check_decode("e2m1_decode.txt", 16, |c| e2m1::decode(c as u8));
    check_decode("e2m1_decode.txt", 16, |c| e2m1::TABLE[c as usize]);
}

#[test]
fn bf16_decode_all_codes() {
    check_decode("bf16_decode.txt", 65536, |c| bf16::bf16_to_f32(c as u16));
}

#[test]
fn bf16_encode_matches_torch() {
    // torch's NaN code depends on the kernel path, so a NaN only has to stay a NaN.
    let is_nan = |b: u32| bf16::bf16_to_f32(b as u16).is_nan();
    check_encode(
        "bf16_encode.txt",
        |x| bf16::f32_to_bf16(x) as u32,
        |ours, torch| ours == torch || (is_nan(ours) && is_nan(torch)),
    );
}

#[test]
fn e4m3_encode_matches_torch_saturating() {
    check_encode("e4m3_encode.txt", |x| e4m3::encode(x) as u32, |a, b| a == b);
}

#[test]
fn e8m0_encode_matches_torch() {
    check_encode("e8m0_encode.txt", |x| e8m0::encode(x) as u32, |a, b| a == b);
}

#[test]
fn e2m1_encode_matches_torch_reference() {
    check_encode("e2m1_encode.txt", |x| e2m1::encode(x) as u32, |a, b| a == b);
}
