//! 2-D convolution, NCHW: Conv2D (OIHW weights, `group`) and DepthwiseConv2D
//! ([C*m, 1, kh, kw]). Paths, chosen by shape:
//! - one input channel per group (depthwise, any multiplier): `depthwise::Depthwise`;
//! - a 1x1 kernel at stride 1 without pads: one gemm per image and group straight on
//!   the input (its `[C/group, H*W]` block already is the im2col matrix);
//! - small planes at batch > 1 without groups whose size is not close to a multiple of
//!   the gemm's 16-column panel (LeNet's 10x10, EfficientNet's 7x7): one im2col and one
//!   gemm for the whole batch, then a scatter to NCHW;
//! - otherwise im2col into one scratch buffer reused for every image and group, then
//!   gemm into the output.
//!
//! The weights are the gemm's left operand, packed once by the session
//! (`prepack::Prepacked::Conv`); the per-channel bias and a fused activation ([`Act`])
//! are applied by the gemm as it stores each tile.

use super::act::Act;
use super::depthwise::Depthwise;
use super::gemm::{gemm, Bias, Epilogue, Kernel, Lhs, PackedA, Rhs, NR};
use super::prepack::Prepacked;
use super::window::{geometry, nchw, Axis};
use super::{f32_tensor, to_usize, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// Output planes smaller than this (32x32) may be convolved for the whole batch at once...
const BATCH_PLANE: usize = 1024;

/// ...when the batch's im2col matrix has at most this many elements (64 MiB). One gemm
/// per image would run on a few column panels, the last one mostly padding.
const BATCH_COL_ELEMENTS: usize = 1 << 24;

/// Conv2D (OIHW weights, `group`) and DepthwiseConv2D ([C*m, 1, kh, kw]), with the
/// activation `act` fused into the output loop.
pub(crate) fn conv2d(cx: &Ctx<'_>, depthwise: bool, act: Option<Act>) -> OpResult<Tensor> {
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
    let out_shape = vec![n, m, ay.out, ax.out];
    let total = cx.alloc(&out_shape)?;
    // Every element is written: by the depthwise kernel's row copies or by sgemm (beta 0).
    let mut y = cx.buffer(total);
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
        return Ok(f32_tensor(out_shape, y));
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
        let wide = n.checked_mul(plane).and_then(|v| v.checked_mul(kdim));
        if wide.is_some_and(|v| v <= BATCH_COL_ELEMENTS) {
            let tmp = cx.scratch(m.checked_mul(n * plane))?;
            let kernel = Batched {
                nchw: [n, c, h, w],
                mk: [m, kh, kw],
                ay,
                ax,
            };
            kernel.run(cx, (x, lhs(0), bias), act, &mut y, tmp);
            return Ok(f32_tensor(out_shape, y));
        }
    }
    let mut col = if pointwise {
        Vec::new()
    } else {
        // Every element is written by im2col.
        cx.buffer(cx.scratch(kdim.checked_mul(plane))?)
    };
    for b in 0..n {
        for g in 0..group {
            let xg = &x[(b * c + g * cg) * h * w..][..cg * h * w];
            let src: &[f32] = if pointwise {
                xg
            } else {
                im2col(xg, cg, [kh, kw], ay, ax, &mut col, plane);
                &col
            };
            let out = &mut y[(b * m + g * mg) * plane..][..mg * plane];
            let epi = Epilogue {
                bias: bias.map_or(Bias::None, |b| Bias::Rows(&b[g * mg..][..mg])),
                act,
            };
            // Bias and activation are applied as each tile is stored.
            let rhs = Rhs::Strided {
                data: src,
                rs: plane,
                cs: 1,
            };
            gemm(
                [mg, kdim, plane],
                lhs(g),
                rhs,
                out,
                plane,
                epi,
                Kernel::Auto,
            );
        }
    }
    cx.give(col);
    Ok(f32_tensor(out_shape, y))
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

/// One im2col and one sgemm for the whole batch (small planes, where one sgemm per image
/// is mostly call overhead): `col` is `[kdim, n * plane]` (image `b` in columns
/// `b * plane..`), the product `[m, n * plane]` is then scattered to NCHW with the bias
/// and activation. `tmp_len` (`m * n * plane`) and the `col` size were checked against
/// the element limit.
struct Batched {
    nchw: [usize; 4],
    mk: [usize; 3],
    ay: Axis,
    ax: Axis,
}

impl Batched {
    fn run(
        &self,
        cx: &Ctx<'_>,
        (x, wt, bias): (&[f32], Lhs<'_>, Option<&[f32]>),
        act: Option<Act>,
        y: &mut [f32],
        tmp_len: usize,
    ) {
        let ([n, c, h, w], [m, kh, kw], ay, ax) = (self.nchw, self.mk, self.ay, self.ax);
        let plane = ay.out * ax.out;
        let (wide, kdim) = (n * plane, c * kh * kw);
        // Every element of both is written: by im2col and by sgemm (beta 0).
        let mut col = cx.buffer(kdim * wide);
        for b in 0..n {
            let xb = &x[b * c * h * w..][..c * h * w];
            im2col(xb, c, [kh, kw], ay, ax, &mut col[b * plane..], wide);
        }
        let mut tmp = cx.buffer(tmp_len);
        let epi = Epilogue {
            bias: bias.map_or(Bias::None, Bias::Rows),
            act,
        };
        let rhs = Rhs::Strided {
            data: &col,
            rs: wide,
            cs: 1,
        };
        gemm([m, kdim, wide], wt, rhs, &mut tmp, wide, epi, Kernel::Auto);
        for b in 0..n {
            for oc in 0..m {
                let dst = &mut y[(b * m + oc) * plane..][..plane];
                dst.copy_from_slice(&tmp[oc * wide + b * plane..][..plane]);
            }
        }
        cx.give(col);
        cx.give(tmp);
    }
}

/// im2col of one group of one image (`x`: `[cg, h, w]`) into `col`, row `(ci, ky, kx)`
/// (rows `pitch` apart), column `(oy, ox)`: each output row is a copy (stride 1) or a
/// strided gather of an input row between zero-filled borders.
fn im2col(
    x: &[f32],
    cg: usize,
    [kh, kw]: [usize; 2],
    ay: Axis,
    ax: Axis,
    col: &mut [f32],
    pitch: usize,
) {
    let (h, w) = (ay.input, ax.input);
    let (oh, ow) = (ay.out, ax.out);
    let plane = oh * ow;
    for ci in 0..cg {
        let xin = &x[ci * h * w..][..h * w];
        for ky in 0..kh {
            for kx in 0..kw {
                let s = ax.span(kx);
                let row = &mut col[((ci * kh + ky) * kw + kx) * pitch..][..plane];
                for (oy, r) in row.chunks_exact_mut(ow.max(1)).enumerate().take(oh) {
                    let Some(iy) = ay.at(oy, ky) else {
                        r.fill(0.0);
                        continue;
                    };
                    let xrow = &xin[iy * w..][..w];
                    r[..s.lo].fill(0.0);
                    r[s.hi..].fill(0.0);
                    if s.lo < s.hi {
                        let start = s.at(s.lo, ax.stride);
                        let dst = &mut r[s.lo..s.hi];
                        if ax.stride == 1 {
                            dst.copy_from_slice(&xrow[start..start + dst.len()]);
                        } else {
                            let src = xrow[start..].iter().step_by(ax.stride);
                            dst.iter_mut().zip(src).for_each(|(d, &v)| *d = v);
                        }
                    }
                }
            }
        }
    }
}
