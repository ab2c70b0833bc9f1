//! 2-D convolution (im2col + sgemm; grouped and depthwise directly), pooling and global
//! pooling, NCHW.

use super::{f32_tensor, linalg::sgemm, to_usize, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// Window geometry along one spatial axis.
#[derive(Clone, Copy)]
struct Axis {
    input: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    out: usize,
}

impl Axis {
    /// The input coordinate of output `o`, tap `k` (may lie in the padding).
    fn at(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation)
            .checked_sub(self.pad_begin)
            .filter(|&i| i < self.input)
    }
}

#[allow(clippy::too_many_arguments, reason = "one axis' geometry")]
fn axis(
    input: usize,
    kernel: usize,
    stride: i64,
    dilation: i64,
    pb: i64,
    pe: i64,
    ceil: bool,
) -> OpResult<Axis> {
    let stride = to_usize("stride", stride)?;
    let dilation = to_usize("dilation", dilation)?;
    let (pad_begin, pad_end) = (to_usize("padding", pb)?, to_usize("padding", pe)?);
    let too_big = OpError::Param {
        key: "padding",
        value: pb.max(pe),
        rule: "geometry overflows",
    };
    let padded = input
        .checked_add(pad_begin)
        .and_then(|v| v.checked_add(pad_end))
        .ok_or(too_big.clone())?;
    let extent = kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(dilation))
        .and_then(|v| v.checked_add(1))
        .ok_or(too_big)?;
    if padded < extent || kernel == 0 {
        return Err(OpError::Shape {
            input: 0,
            rule: "the (padded) input is smaller than the kernel's extent",
        });
    }
    let span = padded - extent;
    let mut out = if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    } + 1;
    // ONNX: with ceil_mode, a last window starting in the end padding is dropped.
    if ceil && (out - 1) * stride >= input + pad_begin {
        out -= 1;
    }
    Ok(Axis {
        input,
        stride,
        dilation,
        pad_begin,
        out,
    })
}

fn geometry(
    cx: &Ctx<'_>,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    ceil: bool,
) -> OpResult<(Axis, Axis)> {
    let p = cx.params();
    let s = p.ints("stride").unwrap_or(&[1, 1]);
    let d = p.ints("dilation").unwrap_or(&[1, 1]);
    let pad = p.ints("padding").unwrap_or(&[0, 0, 0, 0]);
    Ok((
        axis(h, kh, s[0], d[0], pad[0], pad[2], ceil)?,
        axis(w, kw, s[1], d[1], pad[1], pad[3], ceil)?,
    ))
}

fn nchw(cx: &Ctx<'_>) -> OpResult<[usize; 4]> {
    match *cx.shape(0)? {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(OpError::Shape {
            input: 0,
            rule: "must be rank 4 (NCHW)",
        }),
    }
}

/// Conv2D (OIHW weights, `group`) and DepthwiseConv2D ([C*m, 1, kh, kw]).
pub(crate) fn conv2d(cx: &Ctx<'_>, depthwise: bool) -> OpResult<Tensor> {
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
    let mut y = vec![0f32; total];
    let plane = ay.out * ax.out;
    let mg = m / group;
    if cg == 1 {
        // Depthwise (and any group = C conv): direct loops.
        for b in 0..n {
            for oc in 0..m {
                let ic = oc / mg;
                let xin = &x[(b * c + ic) * h * w..][..h * w];
                let k = &wt[oc * kh * kw..][..kh * kw];
                let out = &mut y[(b * m + oc) * plane..][..plane];
                for oy in 0..ay.out {
                    for ox in 0..ax.out {
                        let mut s = 0f32;
                        for ky in 0..kh {
                            let Some(iy) = ay.at(oy, ky) else { continue };
                            for kx in 0..kw {
                                if let Some(ix) = ax.at(ox, kx) {
                                    s += xin[iy * w + ix] * k[ky * kw + kx];
                                }
                            }
                        }
                        out[oy * ax.out + ox] = s;
                    }
                }
            }
        }
    } else {
        let kdim = cg * kh * kw;
        let mut col = vec![0f32; cx.scratch(kdim.checked_mul(plane))?];
        for b in 0..n {
            for g in 0..group {
                // im2col: row (ci, ky, kx), column (oy, ox).
                for ci in 0..cg {
                    let xin = &x[(b * c + g * cg + ci) * h * w..][..h * w];
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let row = &mut col[((ci * kh + ky) * kw + kx) * plane..][..plane];
                            for oy in 0..ay.out {
                                let iy = ay.at(oy, ky);
                                for ox in 0..ax.out {
                                    row[oy * ax.out + ox] = match (iy, ax.at(ox, kx)) {
                                        (Some(iy), Some(ix)) => xin[iy * w + ix],
                                        _ => 0.0,
                                    };
                                }
                            }
                        }
                    }
                }
                let a = &wt[g * mg * kdim..][..mg * kdim];
                let out = &mut y[(b * m + g * mg) * plane..][..mg * plane];
                sgemm(mg, kdim, plane, a, (kdim, 1), &col, (plane, 1), out);
            }
        }
    }
    if let Some(bias) = bias {
        for (i, v) in y.iter_mut().enumerate() {
            *v += bias[(i / plane) % m];
        }
    }
    Ok(f32_tensor(out_shape, y))
}

/// MaxPool2D / AvgPool2D.
pub(crate) fn pool2d(cx: &Ctx<'_>, max: bool) -> OpResult<Tensor> {
    let [n, c, h, w] = nchw(cx)?;
    let x = cx.f32(0)?;
    let p = cx.params();
    let k = p.ints("kernel").unwrap_or(&[1, 1]);
    let (kh, kw) = (to_usize("kernel", k[0])?, to_usize("kernel", k[1])?);
    let (ay, ax) = geometry(cx, h, w, kh, kw, cx.int("ceil_mode") == 1)?;
    let include_pad = cx.int("count_include_pad") == 1;
    let pad = p.ints("padding").unwrap_or(&[0, 0, 0, 0]);
    let (ph, pw) = (
        h + pad[0] as usize + pad[2] as usize,
        w + pad[1] as usize + pad[3] as usize,
    );
    let out_shape = vec![n, c, ay.out, ax.out];
    let total = cx.alloc(&out_shape)?;
    let mut y = Vec::with_capacity(total);
    for plane in 0..n * c {
        let xin = &x[plane * h * w..][..h * w];
        for oy in 0..ay.out {
            for ox in 0..ax.out {
                let (mut s, mut m, mut cnt, mut padded_cnt) =
                    (0f32, f32::NEG_INFINITY, 0usize, 0usize);
                let mut nan = false;
                for ky in 0..kh {
                    let py = oy * ay.stride + ky * ay.dilation;
                    let iy = ay.at(oy, ky);
                    for kx in 0..kw {
                        let px = ox * ax.stride + kx * ax.dilation;
                        if py < ph && px < pw {
                            padded_cnt += 1;
                        }
                        if let (Some(iy), Some(ix)) = (iy, ax.at(ox, kx)) {
                            let v = xin[iy * w + ix];
                            nan |= v.is_nan();
                            s += v;
                            m = m.max(v);
                            cnt += 1;
                        }
                    }
                }
                y.push(if max {
                    if nan {
                        f32::NAN
                    } else {
                        m
                    }
                } else {
                    let d = if include_pad { padded_cnt } else { cnt };
                    s / d.max(1) as f32
                });
            }
        }
    }
    Ok(f32_tensor(out_shape, y))
}

/// GlobalAveragePool / GlobalMaxPool over every axis after the first two.
pub(crate) fn global_pool(cx: &Ctx<'_>, max: bool) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    if s.len() < 3 {
        return Err(OpError::Shape {
            input: 0,
            rule: "must be rank >= 3 ([N, C, spatial...])",
        });
    }
    let x = cx.f32(0)?;
    let planes = s[0] * s[1];
    let size: usize = s[2..].iter().product();
    let mut out_shape = s[..2].to_vec();
    out_shape.extend(std::iter::repeat_n(1, s.len() - 2));
    let y = (0..planes)
        .map(|p| {
            let v = &x[p * size..][..size];
            if max {
                v.iter().fold(f32::NEG_INFINITY, |a, &b| {
                    if a.is_nan() || b.is_nan() {
                        f32::NAN
                    } else {
                        a.max(b)
                    }
                })
            } else {
                (v.iter().map(|&a| f64::from(a)).sum::<f64>() / size as f64) as f32
            }
        })
        .collect();
    Ok(f32_tensor(out_shape, y))
}
