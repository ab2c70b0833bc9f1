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
    __m128i, __m256, __m256i, _mm256_add_ps, _mm256_and_si256, _mm256_blendv_ps,
    _mm256_castps_si256, _mm256_castsi256_ps, _mm256_cmpeq_epi32, _mm256_cvtepi32_ps,
    _mm256_cvtepu8_epi32, _mm256_i32gather_ps, _mm256_loadu_ps, _mm256_mul_ps,
    _mm256_permutevar8x32_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_set_m128, _mm256_set_m128i,
    _mm256_setr_epi32, _mm256_setzero_ps, _mm256_slli_epi32, _mm256_srlv_epi32, _mm256_storeu_ps,
    _mm256_sub_ps, _mm256_xor_si256, _mm_loadl_epi64, _mm_set1_epi32, _mm_set1_ps,
};

use crate::fwht_avx2::wht8;

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

/// The sign words of one block on the stack (at most 1024 values: 16 words).
pub(crate) struct Signs {
    words: [u64; 16],
}

impl Signs {
    /// The signs of `seed` for blocks of `block` values (`block` <= 1024).
    pub(crate) fn new(seed: u32, block: usize) -> Self {
        let mut words = [0u64; 16];
        for (w, s) in words
            .iter_mut()
            .zip(crate::rotation::sign_words(seed, block))
        {
            *w = s;
        }
        Self { words }
    }

    /// Sign-bit masks of positions `pos .. pos + 8` (`pos` a multiple of 8).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mask8(&self, pos: usize) -> __m256i {
        #[allow(clippy::cast_possible_truncation, reason = "one byte of the word")]
        let byte = ((self.words[pos / 64] >> (pos % 64)) & 0xFF) as i32;
        let bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(byte), bit), bit);
        _mm256_and_si256(set, _mm256_set1_epi32(i32::MIN))
    }
}

/// The butterflies of vector strides `1, 2, .., G/2` over the `G` vectors at
/// `first + k * stride` (vector units, 8 values each) of `p`, in registers; with `signs`,
/// the sign flip before the store.
///
/// # Safety
/// AVX2; every vector `first + k * stride` for `k < G` lies inside the block at `p`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn group<const G: usize>(p: *mut f32, first: usize, stride: usize, signs: Option<&Signs>) {
    let mut v = [_mm256_setzero_ps(); G];
    for (k, x) in v.iter_mut().enumerate() {
        // SAFETY: inside the block (the contract).
        *x = unsafe { _mm256_loadu_ps(p.add((first + k * stride) * 8)) };
    }
    let mut h = 1;
    while h < G {
        for k in 0..G {
            if k & h == 0 {
                let (a, b) = (v[k], v[k + h]);
                v[k] = _mm256_add_ps(a, b);
                v[k + h] = _mm256_sub_ps(a, b);
            }
        }
        h *= 2;
    }
    for (k, x) in v.iter().enumerate() {
        let pos = (first + k * stride) * 8;
        let x = match signs {
            Some(s) => _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(*x), s.mask8(pos))),
            None => *x,
        };
        // SAFETY: inside the block (the contract).
        unsafe { _mm256_storeu_ps(p.add(pos), x) };
    }
}

/// [`group`] with `g` (a power of two, 1..=16) chosen at run time.
///
/// # Safety
/// As [`group`].
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn group_n(g: usize, p: *mut f32, first: usize, stride: usize, signs: Option<&Signs>) {
    // SAFETY: the contract, passed on.
    unsafe {
        match g {
            1 => group::<1>(p, first, stride, signs),
            2 => group::<2>(p, first, stride, signs),
            4 => group::<4>(p, first, stride, signs),
            8 => group::<8>(p, first, stride, signs),
            _ => group::<16>(p, first, stride, signs),
        }
    }
}

/// After every vector of `out` went through [`wht8`]: the transform's stages `h >= 8`
/// and the sign flip, in at most two passes over the block (vector strides 1-8 in
/// registers 16 vectors at a time, then strides 16-64 eight vectors at a time). Each
/// value meets the same butterflies in the same stage order as the in-memory loop, so
/// the bits are the same.
///
/// # Safety
/// AVX2; `out.len()` a power of two in 8..=1024.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn finish(out: &mut [f32], signs: &Signs) {
    let nv = out.len() / 8;
    let p = out.as_mut_ptr();
    let g1 = nv.min(16);
    let last1 = nv <= 16;
    for first in (0..nv).step_by(g1) {
        // SAFETY: vectors first .. first + g1 are inside the block (nv a multiple of g1).
        unsafe { group_n(g1, p, first, 1, last1.then_some(signs)) };
    }
    if !last1 {
        for lo in 0..16 {
            // SAFETY: vectors lo + 16k for k < nv / 16 are inside the block.
            unsafe { group_n(nv / 16, p, lo, 16, Some(signs)) };
        }
    }
}

/// Codes `first .. first + 8` of one-code-per-byte `codes`, one per 32-bit lane.
///
/// # Safety
/// AVX2; `codes` holds at least `first + 8` bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn bytes8(codes: &[u8], first: usize) -> __m256i {
    // SAFETY: `first + 8 <= codes.len()` (the contract): the 8-byte load is inside.
    unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(codes.as_ptr().add(first).cast::<__m128i>())) }
}

/// One v3 block: `out[j] = s * lut[code]` for codes `first .. first + out.len()` of
/// `codes` (packed `bits` wide, or with `BYTES` one per byte), then (with `signs`) the
/// transform and the signs, as `Rotation::inverse_prescaled` does.
///
/// # Safety
/// AVX2 ([`available`]); `bits` in 2..=8; `first` a multiple of 8; `out.len()` a power of
/// two in 8..=1024; `codes` holds the codes up to `first + out.len()` (`packed_len` of
/// at least that many codes; with `BYTES`, that many bytes, each below `2^bits`).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn v3_block<const BYTES: bool>(
    codes: &[u8],
    bits: u8,
    first: usize,
    lut: &[f32; 256],
    s: f32,
    signs: Option<&Signs>,
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
            let idx = if BYTES {
                bytes8(codes, first + i)
            } else {
                codes8(codes, bits, (first + i) / 8, shifts)
            };
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
            _mm256_storeu_ps(p.add(i), if signs.is_some() { wht8(v) } else { v });
        }
    }
    if let Some(s) = signs {
        // SAFETY: the contract (AVX2, a power-of-two length in 8..=1024).
        unsafe { finish(out, s) };
    }
}

/// One whole v4 super-block: `out[j] = min_g + scale_g * code` for codes `first ..
/// first + out.len()` (group `g = j / group`, its `(min, scale)` in `params`), then (with
/// `rot = Some((norm, signs))`) times `norm`, the transform and the signs, as
/// `Rotation::inverse` does.
///
/// # Safety
/// AVX2 ([`available`]); `bits` in 2..=8; `first` a multiple of 8; `group` a power of
/// two, at least 4, dividing `out.len()`, itself a multiple of 8 (a power of two in 8..=1024 when rotated); `params` holds `out.len() / group` pairs; `packed` holds the codes up
/// to `first + out.len()`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn v4_super(
    packed: &[u8],
    bits: u8,
    first: usize,
    group: usize,
    params: &[(f32, f32)],
    rot: Option<(f32, &Signs)>,
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
    if let Some((_, s)) = rot {
        // SAFETY: the contract (AVX2, a power-of-two length in 8..=1024).
        unsafe { finish(out, s) };
    }
}
