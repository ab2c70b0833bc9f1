//! MaxPool 2x2 / stride 2 with AVX-512: 16 outputs per step from 32 columns of two input
//! rows (rows combined lane by lane, then even and odd lanes combined after a two-vector
//! permute), masked loads and stores for a short row end. NaN propagates as in the scalar
//! loop: any NaN in a window gives NaN.

use std::arch::x86_64::{
    __m512, __mmask16, _mm512_cmp_ps_mask, _mm512_mask_mov_ps, _mm512_mask_storeu_ps,
    _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_permutex2var_ps, _mm512_setr_epi32,
    _mm512_setzero_ps, _CMP_UNORD_Q,
};

/// `max(a, b)` lane by lane, NaN if either is NaN (`vmaxps` returns its second operand
/// when either is NaN: that covers a NaN `b`; a NaN `a` is put back by the mask).
#[target_feature(enable = "avx512f")]
#[inline]
fn max_nan(a: __m512, b: __m512) -> __m512 {
    let m = _mm512_max_ps(a, b);
    _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a), a)
}

/// The first `lanes` (0..=16) values of `src` (zeros after).
#[target_feature(enable = "avx512f")]
#[inline]
fn load(src: &[f32], lanes: usize) -> __m512 {
    if lanes == 0 {
        return _mm512_setzero_ps();
    }
    let s = &src[..lanes];
    // SAFETY: the lanes under the mask are the `lanes` floats of `s`.
    unsafe { _mm512_maskz_loadu_ps(mask(lanes), s.as_ptr()) }
}

/// The mask of the first `lanes` (1..=16) lanes.
#[inline(always)]
fn mask(lanes: usize) -> __mmask16 {
    if lanes >= 16 {
        !0
    } else {
        (1 << lanes) - 1
    }
}

/// One output row: `out[ox] = max(r0[2ox], r0[2ox+1], r1[2ox], r1[2ox+1])` for every `ox`
/// of `out` (`r0` and `r1` hold at least `2 * out.len()` values).
///
/// # Panics
/// If `r0` or `r1` is shorter than `2 * out.len()`.
#[target_feature(enable = "avx512f")]
pub(super) fn row(r0: &[f32], r1: &[f32], out: &mut [f32]) {
    let ow = out.len();
    let (r0, r1) = (&r0[..2 * ow], &r1[..2 * ow]);
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let mut ox = 0;
    while ox < ow {
        let n = (ow - ox).min(16);
        let (lo, hi) = ((2 * n).min(16), (2 * n).saturating_sub(16));
        let (a, b) = (&r0[2 * ox..], &r1[2 * ox..]);
        let v0 = max_nan(load(a, lo), load(b, lo));
        let v1 = if hi > 0 {
            max_nan(load(&a[16..], hi), load(&b[16..], hi))
        } else {
            _mm512_setzero_ps()
        };
        let e = _mm512_permutex2var_ps(v0, even, v1);
        let o = _mm512_permutex2var_ps(v0, odd, v1);
        let dst = &mut out[ox..][..n];
        // SAFETY: the lanes under the mask are the `n` floats of `dst`.
        unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr(), mask(n), max_nan(e, o)) };
        ox += n;
    }
}

/// [`super::max_2x2`] with [`row`] for each output row (inlined into one AVX-512 function).
///
/// # Panics
/// If `x` or `y` is shorter than the shapes say.
#[target_feature(enable = "avx512f")]
pub(super) fn max_2x2(x: &[f32], dims: [usize; 3], out: [usize; 2], y: &mut [f32]) {
    super::max_2x2_rows(x, dims, out, y, |r0, r1, o| row(r0, r1, o));
}
