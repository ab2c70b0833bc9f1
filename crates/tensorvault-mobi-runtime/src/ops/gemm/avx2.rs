//! The AVX2 + FMA micro-kernel.

use std::arch::x86_64::{
    _mm256_add_ps, _mm256_andnot_ps, _mm256_blendv_ps, _mm256_broadcast_ss, _mm256_cmp_ps,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    _CMP_GT_OQ, _CMP_LT_OQ,
};

use super::{Act, Tile, TileBias, NR};

/// `C tile = a_panel * b_panel` over `kc` for an `A` panel of `mr` rows (6: one 6 x 16
/// kernel call; 8: two 4 x 16 calls, the AVX-512 kernel's panels read by this one), then
/// stored as `tile` says.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
///
/// # Panics
/// If `mr` is neither 6 nor a multiple of 4, or a slice is too short (see [`kernel`]).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(
    kc: usize,
    a: &[f32],
    mr: usize,
    b: &[f32],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    if mr == 6 {
        // SAFETY: the CPU has AVX2 and FMA (this function's requirement).
        unsafe { kernel::<6>(kc, a, mr, b, c, rsc, tile) };
        return;
    }
    assert!(mr.is_multiple_of(4), "A panels of {mr} rows");
    for r0 in (0..tile.rows).step_by(4) {
        let part = tile.rows_from(r0, 4);
        // SAFETY: as above.
        unsafe {
            kernel::<4>(
                kc,
                a.get(r0..).unwrap_or(&[]),
                mr,
                b,
                &mut c[r0 * rsc..],
                rsc,
                &part,
            )
        };
    }
}

/// `C tile = a_panel * b_panel` over `kc`, rows `0..R` of an `A` panel of `mr` rows
/// (`a` starts at the first row read), then stored as `tile` says.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
///
/// # Panics
/// If `R > mr`, `a` has fewer than `(kc - 1) * mr + R` values, `b` fewer than `kc * NR`,
/// or `c` is too short for the tile (rows `rsc` apart); the slices bound every pointer
/// below.
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel<const R: usize>(
    kc: usize,
    a: &[f32],
    mr: usize,
    b: &[f32],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    assert!(
        R <= mr
            && (kc == 0 || a.len() >= (kc - 1) * mr + R)
            && b.len() >= kc * NR
            && tile.rows <= R
            && tile.cols <= NR
            && (tile.rows == 0 || c.len() >= (tile.rows - 1) * rsc + tile.cols)
    );
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for p in 0..kc {
        // SAFETY: p < kc, so p * NR + 16 <= kc * NR <= b.len() and p * mr + R <=
        // (kc - 1) * mr + R <= a.len() (asserted above): every load is inside the panels.
        unsafe {
            let b0 = _mm256_loadu_ps(bp.add(p * NR));
            let b1 = _mm256_loadu_ps(bp.add(p * NR + 8));
            let a_p = ap.add(p * mr);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*a_p.add(i));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
        }
    }
    if tile.rows < R || tile.cols < NR {
        let mut t = [[0f32; NR]; R];
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
