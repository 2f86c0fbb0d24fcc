//! Block-scaled FP8: both scale kinds, ragged shapes, quantisation rules.

use tensorfold_formats::block_fp8::{self, BlockScales};
use tensorfold_formats::{FormatError, e4m3, e8m0};

/// Reference dequantisation, element by element.
fn reference(q: &[u8], scale: impl Fn(usize) -> f32, rows: usize, cols: usize) -> Vec<f32> {
    let grid_cols = cols.div_ceil(128);
    (0..rows * cols)
        .map(|i| e4m3::decode(q[i]) * scale((i / cols / 128) * grid_cols + (i % cols) / 128))
        .collect()
}

fn codes(n: usize) -> Vec<u8> {
    // Every non-NaN code, in a scrambled order.
    (0..n)
        .map(|i| ((i * 131 + i / 7) % 256) as u8)
        .map(|c| if c & 0x7F == 0x7F { c - 1 } else { c })
        .collect()
}

#[test]
fn scale_grid_rounds_up() {
    assert_eq!(block_fp8::scale_grid(128, 256), (1, 2));
    assert_eq!(block_fp8::scale_grid(129, 7168), (2, 56));
    assert_eq!(block_fp8::scale_grid(1, 1), (1, 1));
}

#[test]
fn dequantize_ragged_shapes_both_scale_kinds() {
    for (rows, cols) in [(1, 1), (3, 200), (130, 129), (256, 128), (257, 300)] {
        let q = codes(rows * cols);
        let (gr, gc) = block_fp8::scale_grid(rows, cols);
        let e8: Vec<u8> = (0..gr * gc).map(|i| 120 + (i % 15) as u8).collect();
        let f: Vec<f32> = (0..gr * gc).map(|i| 0.001 * (i + 1) as f32).collect();
        let mut out = vec![0.0; rows * cols];
        block_fp8::dequantize(&q, BlockScales::E8m0(&e8), rows, cols, &mut out).unwrap();
        assert_eq!(
            out,
            reference(&q, |b| e8m0::decode(e8[b]), rows, cols),
            "e8m0 {rows}x{cols}"
        );
        block_fp8::dequantize(&q, BlockScales::F32(&f), rows, cols, &mut out).unwrap();
        let want = reference(&q, |b| f[b], rows, cols);
        assert_eq!(out, want, "f32 {rows}x{cols}");
        let row_idx = rows - 1;
        let mut row = vec![0.0; cols];
        block_fp8::dequantize_row(
            &q[row_idx * cols..][..cols],
            BlockScales::F32(&f),
            rows,
            row_idx,
            &mut row,
        )
        .unwrap();
        assert_eq!(row, want[row_idx * cols..]);
    }
}

#[test]
fn dequantize_rejects_bad_shapes() {
    let mut out = vec![0.0; 200];
    assert!(block_fp8::dequantize(&[0; 200], BlockScales::F32(&[1.0; 1]), 2, 100, &mut out).is_ok());
    assert!(block_fp8::dequantize(&[0; 200], BlockScales::F32(&[1.0; 2]), 1, 200, &mut out).is_ok());
    let err = block_fp8::dequantize(&[0; 200], BlockScales::E8m0(&[127; 1]), 1, 200, &mut out);
    assert_eq!(
        err,
        Err(FormatError::Length {
            what: "block_fp8 scales",
            expected: 2,
            actual: 1
        })
    );
    assert!(block_fp8::dequantize(&[0; 199], BlockScales::F32(&[1.0; 2]), 1, 200, &mut out).is_err());
    assert!(block_fp8::dequantize(&[0; 200], BlockScales::F32(&[1.0; 2]), 1, 200, &mut out[..100]).is_err());
}

#[test]
fn quantize_e8m0_round_trips_representable_weights() {
    let (rows, cols) = (200, 300);
    let (gr, gc) = block_fp8::scale_grid(rows, cols);
    // Each block holds codes times 2^e with one element at 448 * 2^e, so the scale is exactly 2^e.
    let exps: Vec<i32> = (0..gr * gc).map(|b| b as i32 * 7 - 20).collect();
    let q = codes(rows * cols);
    let mut w = reference(&q, |b| 2f32.powi(exps[b]), rows, cols);
    for b in 0..gr * gc {
        w[(b / gc) * 128 * cols + (b % gc) * 128] = 448.0 * 2f32.powi(exps[b]);
    }
    let (q2, scales) = block_fp8::quantize_e8m0(&w, rows, cols).unwrap();
    assert_eq!(scales, exps.iter().map(|&e| e8m0::from_exponent(e)).collect::<Vec<_>>());
    let mut back = vec![0.0; rows * cols];
    block_fp8::dequantize(&q2, BlockScales::E8m0(&scales), rows, cols, &mut back).unwrap();
    assert_eq!(back, w);
}

#[test]
fn quantize_rules_for_scales() {
    let mut w = vec![0.0f32; 130 * 130];
    w[0] = 1.0; // block (0, 0): amax 1
    w[129] = -1000.0; // block (0, 1): amax 1000
    let (q, s) = block_fp8::quantize_e8m0(&w, 130, 130).unwrap();
    // 2^ceil(log2(1/448)) = 2^-8, 2^ceil(log2(1000/448)) = 2^2, zero blocks floor amax at 1e-4: 2^ceil(log2(1e-4/448)) = 2^-22.
    assert_eq!(
        s,
        vec![
            e8m0::from_exponent(-8),
            e8m0::from_exponent(2),
            e8m0::from_exponent(-22),
            e8m0::from_exponent(-22)
        ]
    );
    assert_eq!((q[0], q[129]), (e4m3::encode(256.0), e4m3::encode(-250.0)));
    let (q, s) = block_fp8::quantize_f32_scales(&w, 130, 130).unwrap();
    assert_eq!(s, vec![1.0 / 448.0, 1000.0 / 448.0, 1e-4 / 448.0, 1e-4 / 448.0]);
    assert_eq!((q[0], q[129]), (0x7E, 0xFE));
    let mut back = vec![0.0; 130 * 130];
    block_fp8::dequantize(&q, BlockScales::F32(&s), 130, 130, &mut back).unwrap();
    assert!((back[0] - 1.0).abs() < 1e-6 && (back[129] + 1000.0).abs() < 1e-3);
    w[5] = f32::NAN;
    assert_eq!(
        block_fp8::quantize_e8m0(&w, 130, 130),
        Err(FormatError::NonFinite {
            what: "block_fp8 weight",
            idx: 5
        })
    );
}
