//! The fast Walsh-Hadamard transform of [`crate::rotation::fwht`] with AVX2 butterflies,
//! selected at run time. Every output is the same sequence of f32 additions and
//! subtractions as the scalar loop (stages `h = 1, 2, 4` inside each run of 8 values by
//! lane shuffles, then whole 8-lane vectors for `h >= 8`), so the results are bit for bit
//! the scalar path's (tested against it).

/// Whether the AVX2 path can run here (checked once per call: the detection macro caches).
#[must_use]
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

use std::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_blend_ps, _mm256_loadu_ps, _mm256_permute2f128_ps,
    _mm256_permute_ps, _mm256_storeu_ps, _mm256_sub_ps,
};

/// The AVX2 transform of `x` (a power-of-two length >= 8).
///
/// # Safety
/// The CPU must support AVX2 ([`available`]); `x.len()` must be a power of two >= 8.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fwht(x: &mut [f32]) {
    let n = x.len();
    debug_assert!(n >= 8 && n.is_power_of_two());
    let p = x.as_mut_ptr();
    for i in (0..n).step_by(8) {
        // SAFETY: i + 8 <= n (n is a multiple of 8), so the unaligned 8-lane load and
        // store stay inside `x`.
        unsafe { _mm256_storeu_ps(p.add(i), wht8(_mm256_loadu_ps(p.add(i)))) };
    }
    // SAFETY: AVX2 is available and n is a power of two >= 8 (this function's contract).
    unsafe { upper_stages(x) };
}

/// Stages `h = 1, 2, 4` of the transform on one vector of 8 values.
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn wht8(mut v: __m256) -> __m256 {
    // SAFETY: register-only AVX2 operations (the CPU has AVX2: the contract). Rust >= 1.87
    // calls them safe inside an AVX2 function; the MSRV (1.86) needs the block.
    #[allow(unused_unsafe, reason = "needed on the MSRV, 1.86")]
    unsafe {
        // h = 1: lanes (2j, 2j+1) -> (v0 + v1, v0 - v1); `s` holds each lane's partner.
        let s = _mm256_permute_ps::<0b1011_0001>(v);
        v = _mm256_blend_ps::<0b1010_1010>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        // h = 2: lanes (j, j+2) within each 128-bit half.
        let s = _mm256_permute_ps::<0b0100_1110>(v);
        v = _mm256_blend_ps::<0b1100_1100>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        // h = 4: lanes (j, j+4) across the halves.
        let s = _mm256_permute2f128_ps::<0x01>(v, v);
        _mm256_blend_ps::<0b1111_0000>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v))
    }
}

/// Stages `h = 8, 16, ..` of the transform, on whole 8-lane vectors in place.
///
/// # Safety
/// The CPU must support AVX2; `x.len()` must be a power of two >= 8.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn upper_stages(x: &mut [f32]) {
    let n = x.len();
    let p = x.as_mut_ptr();
    let mut h = 8;
    while h < n {
        for run in (0..n).step_by(2 * h) {
            for j in (run..run + h).step_by(8) {
                // SAFETY: j + h + 8 <= run + 2h <= n, so both 8-lane loads and stores stay
                // inside `x`, and the two ranges do not overlap (h >= 8).
                unsafe {
                    let a = _mm256_loadu_ps(p.add(j));
                    let b = _mm256_loadu_ps(p.add(j + h));
                    _mm256_storeu_ps(p.add(j), _mm256_add_ps(a, b));
                    _mm256_storeu_ps(p.add(j + h), _mm256_sub_ps(a, b));
                }
            }
        }
        h *= 2;
    }
}
