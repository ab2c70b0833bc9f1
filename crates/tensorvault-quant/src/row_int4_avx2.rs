//! The CVC int4 row decode of [`crate::row_int4`] with AVX2, selected at run time.
//!
//! Per row the decoder builds the 16-entry table `t[c] = c * step + min` (the same f32
//! multiplication and addition, in the same order, as the scalar decoder), then for each
//! run of 16 values: 8 code bytes are split into 16 nibbles (`vpand`/`vpsrlw`/`vpunpcklbw`),
//! widened to 32-bit indices, looked up in `t` by two `vpermps` and a blend on index bit 3,
//! and finished with one `vmulps` by the column scale and one `vaddps` of the column offset
//! (two rounded operations, never an FMA). Every output is therefore bit for bit the scalar
//! path's `(c * step + min) * scale + offset` (tested against it).
//!
//! AVX-512 would do the lookup in one `vpermps zmm`, but its intrinsics are newer than the
//! crate's MSRV (1.86), so it is not used.

/// Whether the AVX2 path can run here (the detection macro caches its answer).
#[cfg(target_arch = "x86_64")]
#[must_use]
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Decode the first `16 * (out.len() / 16)` values of one row: `out[j] = table[c_j] *
/// scale[j] + offset[j]`, where `c_j` is nibble `j` of `packed` (low nibble first).
/// Returns how many values were written (the caller finishes the tail).
///
/// # Safety
/// The CPU must support AVX2 ([`available`]). `scale` and `offset` must be at least
/// `out.len()` long and `packed` at least `out.len() / 2` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn decode_row(
    table: &[f32; 16],
    packed: &[u8],
    scale: &[f32],
    offset: &[f32],
    out: &mut [f32],
) -> usize {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_blendv_ps, _mm256_castsi256_ps, _mm256_cvtepu8_epi32,
        _mm256_loadu_ps, _mm256_mul_ps, _mm256_permutevar8x32_ps, _mm256_slli_epi32,
        _mm256_storeu_ps, _mm_and_si128, _mm_loadl_epi64, _mm_set1_epi8, _mm_srli_epi16,
        _mm_srli_si128, _mm_unpacklo_epi8,
    };
    let n = out.len() / 16 * 16;
    debug_assert!(scale.len() >= n && offset.len() >= n && packed.len() >= n / 2);
    let (tp, sp, op, pp, dp) = (
        table.as_ptr(),
        scale.as_ptr(),
        offset.as_ptr(),
        packed.as_ptr(),
        out.as_mut_ptr(),
    );
    // SAFETY: the table has 16 f32s, so both 8-lane loads are inside it.
    let (t_lo, t_hi) = unsafe { (_mm256_loadu_ps(tp), _mm256_loadu_ps(tp.add(8))) };
    let low = _mm_set1_epi8(0x0F);
    let mut j = 0;
    while j < n {
        // SAFETY: j + 16 <= n, so bytes j/2 .. j/2 + 8 are inside `packed` (at least n/2
        // bytes) and values j .. j + 16 inside `scale`, `offset` and `out` (the contract).
        unsafe {
            let b = _mm_loadl_epi64(pp.add(j / 2).cast());
            let lo = _mm_and_si128(b, low);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), low);
            // Bytes in value order: low nibble of byte k, then its high nibble.
            let nib = _mm_unpacklo_epi8(lo, hi);
            for (half, idx) in [
                (0, _mm256_cvtepu8_epi32(nib)),
                (8, _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(nib))),
            ] {
                let t = _mm256_blendv_ps(
                    _mm256_permutevar8x32_ps(t_lo, idx),
                    _mm256_permutevar8x32_ps(t_hi, idx),
                    _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx)),
                );
                let k = j + half;
                let x = _mm256_add_ps(
                    _mm256_mul_ps(t, _mm256_loadu_ps(sp.add(k))),
                    _mm256_loadu_ps(op.add(k)),
                );
                _mm256_storeu_ps(dp.add(k), x);
            }
        }
        j += 16;
    }
    n
}
