//! Vector rounds of the wide-lane rANS decoder ([`crate::entropy_rans_wide`]): AVX-512
//! (16 lanes per vector) or AVX2 (8 lanes per vector), selected at run time. A round
//! decodes one symbol on every lane, `N / 16` (or `N / 8`) independent vectors at a time
//! so their table gathers and multiplies overlap (one vector alone is a single dependency
//! chain and is slower than four scalar lanes: bench/RESULTS.md, session 11).
//!
//! Per vector, with `x` the lanes' states: `e = table[x & (2^p - 1)]` (a gather), `x =
//! freq(e) * (x >> p) + bias(e)`, then the lanes with `x < 2^16` take the next words of the
//! stream in lane order (AVX-512: `vpexpandd` of 16 zero-extended words; AVX2: a
//! permutation from a 256-entry table indexed by the lane mask), and the stream position
//! advances by the number of those lanes. That is the scalar step
//! ([`crate::entropy_rans::step`]) on every lane, in the order the scalar loop runs them,
//! so the states, words read and symbols are the same bit for bit.
//!
//! All `unsafe` of the wide decoder is in this module. [`decode_rounds`] is safe: it checks
//! the CPU's features and every bound the kernels rely on before calling them.

use crate::entropy_rans::DecEntry;

/// Which vector units [`decode_rounds`] may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// None: the caller runs the portable loop.
    Portable,
    /// AVX2 even where AVX-512 is present (tests and fuzzing of the AVX2 kernel on
    /// AVX-512 CPUs: `entropy::decode_codes_avx2`).
    Avx2,
    /// The widest the CPU has: AVX-512F, else AVX2, else none.
    Best,
}

/// Decode whole rounds of `x.len()` symbols (16, 32 or 64 lanes) into `out` with the
/// vector units `kernel` allows, starting at byte `*pos` of `words`, while at least `2 * x.len()` bytes
/// remain from `*pos` and a whole round of `out` is left. Returns the number of symbols
/// decoded (a multiple of `x.len()`; 0 for [`Kernel::Portable`], when the CPU has neither AVX-512 nor AVX2, or the
/// lane count or table is not one the kernels take), with `x` and `*pos` advanced past
/// them. `table` must have `2^prob_bits` entries (0 symbols decoded otherwise).
pub(crate) fn decode_rounds(
    kernel: Kernel,
    x: &mut [u32],
    table: &[DecEntry],
    prob_bits: u8,
    words: &[u8],
    pos: &mut usize,
    out: &mut [u8],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if kernel == Kernel::Portable {
            return 0;
        }
        x86::decode_rounds(kernel == Kernel::Best, x, table, prob_bits, words, pos, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kernel, x, table, prob_bits, words, pos, out);
        0
    }
}

/// Which kernel [`decode_rounds`] uses on this CPU: `"avx512"`, `"avx2"` or `"portable"`
/// (bench labels and test messages).
#[must_use]
pub(crate) fn kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "portable"
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::DecEntry;
    use crate::layout::{RANS_L, RANS_WORD_BYTES};
    use std::arch::x86_64::{
        _mm256_add_epi32, _mm256_and_si256, _mm256_blendv_epi8, _mm256_castsi256_ps,
        _mm256_castsi256_si128, _mm256_cmpgt_epi32, _mm256_cvtepu16_epi32,
        _mm256_extracti128_si256, _mm256_i32gather_epi32, _mm256_loadu_si256, _mm256_movemask_ps,
        _mm256_mullo_epi32, _mm256_or_si256, _mm256_permutevar8x32_epi32, _mm256_set1_epi32,
        _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_slli_epi32, _mm256_srl_epi32,
        _mm256_srli_epi32, _mm256_storeu_si256, _mm256_xor_si256, _mm512_add_epi32,
        _mm512_and_si512, _mm512_cmplt_epu32_mask, _mm512_cvtepi32_epi8, _mm512_cvtepu16_epi32,
        _mm512_i32gather_epi32, _mm512_loadu_si512, _mm512_mask_or_epi32,
        _mm512_maskz_expand_epi32, _mm512_mullo_epi32, _mm512_set1_epi32, _mm512_slli_epi32,
        _mm512_srl_epi32, _mm512_srli_epi32, _mm512_storeu_si512, _mm_cvtsi32_si128,
        _mm_loadu_si128, _mm_storel_epi64, _mm_storeu_si128, _mm_unpacklo_epi32,
    };

    /// See [`super::decode_rounds`].
    pub(super) fn decode_rounds(
        allow_avx512: bool,
        x: &mut [u32],
        table: &[DecEntry],
        prob_bits: u8,
        words: &[u8],
        pos: &mut usize,
        out: &mut [u8],
    ) -> usize {
        if prob_bits > 31 || table.len() != 1usize << prob_bits || *pos > words.len() {
            return 0;
        }
        // POPCNT counts the renormalizing lanes on the stream position's dependency chain
        // (without it `count_ones` is a dozen dependent instructions).
        if !std::arch::is_x86_feature_detected!("popcnt") {
            return 0;
        }
        let avx512 = allow_avx512 && std::arch::is_x86_feature_detected!("avx512f");
        if !avx512 && !std::arch::is_x86_feature_detected!("avx2") {
            return 0;
        }
        // SAFETY: for every call below, the CPU has the kernel's features (just detected);
        // `x.len()` is 16 * V (AVX-512) or 8 * V (AVX2) for the V passed; `table` has
        // 2^prob_bits entries; `*pos <= words.len()` (checked above). The kernels check
        // the remaining bounds per round.
        unsafe {
            match (avx512, x.len()) {
                (true, 16) => avx512_rounds::<1>(x, table, prob_bits, words, pos, out),
                (true, 32) => avx512_rounds::<2>(x, table, prob_bits, words, pos, out),
                (true, 64) => avx512_rounds::<4>(x, table, prob_bits, words, pos, out),
                (false, 16) => avx2_rounds::<2>(x, table, prob_bits, words, pos, out),
                (false, 32) => avx2_rounds::<4>(x, table, prob_bits, words, pos, out),
                (false, 64) => avx2_rounds::<8>(x, table, prob_bits, words, pos, out),
                _ => 0,
            }
        }
    }

    /// Whole rounds of `16 * V` lanes with AVX-512F.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and POPCNT; `x.len() == 16 * V`; `table.len() == 2^prob_bits`
    /// with `prob_bits <= 31`; `*pos <= words.len()`.
    #[target_feature(enable = "avx512f,popcnt")]
    unsafe fn avx512_rounds<const V: usize>(
        x: &mut [u32],
        table: &[DecEntry],
        prob_bits: u8,
        words: &[u8],
        pos: &mut usize,
        out: &mut [u8],
    ) -> usize {
        let lanes = 16 * V;
        debug_assert_eq!(x.len(), lanes);
        let rounds = out.len() / lanes;
        let wp = words.as_ptr();
        let tp = table.as_ptr().cast::<i32>();
        let op = out.as_mut_ptr();
        let mut p = *pos;
        let mut r = 0;
        // SAFETY: AVX-512F and POPCNT are available (the contract). Loads and stores: `x` holds
        // exactly 16 * V u32 (the contract), so the V 64-byte accesses at 16 * v stay in
        // it. Gathers: every index is `state & (2^prob_bits - 1)` < table.len(). Word
        // loads: a round starts only with `p + 2 * lanes <= words.len()`; vector v's load
        // starts at most 16 words (32 bytes) per earlier vector past the round's start
        // (a vector takes at most one word per lane) and reads 32 bytes, so it ends at
        // most `p + 32 * V = p + 2 * lanes` bytes in. Output stores: round r writes bytes
        // `r * lanes .. (r + 1) * lanes` with `r < out.len() / lanes`.
        unsafe {
            let mut xs = [_mm512_set1_epi32(0); V];
            for (v, s) in xs.iter_mut().enumerate() {
                *s = _mm512_loadu_si512(x.as_ptr().add(16 * v).cast());
            }
            let mask = _mm512_set1_epi32(((1u64 << prob_bits) - 1) as u32 as i32);
            let low = _mm512_set1_epi32(RANS_L as i32);
            let one = _mm512_set1_epi32(1);
            let bias_mask = _mm512_set1_epi32(0xFFF);
            let shift = _mm_cvtsi32_si128(i32::from(prob_bits));
            while r < rounds && p + 2 * lanes <= words.len() {
                for (v, s) in xs.iter_mut().enumerate() {
                    let e = _mm512_i32gather_epi32::<4>(_mm512_and_si512(*s, mask), tp);
                    let freq = _mm512_add_epi32(_mm512_srli_epi32::<20>(e), one);
                    let bias = _mm512_and_si512(_mm512_srli_epi32::<8>(e), bias_mask);
                    let y = _mm512_add_epi32(
                        _mm512_mullo_epi32(freq, _mm512_srl_epi32(*s, shift)),
                        bias,
                    );
                    let m = _mm512_cmplt_epu32_mask(y, low);
                    let w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(wp.add(p).cast()));
                    let w = _mm512_maskz_expand_epi32(m, w);
                    *s = _mm512_mask_or_epi32(y, m, _mm512_slli_epi32::<16>(y), w);
                    p += RANS_WORD_BYTES * m.count_ones() as usize;
                    _mm_storeu_si128(op.add(r * lanes + 16 * v).cast(), _mm512_cvtepi32_epi8(e));
                }
                r += 1;
            }
            for (v, s) in xs.iter().enumerate() {
                _mm512_storeu_si512(x.as_mut_ptr().add(16 * v).cast(), *s);
            }
        }
        *pos = p;
        r * lanes
    }

    /// For each 8-lane mask, the source word of each lane: lane `j` of a renormalizing
    /// set takes the k-th loaded word, k = the set lanes below `j` (others: any index,
    /// their word is not used).
    static EXPAND: [[u32; 8]; 256] = {
        let mut t = [[0u32; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let (mut k, mut j) = (0, 0);
            while j < 8 {
                if (m >> j) & 1 == 1 {
                    t[m][j] = k;
                    k += 1;
                }
                j += 1;
            }
            m += 1;
        }
        t
    };

    /// Whole rounds of `8 * V` lanes with AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2 and POPCNT; `x.len() == 8 * V`; `table.len() == 2^prob_bits` with
    /// `prob_bits <= 31`; `*pos <= words.len()`.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn avx2_rounds<const V: usize>(
        x: &mut [u32],
        table: &[DecEntry],
        prob_bits: u8,
        words: &[u8],
        pos: &mut usize,
        out: &mut [u8],
    ) -> usize {
        let lanes = 8 * V;
        debug_assert_eq!(x.len(), lanes);
        let rounds = out.len() / lanes;
        let wp = words.as_ptr();
        let tp = table.as_ptr().cast::<i32>();
        let op = out.as_mut_ptr();
        let mut p = *pos;
        let mut r = 0;
        // SAFETY: AVX2 and POPCNT are available (the contract). `x` holds 8 * V u32, so the V 32-byte
        // accesses at 8 * v stay in it. Gathers: every index is `state & (2^prob_bits -
        // 1)` < table.len(). Word loads: a round starts only with `p + 2 * lanes <=
        // words.len()`; vector v's 16-byte load starts at most 8 words (16 bytes) per
        // earlier vector past the round's start, so it ends at most `p + 16 * V = p + 2 *
        // lanes` bytes in. `EXPAND[m]` has 8 u32 (32 bytes) and `m < 256`. Output stores:
        // round r writes 8 bytes at `r * lanes + 8 * v` for v < V, inside `out`.
        unsafe {
            let mut xs = [_mm256_set1_epi32(0); V];
            for (v, s) in xs.iter_mut().enumerate() {
                *s = _mm256_loadu_si256(x.as_ptr().add(8 * v).cast());
            }
            let mask = _mm256_set1_epi32(((1u64 << prob_bits) - 1) as u32 as i32);
            // Unsigned `y < 2^16` as a signed compare of both sides with the top bit flipped.
            let sign = _mm256_set1_epi32(i32::MIN);
            let low = _mm256_set1_epi32((RANS_L ^ 0x8000_0000) as i32);
            let one = _mm256_set1_epi32(1);
            let bias_mask = _mm256_set1_epi32(0xFFF);
            let shift = _mm_cvtsi32_si128(i32::from(prob_bits));
            // Byte 0 of each 32-bit lane, to the low 4 bytes of each 128-bit half.
            let pick = _mm256_setr_epi8(
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1,
                -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            while r < rounds && p + 2 * lanes <= words.len() {
                for (v, s) in xs.iter_mut().enumerate() {
                    let e = _mm256_i32gather_epi32::<4>(tp, _mm256_and_si256(*s, mask));
                    let freq = _mm256_add_epi32(_mm256_srli_epi32::<20>(e), one);
                    let bias = _mm256_and_si256(_mm256_srli_epi32::<8>(e), bias_mask);
                    let y = _mm256_add_epi32(
                        _mm256_mullo_epi32(freq, _mm256_srl_epi32(*s, shift)),
                        bias,
                    );
                    let c = _mm256_cmpgt_epi32(low, _mm256_xor_si256(y, sign));
                    let m = _mm256_movemask_ps(_mm256_castsi256_ps(c)) as usize & 0xFF;
                    let w = _mm256_cvtepu16_epi32(_mm_loadu_si128(wp.add(p).cast()));
                    let idx = _mm256_loadu_si256(EXPAND[m].as_ptr().cast());
                    let w = _mm256_permutevar8x32_epi32(w, idx);
                    let renorm = _mm256_or_si256(_mm256_slli_epi32::<16>(y), w);
                    *s = _mm256_blendv_epi8(y, renorm, c);
                    p += RANS_WORD_BYTES * m.count_ones() as usize;
                    let b = _mm256_shuffle_epi8(e, pick);
                    let syms = _mm_unpacklo_epi32(
                        _mm256_castsi256_si128(b),
                        _mm256_extracti128_si256::<1>(b),
                    );
                    _mm_storel_epi64(op.add(r * lanes + 8 * v).cast(), syms);
                }
                r += 1;
            }
            for (v, s) in xs.iter().enumerate() {
                _mm256_storeu_si256(x.as_mut_ptr().add(8 * v).cast(), *s);
            }
        }
        *pos = p;
        r * lanes
    }
}
