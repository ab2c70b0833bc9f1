//! The CVC int4 row decode of [`crate::row_int4`] with AVX2, selected at run time.
//!
//! For each run of 16 values: 8 code bytes are split into 16 nibbles
//! (`vpand`/`vpsrlw`/`vpunpcklbw`), widened to 32-bit lanes and converted to f32 (exact),
//! then `* step + min` and `* scale[j] + offset[j]`: four rounded operations in the
//! formula's order, never an FMA, so every output is bit for bit the scalar path's (tested
//! against it). A lookup of `c * step + min` in a 16-entry table by two `vpermps` and a
//! blend was measured first: it saturates the shuffle port (10 shuffles per 16 values
//! against 4 here) and ran at 0.6x of this loop.
//!
//! AVX-512 would do the lookup in one `vpermps zmm`, but its intrinsics are newer than the
//! crate's MSRV (1.86), so it is not used.

/// Whether the AVX2 path can run here (the detection macro caches its answer).
#[cfg(target_arch = "x86_64")]
#[must_use]
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Decode the first `16 * (out.len() / 16)` values of one row: `out[j] = (c_j * step +
/// min) * scale[j] + offset[j]`, where `c_j` is nibble `j` of `packed` (low nibble first).
/// Returns how many values were written (the caller finishes the tail).
///
/// # Safety
/// The CPU must support AVX2 ([`available`]). `scale` and `offset` must be at least
/// `out.len()` long and `packed` at least `out.len() / 2` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn decode_row(
    step: f32,
    min: f32,
    packed: &[u8],
    scale: &[f32],
    offset: &[f32],
    out: &mut [f32],
) -> usize {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_cvtepu8_epi32, _mm256_loadu_ps, _mm256_mul_ps,
        _mm256_set1_ps, _mm256_storeu_ps, _mm_and_si128, _mm_loadl_epi64, _mm_set1_epi8,
        _mm_srli_epi16, _mm_srli_si128, _mm_unpacklo_epi8,
    };
    let n = out.len() / 16 * 16;
    debug_assert!(scale.len() >= n && offset.len() >= n && packed.len() >= n / 2);
    let (sp, op, pp, dp) = (
        scale.as_ptr(),
        offset.as_ptr(),
        packed.as_ptr(),
        out.as_mut_ptr(),
    );
    let (step, min) = (_mm256_set1_ps(step), _mm256_set1_ps(min));
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
                // code * step + min: exact conversion, then the table's two roundings.
                let t = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(idx), step), min);
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
