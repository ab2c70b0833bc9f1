use super::*;
use proptest::prelude::*;

/// Codes shaped like quantized Gaussian data: most mass in the middle levels.
fn gaussian_codes(n: usize, bits: u8, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let top = (1u32 << bits) - 1;
    (0..n)
        .map(|_| {
            // Sum of 4 uniforms ~ bell shaped.
            let mut acc = 0u32;
            for _ in 0..4 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                acc += (s >> 40) as u32 % (top + 1);
            }
            (acc / 4) as u8
        })
        .collect()
}

fn round_trip(codes: &[u8], bits: u8, lanes_log2: u8) -> Coded {
    let c = encode_codes(codes, bits, lanes_log2).unwrap();
    let mut back = vec![0u8; codes.len()];
    decode_codes(&c.bytes, 0, bits, c.prob_bits, lanes_log2, &mut back).unwrap();
    assert_eq!(back, codes);
    c
}

#[test]
fn skewed_codes_take_fewer_bytes_than_packing_and_round_trip() {
    for bits in 2..=8u8 {
        for lanes in 0..=6u8 {
            // 16384 codes: 64 lanes' 256 state bytes are more than the 8-bit codes of a
            // 4096-code block save.
            let codes = gaussian_codes(16384, bits, 7);
            let c = round_trip(&codes, bits, lanes);
            let packed = codes.len() * usize::from(bits) / 8;
            assert!(
                c.bytes.len() < packed,
                "{bits} bits {lanes}: {} vs {packed}",
                c.bytes.len()
            );
        }
    }
}

#[test]
fn size_is_close_to_the_empirical_entropy() {
    let codes = gaussian_codes(1 << 16, 4, 3);
    let counts = histogram(&codes, 4).unwrap();
    let n = codes.len() as f64;
    let h: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| -(c as f64) * (c as f64 / n).log2())
        .sum::<f64>()
        / 8.0;
    let c = round_trip(&codes, 4, 2);
    // Within 0.5% of the entropy plus table and flushed states.
    assert!(
        (c.bytes.len() as f64) < h * 1.005 + 64.0,
        "{} vs {h}",
        c.bytes.len()
    );
}

#[test]
fn a_single_symbol_costs_only_the_table_and_states() {
    let codes = vec![5u8; 10_000];
    let c = round_trip(&codes, 3, 2);
    assert_eq!(c.bytes.len(), 8 + 4 * 4);
}

#[test]
fn quantized_tables_sum_to_the_precision_and_keep_every_symbol() {
    let counts: Vec<u64> = (0..256u64)
        .map(|i| if i % 3 == 0 { 0 } else { 1 + i * i * i })
        .collect();
    for pb in 8..=12u8 {
        let t = quantize(&counts, pb).unwrap();
        assert_eq!(t.freqs.iter().map(|&f| u32::from(f)).sum::<u32>(), 1 << pb);
        for (c, f) in counts.iter().zip(&t.freqs) {
            assert_eq!(*c > 0, *f > 0);
        }
    }
    // 171 symbols do not fit 128 slots.
    assert!(quantize(&counts, 7).is_none());
    assert!(quantize(&[0, 0, 0, 0], 12).is_none());
}

fn table_bytes(freqs: &[u16]) -> Vec<u8> {
    let mut v = Vec::new();
    FreqTable {
        prob_bits: 0,
        freqs: freqs.to_vec(),
    }
    .write(&mut v);
    v
}

#[test]
fn a_table_that_does_not_sum_to_the_precision_is_refused() {
    let t = table_bytes(&[100, 100, 100, 100]);
    let e = FreqTable::parse(&t, 40, 100, 2, 12).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::CorruptField {
                field: "frequency sum",
                offset: 40,
                value: 400,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_frequency_above_the_precision_is_refused() {
    let t = table_bytes(&[300, 0, 0, 0]);
    let e = FreqTable::parse(&t, 10, 100, 2, 8).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::CorruptField {
                field: "frequency",
                offset: 10,
                value: 300,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_three_byte_varint_is_refused() {
    let t = [0x80, 0x80, 0x01, 0, 0];
    let e = FreqTable::parse(&t, 10, 100, 2, 12).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::CorruptField {
                field: "frequency",
                offset: 11,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_table_cut_short_is_truncated() {
    let t = table_bytes(&[1024, 1024, 1024, 1024]);
    for cut in 0..t.len() {
        let e = FreqTable::parse(&t[..cut], 5, 5 + cut, 2, 12).unwrap_err();
        assert!(
            matches!(
                e,
                QuantError::Truncated {
                    what: "frequency table",
                    ..
                }
            ),
            "{cut}: {e}"
        );
    }
}

fn coded_sample() -> (Vec<u8>, Coded, usize) {
    let codes = gaussian_codes(1000, 3, 11);
    let c = encode_codes(&codes, 3, 2).unwrap();
    let table_len = FreqTable::parse(&c.bytes, 0, c.bytes.len(), 3, c.prob_bits)
        .unwrap()
        .1;
    (codes, c, table_len)
}

fn decode_err(bytes: &[u8], prob_bits: u8, n: usize) -> QuantError {
    let mut out = vec![0u8; n];
    decode_codes(bytes, 0, 3, prob_bits, 2, &mut out).unwrap_err()
}

#[test]
fn a_stream_cut_anywhere_is_a_typed_error() {
    let (codes, c, table_len) = coded_sample();
    for cut in table_len..c.bytes.len() {
        let e = decode_err(&c.bytes[..cut], c.prob_bits, codes.len());
        assert!(
            matches!(
                e,
                QuantError::Truncated {
                    what: "rans states" | "rans stream",
                    ..
                } | QuantError::CorruptField {
                    field: "rans stream" | "rans final state",
                    ..
                }
            ),
            "{cut}: {e}"
        );
    }
}

#[test]
fn extra_words_after_the_last_symbol_are_trailing_bytes() {
    let (codes, mut c, _) = coded_sample();
    c.bytes.extend_from_slice(&[0, 0]);
    let e = decode_err(&c.bytes, c.prob_bits, codes.len());
    assert!(matches!(e, QuantError::TrailingBytes { .. }), "{e}");
}

#[test]
fn a_state_below_the_lower_bound_is_refused() {
    let (codes, mut c, table_len) = coded_sample();
    c.bytes[table_len + 4..table_len + 8].copy_from_slice(&5u32.to_le_bytes());
    let e = decode_err(&c.bytes, c.prob_bits, codes.len());
    assert!(
        matches!(
            e,
            QuantError::CorruptField {
                field: "rans state",
                value: 5,
                ..
            }
        ),
        "{e}"
    );
    if let QuantError::CorruptField { offset, .. } = e {
        assert_eq!(offset, table_len + 4);
    }
}

#[test]
fn a_flipped_stream_bit_is_detected_or_decodes_to_valid_symbols() {
    let (codes, c, table_len) = coded_sample();
    let mut detected = 0;
    for byte in table_len..c.bytes.len() {
        let mut b = c.bytes.clone();
        b[byte] ^= 0x10;
        let mut out = vec![0u8; codes.len()];
        match decode_codes(&b, 0, 3, c.prob_bits, 2, &mut out) {
            Err(_) => detected += 1,
            Ok(()) => assert!(out.iter().all(|&s| s < 8)),
        }
    }
    // The final-state check catches nearly every flip (the store's CRC catches the rest).
    assert!(
        detected * 10 >= (c.bytes.len() - table_len) * 9,
        "{detected}"
    );
}

#[test]
fn bad_parameters_are_refused() {
    let codes = [1u8, 2, 3];
    assert!(matches!(
        encode_codes(&codes, 9, 2),
        Err(QuantError::InvalidBits { bits: 9 })
    ));
    assert!(matches!(
        encode_codes(&codes, 3, 7),
        Err(QuantError::InvalidParam {
            field: "lanes_log2",
            ..
        })
    ));
    assert!(matches!(
        encode_codes(&[], 3, 2),
        Err(QuantError::InvalidParam { field: "codes", .. })
    ));
    assert!(matches!(
        encode_codes(&[9], 3, 2),
        Err(QuantError::CodeOutOfRange {
            index: 0,
            code: 9,
            bits: 3
        })
    ));
    let mut out = [0u8; 3];
    assert!(matches!(
        decode_codes(&[], 0, 3, 13, 2, &mut out),
        Err(QuantError::InvalidParam {
            field: "prob_bits",
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn any_codes_round_trip(bits in 2u8..=8, lanes in 0u8..=6, raw in proptest::collection::vec(any::<u8>(), 1..3000), skew in 0u32..4) {
        // Skew by masking high bits away from some codes.
        let top = (1u16 << bits) - 1;
        let codes: Vec<u8> = raw
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let c = u16::from(c) & top;
                (if (i as u32 % 4) < skew { c >> (bits / 2) } else { c }) as u8
            })
            .collect();
        let c = encode_codes(&codes, bits, lanes).unwrap();
        let mut back = vec![0u8; codes.len()];
        decode_codes(&c.bytes, 0, bits, c.prob_bits, lanes, &mut back).unwrap();
        prop_assert_eq!(back, codes);
    }
}

/// The table rule of docs/formats/quant.md §12.3 as written: a full scan per unit moved.
fn quantize_by_scan(counts: &[u64], prob_bits: u8) -> Option<Vec<u16>> {
    let total: u64 = counts.iter().sum();
    let target = 1i64 << prob_bits;
    if total == 0 || counts.iter().filter(|&&c| c > 0).count() as i64 > target {
        return None;
    }
    let mut f: Vec<i64> = counts
        .iter()
        .map(|&c| {
            if c == 0 {
                0
            } else {
                let share = (u128::from(c) * target as u128 * 2 + u128::from(total))
                    / (2 * u128::from(total));
                (share as i64).max(1)
            }
        })
        .collect();
    let mut diff = target - f.iter().sum::<i64>();
    while diff != 0 {
        let mut pick: Option<usize> = None;
        for s in 0..f.len() {
            let ok = if diff > 0 { counts[s] > 0 } else { f[s] > 1 };
            if !ok {
                continue;
            }
            let r = counts[s] as f64 / f[s] as f64;
            let better = pick.is_none_or(|p| {
                let rp = counts[p] as f64 / f[p] as f64;
                if diff > 0 {
                    r > rp
                } else {
                    r < rp
                }
            });
            if better {
                pick = Some(s);
            }
        }
        let s = pick?;
        f[s] += diff.signum();
        diff -= diff.signum();
    }
    Some(f.iter().map(|&v| v as u16).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn the_heap_picks_what_the_scan_picks(
        counts in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..5, 1u64..100_000], 4..=256),
        pb in 1u8..=12,
    ) {
        prop_assert_eq!(quantize(&counts, pb).map(|t| t.freqs), quantize_by_scan(&counts, pb));
    }
}
