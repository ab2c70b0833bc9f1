//! The AVX-512 micro-kernel: an `R x 32` tile from one `A` panel (`R` = 8 rows, fewer for
//! a short last panel or a short `A`: 1, 2, 4 or 6) and two adjacent `B` panels (16 of the
//! 32 vector registers accumulate for `R = 8`), or `R x 16` from one `B` panel at the
//! right edge. Partial tiles are stored with masked loads and stores.

use std::arch::x86_64::{
    __m512, __mmask16, _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_fmadd_ps, _mm512_loadu_ps,
    _mm512_mask_mov_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_set1_ps,
    _mm512_setzero_ps, _CMP_GT_OQ, _CMP_LT_OQ,
};

use super::pack::BPanel;
use super::{Act, Tile, TileBias, MR, NR};

/// `C tile = a_panel * [b_panel0 b_panel1]` (only `b_panel0` unless `wide`) over `kc`, for
/// an `A` panel of `mr` rows, then stored as `tile` says. Runs the smallest kernel that
/// covers `tile.rows`.
///
/// # Safety
/// The CPU must support AVX-512F.
///
/// # Panics
/// If a slice is too short (see [`kernel`]).
#[allow(clippy::too_many_arguments, reason = "a micro-kernel's operands")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn tile<B: BPanel>(
    kc: usize,
    a: &[f32],
    mr: usize,
    b: [B; 2],
    wide: bool,
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    // `kernel` is a safe function of the same target feature as this one.
    macro_rules! run {
        ($r:expr) => {
            if wide {
                kernel::<{ $r }, 2, B>(kc, a, mr, b, c, rsc, tile)
            } else {
                kernel::<{ $r }, 1, B>(kc, a, mr, b, c, rsc, tile)
            }
        };
    }
    match tile.rows.min(mr) {
        0 | 1 => run!(1),
        2 => run!(2),
        3 | 4 => run!(4),
        5 | 6 => run!(6),
        _ => run!(MR),
    }
}

/// `C tile = a_panel * [b0 b1]` over `kc`: rows `0..R` of an `A` panel of `mr` rows and
/// `W` (1 or 2) `B` panels, then stored as `tile` says. (Safe to call from code compiled
/// with AVX-512F: its only requirement is the target feature.)
///
/// # Panics
/// If `R > mr`, `a` has fewer than `(kc - 1) * mr + R` values, a `B` panel does not
/// hold `kc` rows, the tile is larger than `R x 16W`, or `c` is too short for the tile (rows
/// `rsc` apart); the slices bound every pointer below.
#[target_feature(enable = "avx512f")]
fn kernel<const R: usize, const W: usize, B: BPanel>(
    kc: usize,
    a: &[f32],
    mr: usize,
    [b0, b1]: [B; 2],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    assert!(
        R <= mr
            && (W == 1 || W == 2)
            && (kc == 0 || a.len() >= (kc - 1) * mr + R)
            && b0.holds(kc)
            && b1.holds(kc)
            && tile.rows <= R
            && tile.cols <= W * NR
            && (tile.rows == 0 || c.len() >= (tile.rows - 1) * rsc + tile.cols)
    );
    let mut acc = [[_mm512_setzero_ps(); W]; R];
    let (pa, pb) = (a.as_ptr(), [b0, b1]);
    for p in 0..kc {
        // SAFETY: p < kc for a kc both B panels hold (asserted above), so each row's 16
        // values are inside its panel, and p * mr + R <= (kc - 1) * mr + R <= a.len().
        unsafe {
            let mut v = [_mm512_setzero_ps(); W];
            for (x, q) in v.iter_mut().zip(pb) {
                *x = _mm512_loadu_ps(q.row(p));
            }
            let ap = pa.add(p * mr);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                for (r, &x) in row.iter_mut().zip(&v) {
                    *r = _mm512_fmadd_ps(av, x, *r);
                }
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(tile.rows) {
        let crow = &mut c[i * rsc..][..tile.cols];
        for (h, &sum) in row.iter().enumerate() {
            let lo = h * NR;
            if lo >= tile.cols {
                break;
            }
            let n = (tile.cols - lo).min(NR);
            let mask: __mmask16 = if n == NR { !0 } else { (1 << n) - 1 };
            let v = epilogue(sum, tile, i, lo, mask, &crow[lo..]);
            // SAFETY: lanes under `mask` are the `n` floats of `crow[lo..lo + n]`.
            unsafe { _mm512_mask_storeu_ps(crow[lo..].as_mut_ptr(), mask, v) };
        }
    }
}

/// The stored value of 16 columns of row `i` starting at tile column `lo` (only the lanes
/// of `mask` are used): `sum` plus the old values (`old`, when accumulating), then on the
/// last block of `k` the bias and the activation.
#[target_feature(enable = "avx512f")]
#[inline]
fn epilogue(
    sum: __m512,
    tile: &Tile<'_>,
    i: usize,
    lo: usize,
    mask: __mmask16,
    old: &[f32],
) -> __m512 {
    let mut v = sum;
    let lanes = mask.count_ones() as usize;
    if tile.store.accumulate {
        let old = &old[..lanes];
        // SAFETY: the lanes under `mask` are the `lanes` floats of `old`.
        v = _mm512_add_ps(v, unsafe { _mm512_maskz_loadu_ps(mask, old.as_ptr()) });
    }
    if tile.store.last {
        match tile.bias {
            TileBias::None => {}
            TileBias::Rows(bv) => v = _mm512_add_ps(v, _mm512_set1_ps(bv[i])),
            TileBias::Cols(bv) => {
                let bc = &bv[lo..][..lanes];
                // SAFETY: the lanes under `mask` are the `lanes` floats of `bc`.
                v = _mm512_add_ps(v, unsafe { _mm512_maskz_loadu_ps(mask, bc.as_ptr()) });
            }
        }
        let zero = _mm512_setzero_ps();
        match tile.act {
            None => {}
            // x < 0 ? 0 : x (ordered compare: NaN and -0 pass through).
            Some(Act::Relu) => {
                let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, zero);
                v = _mm512_mask_mov_ps(v, neg, zero);
            }
            Some(Act::Clip { lo, hi }) => {
                let (l, h16) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
                v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, l), l);
                v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, h16), h16);
            }
        }
    }
    v
}
