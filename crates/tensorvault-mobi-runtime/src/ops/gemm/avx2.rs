//! The AVX2 + FMA micro-kernel.

use std::arch::x86_64::{
    _mm256_add_ps, _mm256_andnot_ps, _mm256_blendv_ps, _mm256_broadcast_ss, _mm256_cmp_ps,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    _CMP_GT_OQ, _CMP_LT_OQ,
};

use super::{Act, Tile, TileBias, MR, NR};

/// `C tile = a_panel * b_panel` over `kc` (then stored as `tile` says).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
///
/// # Panics
/// If `a` has fewer than `kc * MR` values, `b` fewer than `kc * NR`, or `c` is too
/// short for the tile (rows `rsc` apart); the slices bound every pointer below.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn kernel(
    kc: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    assert!(
        a.len() >= kc * MR
            && b.len() >= kc * NR
            && tile.rows <= MR
            && tile.cols <= NR
            && (tile.rows == 0 || c.len() >= (tile.rows - 1) * rsc + tile.cols)
    );
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for p in 0..kc {
        // SAFETY: p < kc, so p * NR + 16 <= kc * NR <= b.len() and p * MR + MR <=
        // kc * MR <= a.len() (asserted above): every load is inside the panels.
        unsafe {
            let b0 = _mm256_loadu_ps(bp.add(p * NR));
            let b1 = _mm256_loadu_ps(bp.add(p * NR + 8));
            let a_p = ap.add(p * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*a_p.add(i));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    if tile.rows < MR || tile.cols < NR {
        let mut t = [[0f32; NR]; MR];
        for (row, v) in t.iter_mut().zip(&acc) {
            // SAFETY: `row` is 16 floats: two 8-float stores at 0 and 8.
            unsafe {
                _mm256_storeu_ps(row.as_mut_ptr(), v[0]);
                _mm256_storeu_ps(row.as_mut_ptr().add(8), v[1]);
            }
        }
        tile.store_scalar(&t, c, rsc);
        return;
    }
    let zero = _mm256_setzero_ps();
    for (i, row) in acc.iter().enumerate() {
        let crow = &mut c[i * rsc..][..NR];
        for (h, &sum) in row.iter().enumerate() {
            let mut v = sum;
            // SAFETY: `crow` has NR = 16 floats; h * 8 + 8 <= 16.
            let cp = unsafe { crow.as_mut_ptr().add(h * 8) };
            if tile.store.accumulate {
                // SAFETY: as above, 8 floats at cp are inside `crow`.
                v = _mm256_add_ps(v, unsafe { _mm256_loadu_ps(cp) });
            }
            if tile.store.last {
                match tile.bias {
                    TileBias::None => {}
                    TileBias::Rows(bv) => v = _mm256_add_ps(v, _mm256_set1_ps(bv[i])),
                    TileBias::Cols(bv) => {
                        let bc = &bv[h * 8..][..8];
                        // SAFETY: `bc` has 8 floats.
                        v = _mm256_add_ps(v, unsafe { _mm256_loadu_ps(bc.as_ptr()) });
                    }
                }
                match tile.act {
                    None => {}
                    // x < 0 ? 0 : x (ordered compare: NaN and -0 pass through).
                    Some(Act::Relu) => {
                        v = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(v, zero), v);
                    }
                    Some(Act::Clip { lo, hi }) => {
                        let (l, h8) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
                        v = _mm256_blendv_ps(v, l, _mm256_cmp_ps::<_CMP_LT_OQ>(v, l));
                        v = _mm256_blendv_ps(v, h8, _mm256_cmp_ps::<_CMP_GT_OQ>(v, h8));
                    }
                }
            }
            // SAFETY: 8 floats at cp are inside `crow` (above).
            unsafe { _mm256_storeu_ps(cp, v) };
        }
    }
}
