//! Our reading of ggml's Q8_0 / Q4_0 against fixtures made by the real `gguf` 0.19.0
//! package (`tests/fixtures/gguf/`, see its README): gguf's blocks, re-laid out as our
//! codes, decode bit-exactly to gguf's own dequantization, and our quantizer at the same
//! bits per value matches gguf's error.

use std::path::PathBuf;

use tensorvault_quant::bitpack;
use tensorvault_quant::groupwise::{decode, encode, Levels, QuantParams};
use tensorvault_quant::metrics::ErrorMetrics;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A version-1 `.npy` holding little-endian f32.
fn npy_f32(name: &str) -> Vec<f32> {
    let b = fixture(name);
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hlen = usize::from(u16::from_le_bytes([b[8], b[9]]));
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(
        header.contains("'<f4'") && header.contains("False"),
        "{header}"
    );
    b[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

const QK: usize = 32;

#[test]
fn q8_0_blocks_decode_exactly_as_gguf() {
    let raw = fixture("q8_0.bin");
    let want = npy_f32("q8_0_dequant_f32.npy");
    let (mut scales, mut codes) = (Vec::new(), Vec::new());
    for blk in raw.chunks_exact(2 + QK) {
        scales.push(u16::from_le_bytes([blk[0], blk[1]]));
        // int8 q -> our offset code u = q + 128.
        codes.extend(blk[2..].iter().map(|&q| (q as i8 as i32 + 128) as u8));
    }
    assert_eq!(codes.len(), want.len());
    let p = QuantParams::new(8, QK).unwrap();
    let mut got = vec![0f32; want.len()];
    decode(&p, &scales, &codes, &mut got).unwrap();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn q4_0_blocks_decode_exactly_as_gguf_full_levels() {
    let raw = fixture("q4_0.bin");
    let want = npy_f32("q4_0_dequant_f32.npy");
    let (mut scales, mut codes) = (Vec::new(), Vec::new());
    for blk in raw.chunks_exact(2 + QK / 2) {
        scales.push(u16::from_le_bytes([blk[0], blk[1]]));
        // Byte j: weight j in the low nibble, weight j + 16 in the high nibble; the nibble
        // is q + 8, which is our 4-bit offset code.
        let nib = &blk[2..];
        codes.extend(nib.iter().map(|b| b & 0x0f));
        codes.extend(nib.iter().map(|b| b >> 4));
    }
    let p = QuantParams::new(4, QK).unwrap().with_levels(Levels::Full);
    let mut packed = vec![0u8; p.packed_len(codes.len())];
    bitpack::pack(&codes, 4, &mut packed).unwrap();
    let mut got = vec![0f32; want.len()];
    decode(&p, &scales, &packed, &mut got).unwrap();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

fn ours(p: &QuantParams, x: &[f32]) -> ErrorMetrics {
    let mut s = vec![0u16; p.groups(x.len())];
    let mut q = vec![0u8; p.packed_len(x.len())];
    encode(p, x, &mut s, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    decode(p, &s, &q, &mut y).unwrap();
    ErrorMetrics::compare(x, &y).unwrap()
}

#[test]
fn error_at_equal_bits_per_value_matches_gguf() {
    let x = npy_f32("input_f32.npy");
    let g8 = ErrorMetrics::compare(&x, &npy_f32("q8_0_dequant_f32.npy")).unwrap();
    let g4 = ErrorMetrics::compare(&x, &npy_f32("q4_0_dequant_f32.npy")).unwrap();
    // The README's figures: Q8_0 RMSE 0.0052835, Q4_0 0.084640.
    assert!((g8.rmse - 0.0052835).abs() < 1e-6 && (g4.rmse - 0.084640).abs() < 1e-5);
    // 8.5 bits/value: same scheme, scale rounded up to f16 instead of to nearest.
    let o8 = ours(&QuantParams::new(8, QK).unwrap(), &x);
    assert!(o8.rmse <= g8.rmse * 1.05, "{} vs {}", o8.rmse, g8.rmse);
    // 4.5 bits/value: full levels reproduce Q4_0's error, symmetric levels cost more.
    let o4f = ours(
        &QuantParams::new(4, QK).unwrap().with_levels(Levels::Full),
        &x,
    );
    assert!(o4f.rmse <= g4.rmse * 1.01, "{} vs {}", o4f.rmse, g4.rmse);
    let o4s = ours(&QuantParams::new(4, QK).unwrap(), &x);
    assert!(
        o4s.rmse > g4.rmse && o4s.rmse < g4.rmse * 1.25,
        "{} vs {}",
        o4s.rmse,
        g4.rmse
    );
}
