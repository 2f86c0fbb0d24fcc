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

#[test]
fn block_fp8_quantize_matches_torch_at_every_block_size() {
    use tensorfold_formats::block_fp8::{self, Block, BlockScales};
    let lines = common::lines("block_fp8_e8m0.txt");
    assert_eq!(lines.len() % 4, 0, "block_fp8_e8m0.txt: groups of four lines");
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| common::hex(&s[i..i + 2]) as u8)
            .collect()
    };
    let mut sizes = Vec::new();
    for group in lines.chunks(4) {
        let dims: Vec<usize> = group[0].split(' ').map(|v| v.parse().unwrap()).collect();
        let (rows, cols, block) = (
            dims[0],
            dims[1],
            Block {
                rows: dims[2],
                cols: dims[3],
            },
        );
        let w: Vec<f32> = group[1].split(' ').map(|b| f32::from_bits(common::hex(b))).collect();
        let (codes, scales) = (unhex(&group[2]), unhex(&group[3]));
        let (q, s) = block_fp8::quantize_e8m0_blocks(&w, block, rows, cols).unwrap();
        assert_eq!(s, scales, "scales {rows}x{cols} in {block:?}");
        assert_eq!(q, codes, "codes {rows}x{cols} in {block:?}");
        if block == Block::B128 {
            assert_eq!(
                block_fp8::quantize_e8m0(&w, rows, cols).unwrap(),
                (q.clone(), s.clone())
            );
        }
        let mut back = vec![0.0; rows * cols];
        block_fp8::dequantize_blocks(&q, BlockScales::E8m0(&s), block, rows, cols, &mut back).unwrap();
        let (_, grid_cols) = block.grid(rows, cols);
        for (i, v) in back.iter().enumerate() {
            let (r, c) = (i / cols, i % cols);
            let scale = e8m0::decode(s[(r / block.rows) * grid_cols + c / block.cols]);
            assert_eq!(
                v.to_bits(),
                (e4m3::decode(q[i]) * scale).to_bits(),
                "element {r},{c} in {block:?}"
            );
        }
        let mut row = vec![0.0; cols];
        block_fp8::dequantize_row_blocks(
            &q[(rows - 1) * cols..],
            BlockScales::E8m0(&s),
            block,
            rows,
            rows - 1,
            &mut row,
        )
        .unwrap();
        assert_eq!(row, back[(rows - 1) * cols..]);
        sizes.push((block.rows, block.cols));
    }
    for want in [(32, 32), (1, 32), (128, 128)] {
        assert!(sizes.contains(&want), "no golden weight with {want:?} blocks");
    }
}
