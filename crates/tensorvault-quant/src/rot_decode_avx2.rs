//! Fused AVX2 decode of the rotated segments (TQTC v3 blocks and v4 super-blocks),
//! selected at run time: per run of 8 values the packed codes are extracted straight from
//! the bit stream (no code buffer), dequantized (v3: level lookup by `vpermps` or a gather,
//! times the block scale; v4: `min + scale * code` of the value's group, times
//! `1/sqrt(b)`), put through the transform's first three stages in registers
//! ([`crate::fwht_avx2::wht8`]) and stored; the remaining stages run on whole vectors and
//! the sign flip is one `vxorps` per vector.
//!
//! Every value goes through the same f32 operations in the same order as the scalar
//! decoders in `segment_rot.rs` / `segment_v4.rs` (multiplication is commutative, and no
//! operation is fused), so the output is bit for bit theirs (tested against them).

use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_ps, _mm256_and_si256, _mm256_blendv_ps, _mm256_castps_si256,
    _mm256_castsi256_ps, _mm256_cvtepi32_ps, _mm256_i32gather_ps, _mm256_loadu_ps,
    _mm256_loadu_si256, _mm256_mul_ps, _mm256_permutevar8x32_ps, _mm256_set1_epi32, _mm256_set1_ps,
    _mm256_set_m128, _mm256_set_m128i, _mm256_setr_epi32, _mm256_slli_epi32, _mm256_srlv_epi32,
    _mm256_storeu_ps, _mm256_xor_si256, _mm_set1_epi32, _mm_set1_ps,
};

use crate::fwht_avx2::{upper_stages, wht8};

/// Whether the fused path can run here (the detection macro caches its answer).
#[must_use]
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Codes `8k .. 8k + 8` of an LSB-first stream of `bits`-bit codes (`crate::bitpack`: 8
/// codes in `bits` bytes), one per 32-bit lane.
///
/// # Safety
/// AVX2; `bits` in 2..=8 and `packed` holds at least `(k + 1) * bits` bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn codes8(packed: &[u8], bits: usize, k: usize, shifts: __m256i) -> __m256i {
    let off = k * bits;
    let w = match packed.get(off..off + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => {
            let mut b = [0u8; 8];
            let tail = &packed[off..(off + bits).min(packed.len())];
            b[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(b)
        }
    };
    // Lanes 0-3 shift the low 32 bits, lanes 4-7 the 32 bits from code 4 on (4 codes of
    // at most 8 bits fit 32 bits either way).
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the low 32 bits are wanted"
    )]
    let (lo, hi) = (w as u32 as i32, (w >> (4 * bits)) as u32 as i32);
    let mask = _mm256_set1_epi32((1i32 << bits) - 1);
    _mm256_and_si256(
        _mm256_srlv_epi32(
            _mm256_set_m128i(_mm_set1_epi32(hi), _mm_set1_epi32(lo)),
            shifts,
        ),
        mask,
    )
}

/// The per-lane shift counts of [`codes8`] for `bits`.
#[target_feature(enable = "avx2")]
fn shifts_of(bits: usize) -> __m256i {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        reason = "bits <= 8"
    )]
    let b = bits as i32;
    _mm256_setr_epi32(0, b, 2 * b, 3 * b, 0, b, 2 * b, 3 * b)
}

/// After the values of a block are in `out` (stages 1-4 done per vector): the remaining
/// transform stages and the sign flip.
///
/// # Safety
/// AVX2; `out.len()` a power of two >= 8 and `masks` at least as long.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn finish(out: &mut [f32], masks: &[u32]) {
    // SAFETY: the contract (AVX2, power-of-two length >= 8).
    unsafe { upper_stages(out) };
    let p = out.as_mut_ptr();
    for i in (0..out.len()).step_by(8) {
        // SAFETY: i + 8 <= out.len() <= masks.len(): both 8-lane accesses are in bounds.
        unsafe {
            let m = _mm256_loadu_si256(masks.as_ptr().add(i).cast());
            let v = _mm256_castps_si256(_mm256_loadu_ps(p.add(i)));
            _mm256_storeu_ps(p.add(i), _mm256_castsi256_ps(_mm256_xor_si256(v, m)));
        }
    }
}

/// One v3 block: `out[j] = s * lut[code]` for codes `first .. first + out.len()` of
/// `packed`, then (with `masks`) the transform and the signs, as
/// `Rotation::inverse_prescaled` does.
///
/// # Safety
/// AVX2 ([`available`]); `bits` in 2..=8; `first` a multiple of 8; `out.len()` a power of
/// two >= 8 (and `masks`, if any, as long); `packed` holds the codes up to
/// `first + out.len()` (`packed_len` of at least that many codes).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn v3_block(
    packed: &[u8],
    bits: u8,
    first: usize,
    lut: &[f32; 256],
    s: f32,
    masks: Option<&[u32]>,
    out: &mut [f32],
) {
    let bits = usize::from(bits);
    let shifts = shifts_of(bits);
    let sv = _mm256_set1_ps(s);
    let lp = lut.as_ptr();
    // SAFETY: lut has 256 entries: both 8-lane loads are inside it.
    let (t_lo, t_hi) = unsafe { (_mm256_loadu_ps(lp), _mm256_loadu_ps(lp.add(8))) };
    let p = out.as_mut_ptr();
    for i in (0..out.len()).step_by(8) {
        // SAFETY: codes up to first + out.len() are in `packed` and i + 8 <= out.len()
        // (the contract); a gathered index is < 2^bits <= 256, inside `lut`.
        unsafe {
            let idx = codes8(packed, bits, (first + i) / 8, shifts);
            let level = match bits {
                2 | 3 => _mm256_permutevar8x32_ps(t_lo, idx),
                4 => _mm256_blendv_ps(
                    _mm256_permutevar8x32_ps(t_lo, idx),
                    _mm256_permutevar8x32_ps(t_hi, idx),
                    _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx)),
                ),
                _ => _mm256_i32gather_ps::<4>(lp, idx),
            };
            let v = _mm256_mul_ps(sv, level);
            _mm256_storeu_ps(p.add(i), if masks.is_some() { wht8(v) } else { v });
        }
    }
    if let Some(m) = masks {
        // SAFETY: the contract (AVX2, power-of-two length >= 8, masks as long).
        unsafe { finish(out, m) };
    }
}

/// One whole v4 super-block: `out[j] = min_g + scale_g * code` for codes `first ..
/// first + out.len()` (group `g = j / group`, its `(min, scale)` in `params`), then (with
/// `rot = Some((norm, masks))`) times `norm`, the transform and the signs, as
/// `Rotation::inverse` does.
///
/// # Safety
/// AVX2 ([`available`]); `bits` in 2..=8; `first` a multiple of 8; `group` a power of
/// two, at least 4, dividing `out.len()`, itself a multiple of 8 (a power of two >= 8 when rotated,
/// `masks` as long); `params` holds `out.len() / group` pairs; `packed` holds the codes up
/// to `first + out.len()`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn v4_super(
    packed: &[u8],
    bits: u8,
    first: usize,
    group: usize,
    params: &[(f32, f32)],
    rot: Option<(f32, &[u32])>,
    out: &mut [f32],
) {
    let bits = usize::from(bits);
    let shifts = shifts_of(bits);
    let norm = _mm256_set1_ps(rot.map_or(1.0, |r| r.0));
    let p = out.as_mut_ptr();
    for i in (0..out.len()).step_by(8) {
        let (gm, gs): (__m256, __m256) = if group >= 8 {
            let (m, s) = params[i / group];
            (_mm256_set1_ps(m), _mm256_set1_ps(s))
        } else {
            // Groups of 4: two groups per vector.
            let ((m0, s0), (m1, s1)) = (params[i / 4], params[i / 4 + 1]);
            (
                _mm256_set_m128(_mm_set1_ps(m1), _mm_set1_ps(m0)),
                _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0)),
            )
        };
        // SAFETY: codes up to first + out.len() are in `packed`, i + 8 <= out.len().
        unsafe {
            let c = _mm256_cvtepi32_ps(codes8(packed, bits, (first + i) / 8, shifts));
            let v = _mm256_add_ps(gm, _mm256_mul_ps(gs, c));
            let v = if rot.is_some() {
                wht8(_mm256_mul_ps(v, norm))
            } else {
                v
            };
            _mm256_storeu_ps(p.add(i), v);
        }
    }
    if let Some((_, m)) = rot {
        // SAFETY: the contract (AVX2, power-of-two length >= 8, masks as long).
        unsafe { finish(out, m) };
    }
}
