//! Kimi K2 pack-quantized INT4 words.

use tensorfold_formats::int4_pack;

#[test]
fn every_value_in_every_slot() {
    for slot in 0..8 {
        for v in -8i8..=7 {
            let mut vals = [0i8; 8];
            vals[slot] = v;
            let w = int4_pack::pack_word(vals);
            // Stored as value + 8 in bits 4 * slot + 3..4 * slot; the other slots hold 0 + 8.
            let want = (0..8).fold(0u32, |acc, i| {
                acc | ((if i == slot { v + 8 } else { 8 }) as u32) << (4 * i)
            });
            assert_eq!(w as u32, want, "slot {slot} value {v}");
            assert_eq!(int4_pack::unpack_word(w), vals);
        }
    }
}

#[test]
fn unpack_reads_low_nibble_first() {
    assert_eq!(int4_pack::unpack_word(0x7654_3210), [-8, -7, -6, -5, -4, -3, -2, -1]);
    assert_eq!(int4_pack::unpack_word(0xFEDC_BA98u32 as i32), [0, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
#[should_panic(expected = "outside -8..=7")]
fn pack_rejects_out_of_range() {
    int4_pack::pack_word([0, 0, 8, 0, 0, 0, 0, 0]);
}

#[test]
fn dequantize_row_uses_group_scales() {
    let vals: Vec<i8> = (0..64).map(|i| (i % 16) as i8 - 8).collect();
    let packed: Vec<i32> = vals
        .chunks(8)
        .map(|c| int4_pack::pack_word(c.try_into().unwrap()))
        .collect();
    let mut out = vec![0.0; 64];
    int4_pack::dequantize_row(&packed, &[0.5, -3.0], &mut out).unwrap();
    for (i, &o) in out.iter().enumerate() {
        assert_eq!(o, vals[i] as f32 * if i < 32 { 0.5 } else { -3.0 }, "element {i}");
    }
    assert!(int4_pack::dequantize_row(&packed, &[0.5], &mut out).is_err());
    assert!(int4_pack::dequantize_row(&packed[..7], &[0.5, 1.0], &mut out).is_err());
    assert!(int4_pack::dequantize_row(&packed, &[0.5, 1.0], &mut out[..48]).is_err());
}
