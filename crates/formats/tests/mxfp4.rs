//! MXFP4 layout, quantisation rule and the torch to_mxfp golden.

mod common;

use tensorfold_formats::{FormatError, e2m1, e8m0, mxfp4};

#[test]
fn pack_puts_even_element_in_low_nibble() {
    assert_eq!(mxfp4::pack(&[0x1, 0x2, 0xF, 0x0]).unwrap(), vec![0x21, 0x0F]);
    let codes: Vec<u8> = (0..64).map(|i| (i * 7 % 16) as u8).collect();
    let bytes = mxfp4::pack(&codes).unwrap();
    let mut back = vec![0; 64];
    mxfp4::unpack(&bytes, &mut back).unwrap();
    assert_eq!(back, codes);
}

#[test]
fn pack_rejects_bad_codes_and_lengths() {
    assert!(matches!(mxfp4::pack(&[1, 2, 3]), Err(FormatError::NotMultiple { .. })));
    assert_eq!(
        mxfp4::pack(&[1, 16]),
        Err(FormatError::InvalidCode {
            what: "mxfp4 codes",
            idx: 1,
            code: 16
        })
    );
    assert!(mxfp4::unpack(&[0; 3], &mut [0; 5]).is_err());
    assert!(mxfp4::dequantize_row(&[0; 16], &[127], &mut [0.0; 31]).is_err());
    assert!(mxfp4::dequantize_row(&[0; 15], &[127], &mut [0.0; 32]).is_err());
    assert!(mxfp4::quantize_row(&[0.0; 64], &mut [0; 32], &mut [0; 1]).is_err());
    let mut x = [0.0; 32];
    x[5] = f32::INFINITY;
    assert_eq!(
        mxfp4::quantize_row(&x, &mut [0; 16], &mut [0; 1]),
        Err(FormatError::NonFinite {
            what: "mxfp4 input",
            idx: 5
        })
    );
}

#[test]
fn dequantize_is_code_times_scale() {
    let codes: Vec<u8> = (0..64).map(|i| (i % 16) as u8).collect();
    let packed = mxfp4::pack(&codes).unwrap();
    let scales = [e8m0::from_exponent(-3), e8m0::from_exponent(5)];
    let mut out = vec![0.0; 64];
    mxfp4::dequantize_row(&packed, &scales, &mut out).unwrap();
    for (i, &v) in out.iter().enumerate() {
        let s = if i < 32 { 0.125 } else { 32.0 };
        assert_eq!(v.to_bits(), (e2m1::decode(codes[i]) * s).to_bits(), "element {i}");
    }
}

#[test]
fn round_trip_is_exact_for_representable_blocks() {
    // Each block holds a 6 * 2^e element, so its scale is exactly 2^e and every value is a code times 2^e.
    for e in [-126, -40, -1, 0, 1, 17, 120] {
        let s = 2f32.powi(e);
        let x: Vec<f32> = (0..64).map(|i| e2m1::decode([7, 3, 12, 0, 9, 5][i % 6]) * s).collect();
        let (mut packed, mut scales) = (vec![0; 32], vec![0; 2]);
        mxfp4::quantize_row(&x, &mut packed, &mut scales).unwrap();
        assert_eq!(scales, vec![e8m0::from_exponent(e); 2], "e = {e}");
        let mut back = vec![0.0; 64];
        mxfp4::dequantize_row(&packed, &scales, &mut back).unwrap();
        assert_eq!(back, x, "e = {e}");
    }
}

#[test]
fn quantize_error_is_at_most_half_the_widest_step() {
    let x: Vec<f32> = (0..256).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
    let (mut packed, mut scales) = (vec![0; 128], vec![0; 8]);
    mxfp4::quantize_row(&x, &mut packed, &mut scales).unwrap();
    let mut back = vec![0.0; 256];
    mxfp4::dequantize_row(&packed, &scales, &mut back).unwrap();
    for (i, (&a, &b)) in x.iter().zip(&back).enumerate() {
        let s = e8m0::decode(scales[i / 32]);
        let amax = x[i / 32 * 32..][..32].iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(
            amax <= 6.0 * s && amax > 3.0 * s,
            "block {}: amax {amax}, scale {s}",
            i / 32
        );
        // Largest e2m1 step is 2 (between 4 and 6), so the error is at most one scale.
        assert!((a - b).abs() <= s, "element {i}: {a} -> {b}");
        assert_eq!(b, e2m1::decode(e2m1::encode(a / s)) * s);
    }
}

#[test]
fn zero_block_gets_the_floor_scale() {
    let (mut packed, mut scales) = (vec![0xAA; 16], vec![0; 1]);
    mxfp4::quantize_row(&[0.0; 32], &mut packed, &mut scales).unwrap();
    assert_eq!(scales, vec![e8m0::from_exponent(-126)]);
    assert_eq!(packed, vec![0; 16]);
}

#[test]
fn quantize_matches_torch_to_mxfp() {
    let rows = common::lines("mxfp4_quant.txt");
    assert!(rows.len() >= 8);
    for (row_idx, line) in rows.iter().enumerate() {
        let parts: Vec<&str> = line.split(" | ").collect();
        let x: Vec<f32> = parts[0].split(' ').map(|h| f32::from_bits(common::hex(h))).collect();
        let bytes = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| common::hex(&s[i..i + 2]) as u8)
                .collect()
        };
        let (want_packed, want_scales) = (bytes(parts[1]), bytes(parts[2]));
        let (mut packed, mut scales) = (vec![0; x.len() / 2], vec![0; x.len() / 32]);
        mxfp4::quantize_row(&x, &mut packed, &mut scales).unwrap();
        assert_eq!(scales, want_scales, "row {row_idx} scales");
        assert_eq!(packed, want_packed, "row {row_idx} packed");
    }
}
