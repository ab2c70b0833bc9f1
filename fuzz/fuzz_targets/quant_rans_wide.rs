//! Differential fuzzing of the wide-lane rANS decoder (16 to 64 lanes, TQTC v5 §12.6): the
//! vector kernel this CPU has (`decode_codes`), the AVX2 one (`decode_codes_avx2`) and the
//! portable loop (`decode_codes_portable`) must return the same codes or the same typed
//! error for every input. Inputs are valid streams of fuzzer-chosen codes, then (half the time) damaged by
//! fuzzer-chosen bit flips and a cut, and decoded for a fuzzer-chosen symbol count, so the
//! decoder sees both well-formed streams and every kind of bad one.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_quant::entropy::{
    decode_codes, decode_codes_avx2, decode_codes_portable, encode_codes,
};

fuzz_target!(|data: &[u8]| {
    let [lanes, bits, mode, len_lo, len_hi, rest @ ..] = data else {
        return;
    };
    let lanes_log2 = 4 + lanes % 3;
    let bits = 2 + bits % 7;
    let n = usize::from(u16::from_le_bytes([*len_lo, *len_hi])) % 4096;
    let (codes, damage) = rest.split_at(n.min(rest.len()));
    let top = (1u16 << bits) - 1;
    let codes: Vec<u8> = codes.iter().map(|&c| (u16::from(c) & top) as u8).collect();
    let Ok(coded) = encode_codes(&codes, bits, lanes_log2) else {
        return; // no codes
    };
    let mut bytes = coded.bytes;
    let mut want = codes.len();
    if mode & 1 == 1 {
        // Flip bits at fuzzer-chosen places, cut the stream, ask for another count.
        let len = bytes.len().max(1);
        for pair in damage.chunks_exact(2) {
            let at = usize::from(pair[0]) * 31 + usize::from(pair[1] >> 3);
            if let Some(b) = bytes.get_mut(at % len) {
                *b ^= 1 << (pair[1] & 7);
            }
        }
        let cut = usize::from(mode >> 1) * 3;
        bytes.truncate(bytes.len().saturating_sub(cut));
        want = (want + usize::from(mode >> 4)).saturating_sub(usize::from(mode >> 6) * 5);
    }
    // An allocation of exactly the stream's length (a truncated Vec keeps its capacity),
    // so AddressSanitizer sees any vector load past the last byte.
    let bytes = bytes.into_boxed_slice();
    let mut fast = vec![0u8; want];
    let mut slow = vec![0u8; want];
    let a = decode_codes(&bytes, 7, bits, coded.prob_bits, lanes_log2, &mut fast);
    let b = decode_codes_portable(&bytes, 7, bits, coded.prob_bits, lanes_log2, &mut slow);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    if a.is_ok() {
        assert_eq!(fast, slow);
    }
    // The AVX2 kernel too, where the best one is AVX-512 (review15: it was fuzzed only on
    // CPUs without AVX-512).
    let mut avx2 = vec![0u8; want];
    let c = decode_codes_avx2(&bytes, 7, bits, coded.prob_bits, lanes_log2, &mut avx2);
    assert_eq!(format!("{c:?}"), format!("{b:?}"));
    if c.is_ok() {
        assert_eq!(avx2, slow);
    }
    if mode & 1 == 0 {
        a.unwrap();
        assert_eq!(fast, codes);
    }
});
