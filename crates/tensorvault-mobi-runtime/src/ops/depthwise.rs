//! Depthwise convolution (one input channel per group, any channel multiplier, stride,
//! dilation and pads).
//!
//! Per input channel, the plane is copied once into a zero-bordered scratch plane of row
//! pitch `pw` (the padded width). The output is then computed "wide", with the same row
//! pitch: output `j = oy * pw + ox` of tap `(ky, kx)` reads padded element
//! `stride * j + (ky * pw + kx) * dilation`, so each tap is one long axpy over the whole
//! plane (contiguous at stride 1; rows apart when the two strides differ) with no bounds
//! test and no per-row call, which the
//! compiler vectorizes; short rows (7x7 and 14x14 planes with 5x5 kernels) cost no more
//! per element than long ones. The `ow` useful columns of each wide row are then copied
//! out with the bias and the fused activation. The wasted columns (`pw - ow` per row) are
//! the price; for stride 2 the wide rows are twice as long as needed.
//!
//! The inner loops are compiled twice, for the baseline target and with AVX2 + FMA
//! enabled (chosen at run time), like matrixmultiply's kernels.

use super::act::{epilogue, Act};
use super::window::Axis;

/// The shapes of one depthwise convolution: input `[n, c, h, w]`, weights
/// `[m, 1, kh, kw]` with `m = c * multiplier`, output `[n, m, ay.out, ax.out]`.
pub(crate) struct Depthwise {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub kh: usize,
    pub kw: usize,
    pub ay: Axis,
    pub ax: Axis,
}

/// Scratch sizes of one run: the padded plane and the wide output.
struct Wide {
    /// Row pitch of the padded plane and of the wide output.
    pw: usize,
    /// Elements of the padded plane (rows past the padded height are zeros, so every
    /// tap of every wide output stays inside).
    padded_len: usize,
    /// Elements of the wide output: `(oh - 1) * pw + ow`.
    wide_len: usize,
}

impl Depthwise {
    /// Scratch sizes. Every read stays inside the padded plane: the geometry gives
    /// `sy * (oh - 1) + dy * (kh - 1) < ph` and `sx * (ow - 1) + dx * (kw - 1) < pw`.
    /// With equal strides `s`, output `j = oy * pw + ox` reads at most
    /// `(s * oy + dy * (kh - 1)) * pw + s * ox + dx * (kw - 1)`: below `ph * pw` for the
    /// last row (`ox < ow`) and for the earlier rows (`oy <= oh - 2`, `s * ox < s * pw`,
    /// at most `s` rows further) alike. With different strides each row reads only its
    /// `ow` outputs.
    fn wide(&self) -> Option<Wide> {
        let pw = self
            .ax
            .pad_begin
            .checked_add(self.ax.input)?
            .checked_add(self.ax.pad_end)?;
        let ph = self
            .ay
            .pad_begin
            .checked_add(self.ay.input)?
            .checked_add(self.ay.pad_end)?;
        let (oh, ow) = (self.ay.out, self.ax.out);
        let wide_len = if oh == 0 || ow == 0 {
            0
        } else {
            (oh - 1).checked_mul(pw)?.checked_add(ow)?
        };
        Some(Wide {
            pw,
            padded_len: ph.checked_mul(pw)?,
            wide_len,
        })
    }

    /// Scratch elements [`Depthwise::run`] needs (the caller checks them against the
    /// element limit before calling); `None` on overflow.
    pub fn scratch_len(&self) -> Option<usize> {
        let w = self.wide()?;
        w.padded_len.checked_add(w.wide_len)
    }

    /// Compute `y` (dense `[n, m, oh, ow]`) from `x` and `wt`, then add `bias` and apply
    /// `act`. Every slice length was checked by the caller against the shapes, and
    /// [`Depthwise::scratch_len`] against the element limit.
    pub fn run(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above), the only
            // requirement of a `target_feature` function.
            unsafe { self.run_avx2(x, wt, bias, act, y) };
            return;
        }
        self.run_body(x, wt, bias, act, y);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
    ) {
        self.run_body(x, wt, bias, act, y);
    }

    #[inline(always)]
    fn run_body(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
    ) {
        let (h, w) = (self.ay.input, self.ax.input);
        let (oh, ow) = (self.ay.out, self.ax.out);
        let plane = oh * ow;
        let mult = self.m / self.c;
        let Some(wd) = self.wide() else {
            return; // checked by the caller through scratch_len
        };
        let (pt, pl) = (self.ay.pad_begin, self.ax.pad_begin);
        let mut padded = vec![0f32; wd.padded_len];
        let mut wide = vec![0f32; wd.wide_len];
        let (sy, sx) = (self.ay.stride, self.ax.stride);
        let (dy, dx) = (self.ay.dilation, self.ax.dilation);
        for b in 0..self.n {
            for ic in 0..self.c {
                let xin = &x[(b * self.c + ic) * h * w..][..h * w];
                for (iy, row) in xin.chunks_exact(w.max(1)).enumerate().take(h) {
                    padded[(pt + iy) * wd.pw + pl..][..w].copy_from_slice(row);
                }
                for oc in ic * mult..(ic + 1) * mult {
                    let k = &wt[oc * self.kh * self.kw..][..self.kh * self.kw];
                    wide.fill(0.0);
                    for ky in 0..self.kh {
                        for kx in 0..self.kw {
                            let kv = k[ky * self.kw + kx];
                            let off = ky * dy * wd.pw + kx * dx;
                            if sy == sx {
                                tap(&mut wide, &padded[off..], kv, sx);
                            } else {
                                // Different strides: one tap per output row.
                                for oy in 0..oh {
                                    let row = &mut wide[oy * wd.pw..][..ow];
                                    tap(row, &padded[off + sy * oy * wd.pw..], kv, sx);
                                }
                            }
                        }
                    }
                    let out = &mut y[(b * self.m + oc) * plane..][..plane];
                    for (oy, orow) in out.chunks_exact_mut(ow.max(1)).enumerate().take(oh) {
                        orow.copy_from_slice(&wide[oy * wd.pw..][..ow]);
                    }
                    epilogue(out, plane, bias.map(|b| &b[oc..oc + 1]), act);
                }
            }
        }
    }
}

/// `out[j] += k * src[stride * j]` for every `j`.
#[inline(always)]
fn tap(out: &mut [f32], src: &[f32], k: f32, stride: usize) {
    if out.is_empty() {
        return;
    }
    let src = &src[..stride * (out.len() - 1) + 1];
    match stride {
        1 => out.iter_mut().zip(src).for_each(|(o, &v)| *o += k * v),
        2 => out
            .iter_mut()
            .zip(src.iter().step_by(2))
            .for_each(|(o, &v)| *o += k * v),
        _ => out
            .iter_mut()
            .zip(src.iter().step_by(stride))
            .for_each(|(o, &v)| *o += k * v),
    }
}
