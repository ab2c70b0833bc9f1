//! im2col straight into the gemm's panel layout ([`Rhs::Panels`](super::gemm::Rhs)): the
//! convolution's `[C*kh*kw, images*OH*OW]` column matrix is never written row-major and
//! then packed again; each panel of [`NR`] columns is filled directly.
//!
//! Two passes per call:
//! 1. [`Im2col::pad`] copies the images into a zero-bordered buffer (`[C, H+pads, W+pads]`
//!    per image), so no tap needs a bounds test or a border fill;
//! 2. [`Im2col::panels`] walks the panels in memory order. A panel's 16 columns are a few
//!    runs of one output row each ("pieces": one for a 16- or 32-wide plane, two for an
//!    8-wide one); for every row `(c, ky, kx)` of the panel, each piece is one fixed-size
//!    16-float copy (stride 1) or gather (stride > 1) from the padded input. A piece shorter
//!    than 16 writes past its end into the next piece's or the next row's place, which are
//!    written after it (memory order), so no copy has a variable length: the short
//!    `memmove` calls and 1-element `memset`s of a row-major im2col were about a fifth of
//!    the CIFAR-shaped CNN's time at batch 1. Both buffers carry [`Im2col::slack`] extra
//!    elements for those over-long reads and writes; the columns past the last one of the
//!    last panel are set to zero.

use super::gemm::NR;
use super::window::Axis;

/// One convolution's im2col geometry: `c` input channels per image (per group), a
/// `kh x kw` kernel, the two axes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Im2col {
    pub c: usize,
    pub kh: usize,
    pub kw: usize,
    pub ay: Axis,
    pub ax: Axis,
}

impl Im2col {
    /// Height and width of one padded plane.
    fn padded_dims(&self) -> (usize, usize) {
        let (ay, ax) = (&self.ay, &self.ax);
        (
            ay.input + ay.pad_begin + ay.pad_end,
            ax.input + ax.pad_begin + ax.pad_end,
        )
    }

    /// Extra elements at the end of both buffers (one fixed-size copy may read or write
    /// up to 16 elements, `16 * stride` for a gather, past the last one it needs).
    fn slack(&self) -> usize {
        NR * self.ax.stride.max(1)
    }

    /// Rows of the column matrix (`c * kh * kw`).
    pub fn depth(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Elements of the padded input of `images` images, `None` on overflow.
    pub fn padded_len(&self, images: usize) -> Option<usize> {
        let (hp, wp) = self.padded_dims();
        images
            .checked_mul(self.c)?
            .checked_mul(hp)?
            .checked_mul(wp)?
            .checked_add(self.slack())
    }

    /// Elements of the panels of `images` images' columns, `None` on overflow.
    pub fn panels_len(&self, images: usize) -> Option<usize> {
        let cols = images.checked_mul(self.ay.out)?.checked_mul(self.ax.out)?;
        super::gemm::panels_len(self.depth(), cols)?.checked_add(self.slack())
    }

    /// For one padded image (from [`Im2col::pad`]) read in place by the gemm
    /// ([`Rhs::Rows`](super::gemm::Rhs)): the offset of each column-matrix row `(c, ky,
    /// kx)` and of each 16-column panel's first output. `None` unless the stride along x
    /// is 1 and the output width is a multiple of 16 (a panel's 16 columns are then 16
    /// consecutive padded values of one output row).
    pub fn in_place_offsets(&self) -> Option<(Vec<usize>, Vec<usize>)> {
        let (hp, wp) = self.padded_dims();
        let (ay, ax) = (&self.ay, &self.ax);
        if ax.stride != 1 || ax.out == 0 || ax.out % NR != 0 {
            return None;
        }
        let mut rows = Vec::with_capacity(self.depth());
        for ci in 0..self.c {
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    rows.push((ci * hp + ky * ay.dilation) * wp + kx * ax.dilation);
                }
            }
        }
        let bases = (0..ay.out)
            .flat_map(|oy| {
                (0..ax.out)
                    .step_by(NR)
                    .map(move |ox| oy * ay.stride * wp + ox)
            })
            .collect();
        Some((rows, bases))
    }

    /// Copy `images` images (`x`: `[images, c, h, w]`) into `pad` with zero borders.
    ///
    /// # Panics
    /// If `x` or `pad` is shorter than the shapes say (`pad`: [`Im2col::padded_len`]).
    pub fn pad(&self, x: &[f32], images: usize, pad: &mut [f32]) {
        // Compiled with wider moves when the CPU has them, as `panels`.
        #[cfg(all(target_arch = "x86_64", tv_avx512))]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, the function's only requirement.
            unsafe { self.pad_avx512(x, images, pad) };
            return;
        }
        self.pad_any(x, images, pad);
    }

    /// [`Im2col::pad`] with AVX-512 moves.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(all(target_arch = "x86_64", tv_avx512))]
    #[allow(
        clippy::incompatible_msrv,
        reason = "compiled only by compilers with AVX-512 support (cfg tv_avx512, see build.rs)"
    )]
    #[target_feature(enable = "avx512f")]
    unsafe fn pad_avx512(&self, x: &[f32], images: usize, pad: &mut [f32]) {
        self.pad_any(x, images, pad);
    }

    /// The body of [`Im2col::pad`], inlined into each instruction-set version.
    #[inline(always)]
    fn pad_any(&self, x: &[f32], images: usize, pad: &mut [f32]) {
        let (h, w) = (self.ay.input, self.ax.input);
        let (hp, wp) = self.padded_dims();
        let planes = images * self.c;
        let len = planes * hp * wp;
        if hp == h && wp == w {
            pad[..len].copy_from_slice(&x[..len]);
            return;
        }
        if h == 0 || w == 0 {
            pad[..len].fill(0.0);
            return;
        }
        let (top, left) = (self.ay.pad_begin, self.ax.pad_begin);
        // Each zero written once: the top border, then per row its values and the gap to
        // the next row's values (its right border and the next row's left one; after the
        // last row, the bottom border). A short gap is one fixed 8-float store whose spill
        // lands in the next row's values, written just after (a `memset` call per 2-float
        // gap, or a fill of the whole buffer first, cost more than the copy).
        for (p, dst) in pad[..len].chunks_exact_mut(hp * wp).enumerate() {
            let src = &x[p * h * w..][..h * w];
            dst[..top * wp + left].fill(0.0);
            for (y, row) in src.chunks_exact(w).enumerate() {
                let at = (top + y) * wp + left;
                copy_row(&mut dst[at..][..w], row);
                let (gap, last) = (wp - w, y + 1 == h);
                if !last && gap <= 8 && gap + w >= 8 {
                    let z: &mut [f32; 8] = (&mut dst[at + w..][..8]).try_into().expect("8 floats");
                    *z = [0.0; 8];
                } else {
                    let end = if last { hp * wp } else { at + wp };
                    dst[at + w..end].fill(0.0);
                }
            }
        }
    }

    /// Write the columns of `images` padded images (`pad`, from [`Im2col::pad`]) as
    /// panels into `dst`: column `(b * OH + oy) * OW + ox`, row `(ci * kh + ky) * kw + kx`.
    ///
    /// # Panics
    /// If `pad` or `dst` is shorter than [`Im2col::padded_len`] /
    /// [`Im2col::panels_len`] of `images`.
    pub fn panels(&self, pad: &[f32], images: usize, dst: &mut [f32]) {
        // The same loop compiled with wider moves when the CPU has them (a 16-float copy
        // is one AVX-512 or two AVX2 loads and stores instead of four SSE ones).
        #[cfg(all(target_arch = "x86_64", tv_avx512))]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, the function's only requirement.
            unsafe { self.panels_avx512(pad, images, dst) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, the function's only requirement.
            unsafe { self.panels_avx2(pad, images, dst) };
            return;
        }
        self.panels_any(pad, images, dst);
    }

    /// [`Im2col::panels`] with AVX-512 moves.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(all(target_arch = "x86_64", tv_avx512))]
    #[allow(
        clippy::incompatible_msrv,
        reason = "compiled only by compilers with AVX-512 support (cfg tv_avx512, see build.rs)"
    )]
    #[target_feature(enable = "avx512f")]
    unsafe fn panels_avx512(&self, pad: &[f32], images: usize, dst: &mut [f32]) {
        self.panels_any(pad, images, dst);
    }

    /// [`Im2col::panels`] with AVX moves.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn panels_avx2(&self, pad: &[f32], images: usize, dst: &mut [f32]) {
        self.panels_any(pad, images, dst);
    }

    /// The body of [`Im2col::panels`], inlined into each instruction-set version.
    #[inline(always)]
    fn panels_any(&self, pad: &[f32], images: usize, dst: &mut [f32]) {
        let (hp, wp) = self.padded_dims();
        let (ay, ax) = (&self.ay, &self.ax);
        let (ow, plane) = (ax.out, ay.out * ax.out);
        let cols = images * plane;
        let depth = self.depth();
        if cols == 0 || depth == 0 {
            return;
        }
        let (sx, dx, dy) = (ax.stride, ax.dilation, ay.dilation);
        for q in 0..cols.div_ceil(NR) {
            // The pieces of this panel: (position in the panel, input offset of the first
            // output's tap (0, 0, 0)).
            let mut pieces = [(0usize, 0usize); NR];
            let mut count = 0;
            let (start, end) = (q * NR, (q * NR + NR).min(cols));
            let mut g = start;
            while g < end {
                let (b, r) = (g / plane, g % plane);
                let (oy, ox) = (r / ow, r % ow);
                let base = (b * self.c * hp + oy * ay.stride) * wp + ox * sx;
                pieces[count] = (g - start, base);
                count += 1;
                g += (ow - ox).min(end - g);
            }
            let pieces = &pieces[..count];
            // Rows are written in memory order, so a piece's spill lands in a place
            // written after it (the last panel's last row spills into the slack).
            let mut at = q * depth * NR;
            for ci in 0..self.c {
                for ky in 0..self.kh {
                    let off = (ci * hp + ky * dy) * wp;
                    for kx in 0..self.kw {
                        let off = off + kx * dx;
                        for &(pos, base) in pieces {
                            copy16(&pad[base + off..], &mut dst[at + pos..], sx);
                        }
                        at += NR;
                    }
                }
            }
            let valid = end - start;
            if valid < NR {
                let panel = &mut dst[q * depth * NR..][..depth * NR];
                for r in panel.chunks_exact_mut(NR) {
                    r[valid..].fill(0.0);
                }
            }
        }
    }
}

/// `dst = src` in fixed 8-float moves (inlined; `copy_from_slice` of a short row is a
/// `memmove` call) and a short remainder.
#[inline(always)]
fn copy_row(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        let s: &[f32; 8] = s.try_into().expect("8 floats");
        d.copy_from_slice(s);
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}

/// `dst[i] = src[i * stride]` for `i < 16`.
#[inline(always)]
fn copy16(src: &[f32], dst: &mut [f32], stride: usize) {
    let d: &mut [f32; NR] = (&mut dst[..NR]).try_into().expect("16 floats");
    if stride == 1 {
        let s: &[f32; NR] = src[..NR].try_into().expect("16 floats");
        *d = *s;
    } else {
        let s = &src[..(NR - 1) * stride + 1];
        for (i, v) in d.iter_mut().enumerate() {
            *v = s[i * stride];
        }
    }
}
