//! Depthwise convolution (one input channel per group, any channel multiplier, strides,
//! dilations and pads).
//!
//! Per input channel, the zero-padded plane (`ph x pw`) is copied once into `sy * sx`
//! polyphase planes of `qh x qw` (`qh = ceil(ph / sy)`, `qw = ceil(pw / sx)`): phase
//! `(ry, rx)` holds padded element `(a * sy + ry, b * sx + rx)` at `a * qw + b`. Output
//! `(oy, ox)`, tap `(ky, kx)` reads padded `(sy * oy + ky * dy, sx * ox + kx * dx)`, that
//! is phase `(ky * dy % sy, kx * dx % sx)` at `j + (ky * dy / sy) * qw + kx * dx / sx`
//! with `j = oy * qw + ox`. So the output computed "wide", with row pitch `qw`, is a sum
//! of contiguous slices, one per tap, scaled by the tap's weight: no bounds test, no
//! per-row call, the same inner loop for every stride, which the compiler vectorizes.
//! The wide output is accumulated in register-sized blocks while every tap is added;
//! its `ow` useful columns per row are then copied out with the bias and the fused
//! activation (the `qw - ow` others are the price: `kw - 1` columns at stride 1).
//!
//! The inner loops are compiled three times, for the baseline target, with AVX2 + FMA
//! and with AVX-512 enabled (the widest the CPU has is chosen at run time; AVX-512 only
//! when the compiler has it, see build.rs), like the gemm's kernels.

use super::act::{epilogue, Act};
use super::window::Axis;

/// Wide-output elements accumulated in registers while every tap is added (eight AVX2
/// vectors, four AVX-512 ones: the per-tap loop overhead is paid once per 64 outputs).
const LANES: usize = 64;

/// Wide outputs up to this many elements (16 KiB) get their bias and activation in one
/// pass before the copy out, still in L1; larger ones row by row after each row's copy.
const WIDE_IN_L1: usize = 4096;

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

/// Scratch geometry of one run.
struct Phases {
    /// Rows and row pitch of one phase plane.
    qh: usize,
    qw: usize,
    /// Elements of the wide output: `(oh - 1) * qw + ow`.
    wide_len: usize,
}

impl Depthwise {
    /// The phase geometry. Every read stays inside its phase plane: the geometry gives
    /// `sy * (oh - 1) + dy * (kh - 1) <= ph - 1`, so `oh - 1 + dy * (kh - 1) / sy <=
    /// qh - 1`, and likewise `ow - 1 + dx * (kw - 1) / sx <= qw - 1`. The last wide row
    /// reads only its `ow` columns; an earlier row reads at most `qw - 1` columns past
    /// its start row, which is at most row `qh - 2`.
    fn phases(&self) -> Option<Phases> {
        let ph = self
            .ay
            .pad_begin
            .checked_add(self.ay.input)?
            .checked_add(self.ay.pad_end)?;
        let pw = self
            .ax
            .pad_begin
            .checked_add(self.ax.input)?
            .checked_add(self.ax.pad_end)?;
        let (qh, qw) = (ph.div_ceil(self.ay.stride), pw.div_ceil(self.ax.stride));
        let (oh, ow) = (self.ay.out, self.ax.out);
        let wide_len = if oh == 0 || ow == 0 {
            0
        } else {
            (oh - 1).checked_mul(qw)?.checked_add(ow)?
        };
        Some(Phases { qh, qw, wide_len })
    }

    /// Scratch elements [`Depthwise::run`] needs (the caller checks them against the
    /// element limit before calling); `None` on overflow: the phase planes, `LANES`
    /// zeros after them (so the last, partial block of wide outputs is computed as a
    /// whole register block: its reads past the planes' end land there), and the wide
    /// output rounded up to whole blocks.
    pub fn scratch_len(&self) -> Option<usize> {
        let p = self.phases()?;
        let planes = self.ay.stride.checked_mul(self.ax.stride)?;
        planes
            .checked_mul(p.qh)?
            .checked_mul(p.qw)?
            .checked_add(LANES)?
            .checked_add(p.wide_len.div_ceil(LANES).checked_mul(LANES)?)
    }

    /// Compute `y` (dense `[n, m, oh, ow]`) from `x` and `wt`, then add `bias` and apply
    /// `act`. Every slice length was checked by the caller against the shapes;
    /// `scratch` holds [`Depthwise::scratch_len`] elements (checked against the element
    /// limit), with any contents.
    pub fn run(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
        scratch: &mut [f32],
    ) {
        #[cfg(all(target_arch = "x86_64", tv_avx512))]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked just above), the
            // only requirement of a `target_feature` function.
            unsafe { self.run_avx512(x, wt, bias, act, y, scratch) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above), the only
            // requirement of a `target_feature` function.
            unsafe { self.run_avx2(x, wt, bias, act, y, scratch) };
            return;
        }
        self.run_body::<Plain>(x, wt, bias, act, y, scratch);
    }

    #[cfg(all(target_arch = "x86_64", tv_avx512))]
    #[allow(
        clippy::incompatible_msrv,
        reason = "compiled only by compilers with AVX-512 support (cfg tv_avx512, set by \
                  build.rs for Rust >= 1.89)"
    )]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn run_avx512(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
        scratch: &mut [f32],
    ) {
        self.run_body::<Fused>(x, wt, bias, act, y, scratch);
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
        scratch: &mut [f32],
    ) {
        self.run_body::<Fused>(x, wt, bias, act, y, scratch);
    }

    #[inline(always)]
    fn run_body<M: MulAdd>(
        &self,
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        act: Option<Act>,
        y: &mut [f32],
        scratch: &mut [f32],
    ) {
        let Some(ph) = self.phases() else {
            return; // checked by the caller through scratch_len
        };
        let (h, w) = (self.ay.input, self.ax.input);
        let (oh, ow) = (self.ay.out, self.ax.out);
        let (sy, sx) = (self.ay.stride, self.ax.stride);
        let (dy, dx) = (self.ay.dilation, self.ax.dilation);
        let (pt, pl) = (self.ay.pad_begin, self.ax.pad_begin);
        let (plane, phase_len) = (oh * ow, ph.qh * ph.qw);
        let mult = self.m / self.c;
        // The padding positions of the phase planes are never written: zero once. The
        // wide output is zeroed block by block before its taps are added.
        let (phases, wide) = scratch.split_at_mut(sy * sx * phase_len + LANES);
        phases.fill(0.0);
        let wide = &mut wide[..ph.wide_len.div_ceil(LANES) * LANES];
        // Per tap, its start in `phases` (phase plane, then offset in it).
        let starts: Vec<usize> = (0..self.kh * self.kw)
            .map(|t| {
                let (ry, ay) = ((t / self.kw) * dy % sy, (t / self.kw) * dy / sy);
                let (rx, ax) = ((t % self.kw) * dx % sx, (t % self.kw) * dx / sx);
                (ry * sx + rx) * phase_len + ay * ph.qw + ax
            })
            .collect();
        for b in 0..self.n {
            for ic in 0..self.c {
                let xin = &x[(b * self.c + ic) * h * w..][..h * w];
                for (iy, row) in xin.chunks_exact(w.max(1)).enumerate().take(h) {
                    let (r, ry) = ((pt + iy) / sy, (pt + iy) % sy);
                    // Input columns ix0, ix0 + sx, ...: phase (pl + ix0) % sx, from
                    // column (pl + ix0) / sx on.
                    if sx == 1 {
                        // One phase: the row is copied whole after the left pad.
                        let dst = &mut phases[ry * phase_len + r * ph.qw..][..ph.qw];
                        dst[pl..pl + w].copy_from_slice(row);
                        continue;
                    }
                    if sx == 2 && w >= 2 {
                        // Two phases: even and odd input columns, deinterleaved in one pass.
                        let (ce, re) = (pl / 2, pl % 2);
                        // Odd columns go to the other phase, from column co on.
                        let co = pl.div_ceil(2);
                        let at = |rx: usize| (ry * 2 + rx) * phase_len + r * ph.qw;
                        let (lo, hi) = phases.split_at_mut(at(1));
                        let (d0, d1) = (&mut lo[at(0)..][..ph.qw], &mut hi[..ph.qw]);
                        let (de, dodd) = if re == 0 { (d0, d1) } else { (d1, d0) };
                        let pairs = row.chunks_exact(2);
                        if let Some(&last) = pairs.remainder().first() {
                            de[ce + w / 2] = last;
                        }
                        let de = &mut de[ce..ce + w / 2];
                        let dodd = &mut dodd[co..co + w / 2];
                        for ((e, o), p) in de.iter_mut().zip(dodd.iter_mut()).zip(pairs) {
                            *e = p[0];
                            *o = p[1];
                        }
                        continue;
                    }
                    for ix0 in 0..sx.min(w) {
                        let (c0, rx) = ((pl + ix0) / sx, (pl + ix0) % sx);
                        let dst = &mut phases[(ry * sx + rx) * phase_len + r * ph.qw..][..ph.qw];
                        let src = row.iter().skip(ix0).step_by(sx);
                        dst[c0..].iter_mut().zip(src).for_each(|(d, &v)| *d = v);
                    }
                }
                for oc in ic * mult..(ic + 1) * mult {
                    let k = &wt[oc * self.kh * self.kw..][..self.kh * self.kw];
                    taps::<M>(wide, phases, &starts, k);
                    let out = &mut y[(b * self.m + oc) * plane..][..plane];
                    let b = bias.map(|b| &b[oc..oc + 1]);
                    let rows = out.chunks_exact_mut(ow.max(1)).enumerate().take(oh);
                    if ph.wide_len <= WIDE_IN_L1 {
                        // Bias and activation over the (small) wide output in one pass,
                        // then its useful columns copied out: short rows cost a call
                        // each otherwise.
                        epilogue(&mut wide[..ph.wide_len], ph.wide_len, b, act);
                        for (oy, orow) in rows {
                            orow.copy_from_slice(&wide[oy * ph.qw..][..ow]);
                        }
                    } else {
                        // Bias and activation on each row right after its copy (in L1).
                        for (oy, orow) in rows {
                            orow.copy_from_slice(&wide[oy * ph.qw..][..ow]);
                            epilogue(orow, ow, b, act);
                        }
                    }
                }
            }
        }
    }
}

/// `a * b + c`: fused (one rounding, `vfmadd` when compiled with FMA enabled) or plain
/// (the baseline target, where a fused multiply-add would be a library call).
trait MulAdd {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// Fused multiply-add (the AVX2 + FMA build).
struct Fused;

impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// Multiply then add (the baseline build).
struct Plain;

impl MulAdd for Plain {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// `wide[j] = sum over taps t of k[t] * phases[starts[t] + j]`, `LANES` outputs at a
/// time kept in registers across the taps (in tap order, like the reference loop).
/// `wide` is a whole number of blocks; `phases` holds `LANES` elements past every
/// tap's last useful read, so the last block (partly past the useful outputs) reads in
/// bounds: its extra outputs are never copied out.
#[inline(always)]
fn taps<M: MulAdd>(wide: &mut [f32], phases: &[f32], starts: &[usize], k: &[f32]) {
    for (blk, out) in wide.chunks_exact_mut(LANES).enumerate() {
        let j0 = blk * LANES;
        let mut acc = [0f32; LANES];
        for (&s, &kv) in starts.iter().zip(k) {
            let src = &phases[s + j0..][..LANES];
            acc.iter_mut()
                .zip(src)
                .for_each(|(a, &v)| *a = M::mul_add(kv, v, *a));
        }
        out.copy_from_slice(&acc);
    }
}
