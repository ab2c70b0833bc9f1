//! Sliding-window geometry (convolution and pooling, NCHW): per-axis output size from
//! stride, dilation, pads and ceil mode, and the range of outputs each kernel tap reads
//! inside the input (so kernels loop over rows without a bounds test per element).

use super::{to_usize, Ctx, OpError, OpResult};

/// Window geometry along one spatial axis.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Axis {
    pub input: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub pad_end: usize,
    pub out: usize,
}

/// The outputs `lo..hi` of one kernel tap that read inside the input, at input index
/// `o * stride + offset` (`offset` may be negative: the tap starts in the padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub lo: usize,
    pub hi: usize,
    pub offset: isize,
}

impl Span {
    /// The input index read by output `o` (`lo <= o < hi`).
    #[inline]
    pub fn at(&self, o: usize, stride: usize) -> usize {
        (o * stride).wrapping_add_signed(self.offset)
    }
}

impl Axis {
    /// The input coordinate of output `o`, tap `k` (`None` in the padding).
    #[inline]
    pub fn at(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation)
            .checked_sub(self.pad_begin)
            .filter(|&i| i < self.input)
    }

    /// The outputs of tap `k` that read inside the input (every index fits isize: it is
    /// bounded by a slice length and a checked padded extent).
    pub fn span(&self, k: usize) -> Span {
        let offset = (k * self.dilation) as isize - self.pad_begin as isize;
        let s = self.stride as isize;
        let lo = if offset >= 0 {
            0
        } else {
            ((-offset + s - 1) / s) as usize
        };
        let last = self.input as isize - 1 - offset;
        let hi = if last < 0 {
            0
        } else {
            ((last / s) as usize + 1).min(self.out)
        };
        Span {
            lo: lo.min(hi),
            hi,
            offset,
        }
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
        .filter(|&v| v <= isize::MAX as usize / 2)
        .ok_or(too_big.clone())?;
    let extent = kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(dilation))
        .and_then(|v| v.checked_add(1))
        .filter(|&v| v <= isize::MAX as usize / 2)
        .ok_or(too_big)?;
    if padded < extent || kernel == 0 {
        return Err(OpError::Shape {
            input: 0,
            rule: "the (padded) input is smaller than the kernel's extent",
        });
    }
    if stride == 0 {
        return Err(OpError::Param {
            key: "stride",
            value: 0,
            rule: "must be >= 1",
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
        pad_end,
        out,
    })
}

/// The (height, width) geometry of a `kh x kw` window from the operator's `stride`,
/// `dilation` and `padding` ([top, left, bottom, right]) parameters.
pub(crate) fn geometry(
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

/// Input 0's `[N, C, H, W]`.
pub(crate) fn nchw(cx: &Ctx<'_>) -> OpResult<[usize; 4]> {
    match *cx.shape(0)? {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(OpError::Shape {
            input: 0,
            rule: "must be rank 4 (NCHW)",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_exactly_the_inside_taps() {
        for input in 1..9 {
            for stride in 1..4 {
                for dilation in 1..3 {
                    for pb in 0..3 {
                        for kernel in 1..4 {
                            let Ok(a) = axis(input, kernel, stride, dilation, pb, 1, false) else {
                                continue;
                            };
                            for k in 0..kernel {
                                let s = a.span(k);
                                for o in 0..a.out {
                                    let inside = (s.lo..s.hi).contains(&o);
                                    assert_eq!(a.at(o, k).is_some(), inside, "{a:?} k {k} o {o}");
                                    if inside {
                                        assert_eq!(a.at(o, k), Some(s.at(o, a.stride)));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
