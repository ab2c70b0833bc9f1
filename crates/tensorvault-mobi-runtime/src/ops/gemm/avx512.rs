//! The AVX-512 micro-kernel: a 12 x 32 tile from two adjacent `A` panels and two
//! adjacent `B` panels (24 of the 32 vector registers accumulate), or 6 x 32 from one
//! `A` panel at the bottom edge.

use std::arch::x86_64::{
    _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_mov_ps,
    _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps, _CMP_GT_OQ, _CMP_LT_OQ,
};

use super::{Act, Tile, TileBias, MR, NR};

/// `C tile = [a_panel0; a_panel1] * [b_panel0 b_panel1]` over `kc` (then stored as
/// `tile` says): `R` = 6 rows from the first `A` panel, or 12 from both.
///
/// # Safety
/// The CPU must support AVX-512F.
///
/// # Panics
/// If an `A` panel has fewer than `kc * MR` values, a `B` panel fewer than `kc * NR`,
/// or `c` is too short for the tile (rows `rsc` apart); the slices bound every
/// pointer below.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn kernel<const R: usize>(
    kc: usize,
    [a0, a1]: [&[f32]; 2],
    [b0, b1]: [&[f32]; 2],
    c: &mut [f32],
    rsc: usize,
    tile: &Tile<'_>,
) {
    assert!(
        (R == MR || R == 2 * MR)
            && a0.len() >= kc * MR
            && a1.len() >= kc * MR
            && b0.len() >= kc * NR
            && b1.len() >= kc * NR
            && tile.rows <= R
            && tile.cols <= 2 * NR
            && (tile.rows == 0 || c.len() >= (tile.rows - 1) * rsc + tile.cols)
    );
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let (pa0, pa1, p0, p1) = (a0.as_ptr(), a1.as_ptr(), b0.as_ptr(), b1.as_ptr());
    for p in 0..kc {
        // SAFETY: p < kc, so p * NR + 16 <= kc * NR <= each B panel's length and
        // p * MR + MR <= kc * MR <= each A panel's length (asserted above); rows
        // i >= MR (R = 12) read the second A panel at i - MR < MR.
        unsafe {
            let v0 = _mm512_loadu_ps(p0.add(p * NR));
            let v1 = _mm512_loadu_ps(p1.add(p * NR));
            for (i, row) in acc.iter_mut().enumerate() {
                let a = if i < MR {
                    *pa0.add(p * MR + i)
                } else {
                    *pa1.add(p * MR + i - MR)
                };
                let av = _mm512_set1_ps(a);
                row[0] = _mm512_fmadd_ps(av, v0, row[0]);
                row[1] = _mm512_fmadd_ps(av, v1, row[1]);
            }
        }
    }
    if tile.rows < R || tile.cols < 2 * NR {
        let mut t = [[0f32; 2 * NR]; R];
        for (row, v) in t.iter_mut().zip(&acc) {
            // SAFETY: `row` is 32 floats: two 16-float stores at 0 and 16.
            unsafe {
                _mm512_storeu_ps(row.as_mut_ptr(), v[0]);
                _mm512_storeu_ps(row.as_mut_ptr().add(NR), v[1]);
            }
        }
        tile.store_scalar(&t, c, rsc);
        return;
    }
    let zero = _mm512_setzero_ps();
    for (i, row) in acc.iter().enumerate() {
        let crow = &mut c[i * rsc..][..2 * NR];
        for (h, &sum) in row.iter().enumerate() {
            let mut v = sum;
            // SAFETY: `crow` has 32 floats; h * 16 + 16 <= 32.
            let cp = unsafe { crow.as_mut_ptr().add(h * NR) };
            if tile.store.accumulate {
                // SAFETY: as above, 16 floats at cp are inside `crow`.
                v = _mm512_add_ps(v, unsafe { _mm512_loadu_ps(cp) });
            }
            if tile.store.last {
                match tile.bias {
                    TileBias::None => {}
                    TileBias::Rows(bv) => v = _mm512_add_ps(v, _mm512_set1_ps(bv[i])),
                    TileBias::Cols(bv) => {
                        let bc = &bv[h * NR..][..NR];
                        // SAFETY: `bc` has 16 floats.
                        v = _mm512_add_ps(v, unsafe { _mm512_loadu_ps(bc.as_ptr()) });
                    }
                }
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
            // SAFETY: 16 floats at cp are inside `crow` (above).
            unsafe { _mm512_storeu_ps(cp, v) };
        }
    }
}
