//! Round trips and edge cases of the scalar formats.

use tensorfold_formats::{bf16, e2m1, e4m3, e8m0};

#[test]
fn bf16_round_trips_every_code() {
    for b in 0..=u16::MAX {
        let x = bf16::bf16_to_f32(b);
        let back = bf16::f32_to_bf16(x);
        if x.is_nan() {
            assert_eq!(back, b | 0x40, "NaN {b:#06x} must quieten and keep sign");
        } else {
            assert_eq!(back, b, "code {b:#06x}");
        }
    }
    assert_eq!(bf16::f32_to_bf16(-f32::NAN), 0xFFC0);
    assert_eq!(bf16::f32_to_bf16(f32::MAX), 0x7F80);
}

#[test]
fn e4m3_round_trips_and_saturates() {
    for c in 0..=255u8 {
        if c & 0x7F != 0x7F {
            assert_eq!(e4m3::encode(e4m3::decode(c)), c, "code {c:#04x}");
        }
    }
    assert_eq!(e4m3::decode(0x7E), e4m3::MAX);
    assert_eq!(e4m3::encode(1e9), 0x7E);
    assert_eq!(e4m3::encode(f32::NEG_INFINITY), 0xFE);
    assert_eq!(e4m3::encode(f32::NAN), 0x7F);
    assert_eq!(e4m3::encode(-f32::NAN), 0xFF);
    assert_eq!(e4m3::decode(1), 2f32.powi(-9));
}

#[test]
fn e2m1_round_trips_and_saturates() {
    for c in 0..16u8 {
        assert_eq!(e2m1::encode(e2m1::decode(c)), c, "code {c:#x}");
    }
    assert_eq!(e2m1::encode(f32::INFINITY), 0x7);
    assert_eq!(e2m1::encode(-100.0), 0xF);
    assert_eq!(e2m1::encode(f32::NAN), 0);
    assert_eq!(e2m1::encode(-f32::NAN), 0);
}

#[test]
fn e8m0_exponents() {
    for e in -127..=127 {
        let c = e8m0::from_exponent(e);
        assert_eq!(e8m0::decode(c), 2f64.powi(e) as f32, "2^{e}");
        assert_eq!(e8m0::encode(e8m0::decode(c)), c);
    }
    assert!(e8m0::decode(255).is_nan());
    assert_eq!(e8m0::encode(0.0), 0);
    assert_eq!(e8m0::encode(-3.0), e8m0::from_exponent(2));
    assert_eq!(e8m0::encode(1.5), e8m0::from_exponent(1));
    assert_eq!(e8m0::encode(1.4999999), e8m0::from_exponent(0));
    assert_eq!(e8m0::encode(f32::MAX), 255);
}

#[test]
#[should_panic(expected = "outside -127..=127")]
fn e8m0_from_exponent_rejects_128() {
    e8m0::from_exponent(128);
}
