//! ConvTranspose2D, NCHW, weights `[C, M/group, kh, kw]`: per image and group one sgemm
//! `cols[M/group * kh * kw, H * W] = W_g^T * X_g` (the weights read transposed through
//! sgemm's strides, no copy), then col2im: each column row `(m, ky, kx)` is added into
//! output channel `m` shifted by the tap's offset, over the input positions whose target
//! lies inside the output. The output starts as the bias.

use super::linalg::sgemm;
use super::window::nchw;
use super::{f32_tensor, to_usize, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// Per spatial axis: stride, dilation, the begin padding, the input and output sizes and
/// the kernel size.
#[derive(Debug, Clone, Copy)]
struct Axis {
    stride: usize,
    dilation: usize,
    pad: usize,
    input: usize,
    out: usize,
    kernel: usize,
}

impl Axis {
    /// The input positions `lo..hi` whose target `i * stride + k * dilation - pad` lies
    /// in `0..out` for tap `k`, and the target of `lo`.
    fn span(&self, k: usize) -> (usize, usize, usize) {
        let shift = k.saturating_mul(self.dilation);
        // First i with i * stride + shift >= pad.
        let lo = self.pad.saturating_sub(shift).div_ceil(self.stride);
        // i * stride + shift < pad + out  <=>  i < (pad + out - shift) / stride (ceil).
        let hi = self
            .pad
            .saturating_add(self.out)
            .saturating_sub(shift)
            .div_ceil(self.stride)
            .min(self.input);
        let lo = lo.min(hi);
        let target = lo
            .saturating_mul(self.stride)
            .saturating_add(shift)
            .saturating_sub(self.pad);
        (lo, hi, target)
    }
}

fn pair(cx: &Ctx<'_>, key: &'static str, default: [i64; 2]) -> OpResult<[usize; 2]> {
    let v = cx.params().ints(key).unwrap_or(&default).to_vec();
    match v.as_slice() {
        [a, b] => Ok([to_usize(key, *a)?, to_usize(key, *b)?]),
        _ => Err(OpError::Param {
            key,
            value: v.len() as i64,
            rule: "two values (h, w)",
        }),
    }
}

/// The output size along one axis: `stride*(in-1) + output_padding + dilation*(k-1) + 1
/// - pad_begin - pad_end`, `None` when negative or overflowing.
fn out_size(a: [usize; 6]) -> Option<usize> {
    let [input, k, stride, dilation, extra, pads] = a;
    stride
        .checked_mul(input.checked_sub(1)?)?
        .checked_add(extra)?
        .checked_add(dilation.checked_mul(k.checked_sub(1)?)?)?
        .checked_add(1)?
        .checked_sub(pads)
}

/// ConvTranspose2D.
pub(crate) fn conv_transpose2d(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let [n, c, h, w] = nchw(cx)?;
    let (x, wt) = (cx.f32(0)?, cx.f32(1)?);
    let [c2, mg, kh, kw] = match *cx.shape(1)? {
        [a, b, c, d] => [a, b, c, d],
        _ => {
            return Err(OpError::Shape {
                input: 1,
                rule: "weights must be rank 4 [C, M/group, kh, kw]",
            })
        }
    };
    let group = to_usize("group", cx.int("group"))?;
    if group == 0 || c2 != c || c % group != 0 {
        return Err(OpError::Shape {
            input: 1,
            rule: "weights [C, M/group, kh, kw] do not match the input channels and group",
        });
    }
    let m = mg
        .checked_mul(group)
        .ok_or(OpError::TooLarge { elements: u64::MAX })?;
    let bias = match cx.inputs.len() {
        3 => Some(cx.f32(2)?),
        _ => None,
    };
    if bias.is_some_and(|b| b.len() != m) {
        return Err(OpError::Shape {
            input: 2,
            rule: "bias length must equal the output channels (W.shape[1] * group)",
        });
    }
    let stride = pair(cx, "stride", [1, 1])?;
    let dil = pair(cx, "dilation", [1, 1])?;
    let extra = pair(cx, "output_padding", [0, 0])?;
    let pads = cx
        .params()
        .ints("padding")
        .unwrap_or(&[0, 0, 0, 0])
        .to_vec();
    let [pt, pl, pb, pr] = match pads.as_slice() {
        [a, b, c, d] => [
            to_usize("padding", *a)?,
            to_usize("padding", *b)?,
            to_usize("padding", *c)?,
            to_usize("padding", *d)?,
        ],
        _ => {
            return Err(OpError::Param {
                key: "padding",
                value: pads.len() as i64,
                rule: "four values (top, left, bottom, right)",
            })
        }
    };
    if stride.contains(&0) || dil.contains(&0) {
        return Err(OpError::Param {
            key: "stride",
            value: 0,
            rule: "strides and dilations must be >= 1",
        });
    }
    let size = |i: usize, k: usize, a: usize, p: usize| {
        out_size([i, k, stride[a], dil[a], extra[a], p]).ok_or(OpError::Param {
            key: "padding",
            value: p as i64,
            rule: "the output would have a negative size",
        })
    };
    if h == 0 || w == 0 || kh == 0 || kw == 0 {
        return Err(OpError::Shape {
            input: if kh == 0 || kw == 0 { 1 } else { 0 },
            rule: "spatial axes and kernel must not be empty",
        });
    }
    let (oh, ow) = (size(h, kh, 0, pt + pb)?, size(w, kw, 1, pl + pr)?);
    let out_shape = vec![n, m, oh, ow];
    let total = cx.alloc(&out_shape)?;
    let plane = oh * ow;
    let mut y = cx.buffer(total);
    for (i, ch) in y.chunks_exact_mut(plane.max(1)).enumerate().take(n * m) {
        ch.fill(bias.map_or(0.0, |b| b[i % m]));
    }
    let (cg, hw, kk) = (c / group, h * w, kh * kw);
    if mg == 0 || cg == 0 || plane == 0 || n == 0 {
        return Ok(f32_tensor(out_shape, y));
    }
    let ay = Axis {
        stride: stride[0],
        dilation: dil[0],
        pad: pt,
        input: h,
        out: oh,
        kernel: kh,
    };
    let ax = Axis {
        stride: stride[1],
        dilation: dil[1],
        pad: pl,
        input: w,
        out: ow,
        kernel: kw,
    };
    let rows = mg * kk;
    // Every element is written by sgemm (beta 0).
    let mut cols = cx.buffer(cx.scratch(rows.checked_mul(hw))?);
    let xspans: Vec<(usize, usize, usize)> = (0..ax.kernel).map(|k| ax.span(k)).collect();
    for b in 0..n {
        for g in 0..group {
            let xg = &x[(b * c + g * cg) * hw..][..cg * hw];
            let wg = &wt[g * cg * rows..][..cg * rows];
            // cols = wg^T (rows x cg) * xg (cg x hw).
            sgemm(rows, cg, hw, wg, (1, rows), xg, (hw, 1), &mut cols);
            let out = &mut y[(b * m + g * mg) * plane..][..mg * plane];
            col2im(&cols, out, mg, ay, ax, &xspans);
        }
    }
    cx.give(cols);
    Ok(f32_tensor(out_shape, y))
}

/// Add the column rows `(mo, ky, kx)` (each `[H, W]`) into `out` (`[mg, oh, ow]`).
fn col2im(
    cols: &[f32],
    out: &mut [f32],
    mg: usize,
    ay: Axis,
    ax: Axis,
    xspans: &[(usize, usize, usize)],
) {
    let (h, w, ow) = (ay.input, ax.input, ax.out);
    let plane = ay.out * ow;
    let mut r = 0;
    for mo in 0..mg {
        let dst = &mut out[mo * plane..][..plane];
        for ky in 0..ay.kernel {
            let (ylo, yhi, oy0) = ay.span(ky);
            for &(xlo, xhi, ox0) in xspans {
                let src = &cols[r * h * w..][..h * w];
                r += 1;
                if xlo >= xhi {
                    continue;
                }
                for (j, iy) in (ylo..yhi).enumerate() {
                    let oy = oy0 + j * ay.stride;
                    let srow = &src[iy * w..][xlo..xhi];
                    let drow = &mut dst[oy * ow..][..ow];
                    if ax.stride == 1 {
                        drow[ox0..ox0 + srow.len()]
                            .iter_mut()
                            .zip(srow)
                            .for_each(|(d, &v)| *d += v);
                    } else {
                        let targets = drow[ox0..].iter_mut().step_by(ax.stride);
                        targets.zip(srow).for_each(|(d, &v)| *d += v);
                    }
                }
            }
        }
    }
}
