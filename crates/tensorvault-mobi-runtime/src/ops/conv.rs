//! 2-D convolution, NCHW: Conv2D (OIHW weights, `group`) and DepthwiseConv2D
//! ([C*m, 1, kh, kw]). Paths, chosen by shape:
//! - one input channel per group (depthwise, any multiplier): `depthwise::Depthwise`;
//! - small planes at batch > 1 without groups whose size is not close to a multiple of
//!   the gemm's 16-column panel (LeNet's 10x10, EfficientNet's 7x7): the batch in chunks
//!   of images, one im2col and one gemm per chunk, then a scatter to NCHW;
//! - a 1x1 kernel at stride 1 without pads: one gemm per image and group straight on
//!   the input (its `[C/group, H*W]` block already is the column matrix);
//! - otherwise one im2col and one gemm per image and group; at stride 1 with output rows
//!   of whole 16-column panels (the CIFAR-shaped CNN's 32- and 16-wide planes) the gemm
//!   reads the columns straight from the padded input (`Rhs::Rows`), with no column panels
//!   written (the panel writer was a fifth of that model's run).
//!
//! With a 2x2 / stride 2 max pool fused in ([`conv2d_pooled`], see `fusion`), each image's
//! output (or each plane of a chunk's product) is pooled into the result while it is in
//! cache; the full-size output is never written.
//!
//! The im2col writes the gemm's column panels directly ([`Im2col`], `Rhs::Panels`), into
//! buffers of the running thread reused across runs. The weights are the gemm's left
//! operand, packed once by the session (`prepack::Prepacked::Conv`); the per-channel bias
//! and a fused activation ([`Act`]) are applied by the gemm as it stores each tile.

use std::cell::RefCell;

use super::act::Act;
use super::depthwise::Depthwise;
use super::gemm::{gemm, Bias, Epilogue, Kernel, Lhs, PackedA, Rhs, NR};
use super::im2col::Im2col;
use super::pool::max_2x2;
use super::prepack::Prepacked;
use super::window::{geometry, nchw};
use super::{f32_tensor, to_usize, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// Output planes smaller than this (32x32) may be convolved for the whole batch at once...
const BATCH_PLANE: usize = 1024;

/// ...in chunks of images whose column panels have about this many elements (1 MiB: they
/// stay in L2 between the im2col and the gemm). One gemm per image would run on a few
/// column panels, the last one mostly padding.
const CHUNK_PANEL_ELEMENTS: usize = 1 << 18;

/// Conv2D (OIHW weights, `group`) and DepthwiseConv2D ([C*m, 1, kh, kw]), with the
/// activation `act` fused into the output loop.
pub(crate) fn conv2d(cx: &Ctx<'_>, depthwise: bool, act: Option<Act>) -> OpResult<Tensor> {
    // `conv` declines only a pool, and none was asked for.
    let out = conv(cx, depthwise, act, false)?;
    out.ok_or(OpError::Unsupported)
}

/// Conv2D and activation `act`, then a 2x2 / stride 2 max pool (no pads, floor mode) of
/// each image's output while it is in cache: the pooled tensor, or `None` (before any
/// work) for a convolution with one input channel per group (the depthwise kernel) or an
/// output plane smaller than 2x2.
pub(crate) fn conv2d_pooled(cx: &Ctx<'_>, act: Option<Act>) -> OpResult<Option<Tensor>> {
    conv(cx, false, act, true)
}

/// A convolution, pooled when `pool` (see [`conv2d_pooled`]); `None` only when `pool`.
fn conv(cx: &Ctx<'_>, depthwise: bool, act: Option<Act>, pool: bool) -> OpResult<Option<Tensor>> {
    let [n, c, h, w] = nchw(cx)?;
    let (x, wt) = (cx.f32(0)?, cx.f32(1)?);
    let [m, cg, kh, kw] = match *cx.shape(1)? {
        [a, b, c2, d] => [a, b, c2, d],
        _ => {
            return Err(OpError::Shape {
                input: 1,
                rule: "weights must be rank 4",
            })
        }
    };
    let group = if depthwise {
        if c == 0 || m % c != 0 {
            return Err(OpError::Shape {
                input: 1,
                rule: "depthwise weights need C*m output channels for C input channels",
            });
        }
        c
    } else {
        to_usize("group", cx.int("group"))?
    };
    if group == 0 || c != cg * group || m % group != 0 {
        return Err(OpError::Shape {
            input: 1,
            rule: "weights [M, C/group, kh, kw] do not match the input channels and group",
        });
    }
    let bias = match cx.inputs.len() {
        3 => Some(cx.f32(2)?),
        _ => None,
    };
    if bias.is_some_and(|b| b.len() != m) {
        return Err(OpError::Shape {
            input: 2,
            rule: "bias length must equal the output channels",
        });
    }
    let (ay, ax) = geometry(cx, h, w, kh, kw, false)?;
    let (ph, pw) = (ay.out / 2, ax.out / 2);
    if pool && (cg == 1 || ph == 0 || pw == 0) {
        return Ok(None);
    }
    // The pooled output: `[oh, ow]` planes pooled into `[ph, pw]` ones.
    let pooled = pool.then_some(Pooled {
        from: [ay.out, ax.out],
        to: [ph, pw],
    });
    let out_shape = match pooled {
        Some(_) => vec![n, m, ph, pw],
        None => vec![n, m, ay.out, ax.out],
    };
    let total = cx.alloc(&out_shape)?;
    // Every element is written: by the depthwise kernel's row copies, by sgemm (beta 0)
    // or by the pool.
    let mut y = cx.buffer(total);
    // One input channel per group: depthwise (LeNet's single-channel first layer too:
    // measured against the gemm path at batch 1 and 64, it was as fast or faster).
    if cg == 1 {
        let dw = Depthwise {
            n,
            c,
            m,
            kh,
            kw,
            ay,
            ax,
        };
        let mut scratch = cx.buffer(cx.scratch(dw.scratch_len())?);
        dw.run(x, wt, bias, act, &mut y, &mut scratch);
        cx.give(scratch);
        return Ok(Some(f32_tensor(out_shape, y)));
    }
    let plane = ay.out * ax.out;
    let mg = m / group;
    let kdim = cg * kh * kw;
    let pointwise = kh == 1
        && kw == 1
        && ay.stride == 1
        && ax.stride == 1
        && ay.pad_begin == 0
        && ax.pad_begin == 0
        && plane == h * w;
    let packed = packed_weights(cx, group, mg, kdim);
    let lhs = |g: usize| match packed {
        Some(v) => Lhs::Packed(&v[g]),
        None => Lhs::Strided {
            data: &wt[g * mg * kdim..][..mg * kdim],
            rs: kdim,
            cs: 1,
        },
    };
    // With the weights packed once, one gemm per image costs no more than a batched one,
    // unless the last column panel of one image is mostly padding (over 10% of the
    // columns computed would be zeros): only then pay the batch's im2col and scatter.
    let padding = plane.next_multiple_of(NR) - plane;
    if group == 1 && n > 1 && plane < BATCH_PLANE && padding * 10 > plane {
        let per_image = kdim.saturating_mul(plane).max(1);
        let chunk = (CHUNK_PANEL_ELEMENTS / per_image).clamp(1, n);
        let tmp = cx.scratch(m.checked_mul(chunk * plane))?;
        let kernel = Batched {
            nchw: [n, c, h, w],
            m,
            im: Im2col { c, kh, kw, ay, ax },
            chunk,
            pooled,
        };
        kernel.run(cx, (x, lhs(0), bias), act, &mut y, tmp)?;
        return Ok(Some(f32_tensor(out_shape, y)));
    }
    // Pooled: each image's [M, H*W] output goes to this buffer, then is pooled into `y`.
    let mut image_out = match pooled {
        Some(_) => cx.buffer(cx.scratch(m.checked_mul(plane))?),
        None => Vec::new(),
    };
    // Group `g` of one image's [M, H*W] output block `out`: the group's weights times
    // `rhs`, with bias and activation applied as each tile is stored.
    let group_gemm = |out: &mut [f32], g: usize, rhs: Rhs<'_>| {
        let epi = Epilogue {
            bias: bias.map_or(Bias::None, |b| Bias::Rows(&b[g * mg..][..mg])),
            act,
        };
        let out = &mut out[g * mg * plane..][..mg * plane];
        gemm(
            [mg, kdim, plane],
            lhs(g),
            rhs,
            out,
            plane,
            epi,
            Kernel::Auto,
        );
    };
    let block = m * plane;
    if pointwise {
        for b in 0..n {
            let out = match pooled {
                Some(_) => &mut image_out[..block],
                None => &mut y[b * block..][..block],
            };
            for g in 0..group {
                let xg = &x[(b * c + g * cg) * h * w..][..cg * h * w];
                // Its [C/group, H*W] block is the column matrix.
                let rhs = Rhs::Strided {
                    data: xg,
                    rs: plane,
                    cs: 1,
                };
                group_gemm(out, g, rhs);
            }
            if let Some(p) = pooled {
                p.image(&image_out, m, b, &mut y);
            }
        }
        cx.give(image_out);
        return Ok(Some(f32_tensor(out_shape, y)));
    }
    let im = Im2col {
        c: cg,
        kh,
        kw,
        ay,
        ax,
    };
    // Stride 1 along x and output rows of whole panels: the gemm reads the columns from
    // the padded input in place (no column panels written).
    let in_place = im.in_place_offsets();
    let pad_len = cx.scratch(im.padded_len(1))?;
    let panels_len = match in_place {
        Some(_) => 0,
        None => cx.scratch(im.panels_len(1))?,
    };
    with_scratch(pad_len, panels_len, |pad, panels| {
        for b in 0..n {
            let out = match pooled {
                Some(_) => &mut image_out[..block],
                None => &mut y[b * block..][..block],
            };
            for g in 0..group {
                let xg = &x[(b * c + g * cg) * h * w..][..cg * h * w];
                im.pad(xg, 1, pad);
                let rhs = match &in_place {
                    Some((rows, bases)) => Rhs::Rows {
                        data: pad,
                        rows,
                        bases,
                    },
                    None => {
                        im.panels(pad, 1, panels);
                        Rhs::Panels(panels)
                    }
                };
                group_gemm(out, g, rhs);
            }
            if let Some(p) = pooled {
                p.image(&image_out, m, b, &mut y);
            }
        }
    });
    cx.give(image_out);
    Ok(Some(f32_tensor(out_shape, y)))
}

/// A 2x2 / stride 2 max pool of `[oh, ow]` planes (`from`) into `[oh / 2, ow / 2]` ones
/// (`to`, every window inside), applied by the convolution to its output.
#[derive(Clone, Copy, Debug)]
struct Pooled {
    from: [usize; 2],
    to: [usize; 2],
}

impl Pooled {
    /// Pool one plane `src` (`from`) into `dst` (`to`).
    fn plane(&self, src: &[f32], dst: &mut [f32]) {
        let [h, w] = self.from;
        max_2x2(src, [1, h, w], self.to, dst);
    }

    /// Pool image `b`'s `m` planes `src` into its place in `y` (`[N, m, to]`).
    fn image(&self, src: &[f32], m: usize, b: usize, y: &mut [f32]) {
        let ([h, w], [ph, pw]) = (self.from, self.to);
        let block = m * ph * pw;
        max_2x2(src, [m, h, w], self.to, &mut y[b * block..][..block]);
    }
}

thread_local! {
    /// im2col space of the running thread: a padded input and its column panels, grown to
    /// the largest convolution run so far (each size checked against the element limit
    /// first) and reused, so no run zero-fills or page-faults fresh memory for them.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `f` with this thread's im2col buffers, at least `pad_len` and `panels_len` long.
fn with_scratch<R>(
    pad_len: usize,
    panels_len: usize,
    f: impl FnOnce(&mut [f32], &mut [f32]) -> R,
) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (pad, panels) = &mut *s;
        if pad.len() < pad_len {
            pad.resize(pad_len, 0.0);
        }
        if panels.len() < panels_len {
            panels.resize(panels_len, 0.0);
        }
        f(&mut pad[..pad_len], &mut panels[..panels_len])
    })
}

/// The weights the session packed for this operator, if they match the shapes the run
/// found (one `[mg, kdim]` matrix per group).
fn packed_weights<'a>(cx: &Ctx<'a>, group: usize, mg: usize, kdim: usize) -> Option<&'a [PackedA]> {
    match cx.packed {
        Some(Prepacked::Conv(v))
            if v.len() == group && v.iter().all(|p| p.rows() == mg && p.depth() == kdim) =>
        {
            Some(v)
        }
        _ => None,
    }
}

/// One im2col and one gemm for a chunk of images at a time (small planes, where one gemm
/// per image would leave its last column panel mostly padding): the chunk's columns are
/// panels of `[kdim, images * plane]` (image `b` in columns `b * plane..`), the product
/// `[m, images * plane]` is then scattered to NCHW (bias and activation applied by the
/// gemm). `tmp_len` (`m * images * plane` for a whole chunk) was checked against the
/// element limit.
struct Batched {
    nchw: [usize; 4],
    m: usize,
    im: Im2col,
    /// Images per chunk.
    chunk: usize,
    /// Pool each image's output plane as it is scattered.
    pooled: Option<Pooled>,
}

impl Batched {
    fn run(
        &self,
        cx: &Ctx<'_>,
        (x, wt, bias): (&[f32], Lhs<'_>, Option<&[f32]>),
        act: Option<Act>,
        y: &mut [f32],
        tmp_len: usize,
    ) -> OpResult<()> {
        let ([n, c, h, w], m, im) = (self.nchw, self.m, self.im);
        let plane = im.ay.out * im.ax.out;
        let kdim = im.depth();
        let pad_len = cx.scratch(im.padded_len(self.chunk))?;
        let panels_len = cx.scratch(im.panels_len(self.chunk))?;
        // Every element is written by the gemm (beta 0) before the scatter reads it.
        let mut tmp = cx.buffer(tmp_len);
        let epi = Epilogue {
            bias: bias.map_or(Bias::None, Bias::Rows),
            act,
        };
        with_scratch(pad_len, panels_len, |pad, panels| {
            for b0 in (0..n).step_by(self.chunk) {
                let images = self.chunk.min(n - b0);
                let wide = images * plane;
                im.pad(&x[b0 * c * h * w..][..images * c * h * w], images, pad);
                im.panels(pad, images, panels);
                let out = &mut tmp[..m * wide];
                gemm(
                    [m, kdim, wide],
                    wt,
                    Rhs::Panels(panels),
                    out,
                    wide,
                    epi,
                    Kernel::Auto,
                );
                for b in 0..images {
                    for oc in 0..m {
                        let src = &out[oc * wide + b * plane..][..plane];
                        match self.pooled {
                            Some(p) => {
                                let size = p.to[0] * p.to[1];
                                p.plane(src, &mut y[((b0 + b) * m + oc) * size..][..size]);
                            }
                            None => y[((b0 + b) * m + oc) * plane..][..plane].copy_from_slice(src),
                        }
                    }
                }
            }
        });
        cx.give(tmp);
        Ok(())
    }
}
