//! Packing of the gemm's operands into the micro-kernel's panels, and the in-place `B`
//! panels of [`Rhs::Rows`](super::Rhs) the AVX-512 kernel reads without packing.

use super::NR;

/// Pack rows `rows` x depth `ks` of `a` (element `(i, p)` at `a[i * rs + p * cs]`) into
/// `dst` as panels of `mr` rows, `[ks.len()][mr]` each, zero-padded.
pub(super) fn pack_a(
    a: &[f32],
    (rs, cs): (usize, usize),
    rows: std::ops::Range<usize>,
    ks: std::ops::Range<usize>,
    mr: usize,
    dst: &mut [f32],
) {
    let kc = ks.len();
    for (pi, i0) in rows.clone().step_by(mr).enumerate() {
        let panel = &mut dst[pi * kc * mr..][..kc * mr];
        let nrows = mr.min(rows.end - i0);
        for ii in 0..mr {
            if ii >= nrows {
                panel.iter_mut().skip(ii).step_by(mr).for_each(|v| *v = 0.0);
                continue;
            }
            let base = (i0 + ii) * rs;
            if cs == 1 {
                let src = &a[base + ks.start..][..kc];
                for (d, &v) in panel.iter_mut().skip(ii).step_by(mr).zip(src) {
                    *d = v;
                }
            } else {
                for (p, d) in ks.clone().zip(panel.iter_mut().skip(ii).step_by(mr)) {
                    *d = a[base + p * cs];
                }
            }
        }
    }
}

/// Pack depth `ks` x columns `cols` of `b` (element `(p, j)` at `b[p * rs + j * cs]`) into
/// `dst` as panels of `NR` columns, `[ks.len()][NR]` each, zero-padded.
pub(super) fn pack_b(
    b: &[f32],
    (rs, cs): (usize, usize),
    ks: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    dst: &mut [f32],
) {
    let kc = ks.len();
    for (pj, j0) in cols.clone().step_by(NR).enumerate() {
        let panel = &mut dst[pj * kc * NR..][..kc * NR];
        let ncols = NR.min(cols.end - j0);
        for (p, d) in ks.clone().zip(panel.chunks_exact_mut(NR)) {
            let base = p * rs + j0 * cs;
            if cs == 1 && ncols == NR {
                // A fixed-size copy: inlined moves, not a call to memmove per panel row.
                let src: &[f32; NR] = b[base..][..NR].try_into().unwrap_or(&[0.0; NR]);
                d.copy_from_slice(src);
                continue;
            }
            if cs == 1 {
                d[..ncols].copy_from_slice(&b[base..][..ncols]);
            } else {
                for (jj, v) in d[..ncols].iter_mut().enumerate() {
                    *v = b[base + jj * cs];
                }
            }
            d[ncols..].fill(0.0);
        }
    }
}

/// Pack `panels.len()` column panels of an [`Rhs::Rows`](super::Rhs) operand (`rows`: the
/// offsets of the `kc` rows of this block, `panels`: the base offset of each panel) into
/// `dst`, `[kc][NR]` each (for the kernels that read packed panels).
pub(super) fn pack_b_rows(data: &[f32], rows: &[usize], panels: &[usize], dst: &mut [f32]) {
    let kc = rows.len();
    for (&base, panel) in panels.iter().zip(dst.chunks_exact_mut((kc * NR).max(1))) {
        for (&r, d) in rows.iter().zip(panel.chunks_exact_mut(NR)) {
            d.copy_from_slice(&data[base + r..][..NR]);
        }
    }
}

/// One `B` panel as the AVX-512 kernel reads it: row `p`'s 16 values.
pub(super) trait BPanel: Copy {
    /// Whether rows `0..kc` are inside the panel's values.
    fn holds(&self, kc: usize) -> bool;

    /// The first of row `p`'s 16 values.
    ///
    /// # Safety
    /// `p < kc` for a `kc` that [`BPanel::holds`].
    unsafe fn row(&self, p: usize) -> *const f32;
}

/// A packed panel: `[kc][NR]` values.
#[derive(Clone, Copy)]
pub(super) struct Packed<'a>(pub &'a [f32]);

impl BPanel for Packed<'_> {
    fn holds(&self, kc: usize) -> bool {
        self.0.len() >= kc * NR
    }

    #[inline(always)]
    unsafe fn row(&self, p: usize) -> *const f32 {
        // SAFETY: p < kc and kc * NR <= len (the caller's contract).
        unsafe { self.0.as_ptr().add(p * NR) }
    }
}

/// A panel read in place: row `p` is `data[base + rows[p]..][..NR]`.
#[derive(Clone, Copy)]
pub(super) struct InPlace<'a> {
    data: &'a [f32],
    base: usize,
    rows: &'a [usize],
}

impl<'a> InPlace<'a> {
    /// The panel at `base` with these row offsets, none above `row_max`.
    ///
    /// # Panics
    /// If `base + row_max + 16` is past `data` (`gemm` checked every offset first).
    pub fn new(data: &'a [f32], base: usize, rows: &'a [usize], row_max: usize) -> Self {
        assert!(
            rows.is_empty() || base + row_max + NR <= data.len(),
            "in-place B panel out of bounds"
        );
        debug_assert!(rows.iter().all(|&r| r <= row_max));
        InPlace { data, base, rows }
    }
}

impl BPanel for InPlace<'_> {
    fn holds(&self, kc: usize) -> bool {
        self.rows.len() >= kc
    }

    #[inline(always)]
    unsafe fn row(&self, p: usize) -> *const f32 {
        // SAFETY: p < kc <= rows.len() (the caller's contract) and base + rows[p] + NR <=
        // base + row_max + NR <= data.len() (checked by `new`; every row offset is at most
        // `row_max`, the largest of the operand's, which `gemm` computed).
        unsafe {
            self.data
                .as_ptr()
                .add(self.base + *self.rows.get_unchecked(p))
        }
    }
}
