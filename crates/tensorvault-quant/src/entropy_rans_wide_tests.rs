use super::*;
use crate::entropy::{best_table, histogram, FreqTable};
use crate::entropy_rans::{decode_table, encode};
use proptest::prelude::*;

/// Bell-shaped codes of `bits` bits (a sum of uniforms around the middle code).
fn bell_codes(n: usize, bits: u8, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f64 / (1u64 << 24) as f64
    };
    let top = f64::from((1u32 << bits) - 1);
    (0..n)
        .map(|_| {
            let g: f64 = (0..6).map(|_| next()).sum::<f64>() - 3.0;
            (top / 2.0 + g * top / 5.0).round().clamp(0.0, top) as u8
        })
        .collect()
}

fn table_for(codes: &[u8], bits: u8) -> FreqTable {
    best_table(&histogram(codes, bits).unwrap()).unwrap()
}

fn stream_for(codes: &[u8], t: &FreqTable, lanes_log2: u8) -> Vec<u8> {
    let mut s = Vec::new();
    encode(codes, &t.freqs, t.prob_bits, lanes_log2, &mut s);
    s
}

const KERNELS: [Kernel; 3] = [Kernel::Portable, Kernel::Avx2, Kernel::Best];

/// Decode `stream` with every kernel; all must agree (codes and error); the common result.
fn decode_all(
    stream: &[u8],
    base: usize,
    t: &FreqTable,
    lanes_log2: u8,
    n: usize,
) -> Result<Vec<u8>, QuantError> {
    let table = decode_table(&t.freqs);
    let mut results = KERNELS.iter().map(|&k| {
        let mut out = vec![0u8; n];
        decode(stream, base, &table, t.prob_bits, lanes_log2, k, &mut out).map(|()| out)
    });
    let first = results.next().unwrap();
    for (k, r) in KERNELS[1..].iter().zip(results) {
        assert_eq!(
            format!("{r:?}"),
            format!("{first:?}"),
            "{k:?} differs from the portable loop ({} lanes, {n} symbols)",
            1 << lanes_log2
        );
    }
    first
}

#[test]
fn every_wide_lane_count_round_trips_on_every_kernel() {
    for lanes_log2 in 4..=6u8 {
        for bits in [2u8, 3, 4, 5, 6, 8] {
            for n in [1usize, 15, 16, 33, 64, 1000, 16384, 16320 + 7] {
                let codes = bell_codes(n, bits, u64::from(bits) * 31 + n as u64);
                let t = table_for(&codes, bits);
                let s = stream_for(&codes, &t, lanes_log2);
                let back = decode_all(&s, 40, &t, lanes_log2, n).unwrap();
                assert_eq!(
                    back, codes,
                    "{bits} bits, {n} codes, lanes_log2 {lanes_log2}"
                );
            }
        }
    }
}

#[test]
fn the_vector_rounds_run_on_a_vector_cpu() {
    // Guards against a dispatch that silently always falls back: on an AVX2 or AVX-512
    // CPU the kernels must decode most of a long stream themselves.
    let kernel = crate::entropy_rans_simd::kernel();
    if kernel == "portable" {
        return;
    }
    let codes = bell_codes(16384, 5, 9);
    let t = table_for(&codes, 5);
    for lanes_log2 in 4..=6u8 {
        let lanes = 1usize << lanes_log2;
        let s = stream_for(&codes, &t, lanes_log2);
        let table = decode_table(&t.freqs);
        let mut x = vec![0u32; lanes];
        let words = read_states(&s, 0, &mut x).unwrap();
        for k in [Kernel::Avx2, Kernel::Best] {
            let (mut xk, mut pos, mut out) = (x.clone(), 0, vec![0u8; codes.len()]);
            let done = decode_rounds(k, &mut xk, &table, t.prob_bits, words, &mut pos, &mut out);
            assert!(
                done > 16384 * 9 / 10,
                "{kernel} {k:?}: {done} of 16384 by vector"
            );
            assert_eq!(done % lanes, 0);
            assert_eq!(out[..done], codes[..done], "{k:?}");
        }
    }
}

#[test]
fn a_constant_run_needs_no_words() {
    // One symbol at 2^p: prob_bits 0 (a one-entry table, mask 0, shift 0).
    let t = FreqTable {
        prob_bits: 0,
        freqs: vec![0, 1, 0, 0],
    };
    let codes = vec![1u8; 200];
    for lanes_log2 in 4..=6u8 {
        let s = stream_for(&codes, &t, lanes_log2);
        assert_eq!(s.len(), 4 << lanes_log2, "states only");
        assert_eq!(decode_all(&s, 0, &t, lanes_log2, 200).unwrap(), codes);
    }
}

fn sample(lanes_log2: u8) -> (Vec<u8>, FreqTable, Vec<u8>) {
    let codes = bell_codes(3000, 4, 77);
    let t = table_for(&codes, 4);
    let s = stream_for(&codes, &t, lanes_log2);
    (codes, t, s)
}

#[test]
fn a_stream_cut_anywhere_is_the_same_typed_error_on_every_kernel() {
    for lanes_log2 in 4..=6u8 {
        let (codes, t, s) = sample(lanes_log2);
        let states = 4usize << lanes_log2;
        for cut in (0..s.len()).step_by(7).chain([s.len() - 2, s.len() - 1]) {
            let err = decode_all(&s[..cut], 100, &t, lanes_log2, codes.len()).unwrap_err();
            let present = (100 + cut) as u64;
            match err {
                QuantError::Truncated {
                    what: "rans states",
                    offset: 100,
                    present: p,
                    ..
                } => assert!(cut < states && p == present as usize, "{cut}"),
                QuantError::Truncated {
                    what: "rans stream",
                    offset,
                    present: p,
                    ..
                } => {
                    // The first missing word is the one just past the cut.
                    assert_eq!((offset, p), (present, present as usize), "cut {cut}");
                }
                QuantError::CorruptField { field, .. } => {
                    assert!(cut % 2 == 1 && field == "rans stream", "{cut}: {field}");
                }
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn states_out_of_range_and_wrong_final_states_are_refused_alike() {
    for lanes_log2 in 4..=6u8 {
        let (codes, t, s) = sample(lanes_log2);
        let n = codes.len();
        // Lane 9's initial state below 2^16.
        let mut low = s.clone();
        low[9 * 4..9 * 4 + 4].copy_from_slice(&0xFFFFu32.to_le_bytes());
        match decode_all(&low, 20, &t, lanes_log2, n).unwrap_err() {
            QuantError::CorruptField {
                field: "rans state",
                offset,
                value,
                ..
            } => assert_eq!((offset, value), (20 + 36, 0xFFFF)),
            other => panic!("{other:?}"),
        }
        // A changed initial state (still >= 2^16) decodes to a wrong end state: the
        // final-state check (or running out of words first) catches it.
        let mut off = s.clone();
        off[3 * 4 + 2] ^= 0x40;
        let e = decode_all(&off, 0, &t, lanes_log2, n).unwrap_err();
        assert!(
            matches!(
                e,
                QuantError::CorruptField {
                    field: "rans final state",
                    ..
                } | QuantError::Truncated { .. }
                    | QuantError::TrailingBytes { .. }
            ),
            "{e:?}"
        );
        // Two extra words: trailing bytes after the last symbol.
        let mut long = s.clone();
        long.extend_from_slice(&[1, 2, 3, 4]);
        match decode_all(&long, 0, &t, lanes_log2, n).unwrap_err() {
            QuantError::TrailingBytes { expected, present } => {
                assert_eq!((expected, present), (s.len() as u64, s.len() + 4));
            }
            other => panic!("{other:?}"),
        }
        // Fewer symbols than were coded: words are left over.
        assert!(matches!(
            decode_all(&s, 0, &t, lanes_log2, n - 5).unwrap_err(),
            QuantError::TrailingBytes { .. } | QuantError::CorruptField { .. }
        ));
    }
}

#[test]
fn flipped_bits_anywhere_give_the_same_result_on_every_kernel() {
    for lanes_log2 in 4..=6u8 {
        let (codes, t, s) = sample(lanes_log2);
        for at in (0..s.len()).step_by(5) {
            let mut bad = s.clone();
            bad[at] ^= 1 << (at % 8);
            // decode_all asserts the kernels agree, whatever the outcome.
            let _ = decode_all(&bad, 0, &t, lanes_log2, codes.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn any_table_lane_count_and_length_decodes_alike(
        bits in 2u8..=8,
        lanes_log2 in 4u8..=6,
        raw in proptest::collection::vec(any::<u8>(), 1..2500),
        skew in 0u32..4,
    ) {
        // `skew` piles codes onto few symbols (long runs of no renormalization).
        let top = (1u32 << bits) - 1;
        let codes: Vec<u8> = raw
            .iter()
            .map(|&b| ((u32::from(b) >> skew) & top) as u8)
            .collect();
        let t = table_for(&codes, bits);
        let s = stream_for(&codes, &t, lanes_log2);
        prop_assert_eq!(decode_all(&s, 0, &t, lanes_log2, codes.len()).unwrap(), codes);
    }

    #[test]
    fn arbitrary_streams_decode_alike(
        lanes_log2 in 4u8..=6,
        stream in proptest::collection::vec(any::<u8>(), 0..900),
        n in 0usize..700,
        seed in any::<u64>(),
    ) {
        // A valid table from random counts, then random bytes as the stream: states get
        // forced into range half the time so the decoder gets past them.
        let codes = bell_codes(200, 5, seed);
        let t = table_for(&codes, 5);
        let mut s = stream;
        if seed & 1 == 1 {
            for b in s.chunks_mut(4).take(1 << lanes_log2) {
                if let Some(hi) = b.get_mut(2) {
                    *hi |= 1;
                }
            }
        }
        let _ = decode_all(&s, 3, &t, lanes_log2, n);
    }
}
