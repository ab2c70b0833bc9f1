//! Static shape arithmetic: broadcasting, axes, convolution and pooling output sizes,
//! and `auto_pad` resolved to explicit pads.

use crate::error::OnnxError;
use crate::node::Node;

/// Numpy-style broadcast of two shapes, `None` if they do not broadcast.
pub(crate) fn broadcast(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let r = a.len().max(b.len());
    let mut out = vec![0u64; r];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let db = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// An axis in `-rank..rank` made non-negative (`rank + 1` positions when `insert`).
///
/// # Errors
/// [`OnnxError::UnsupportedAttribute`] naming `attribute` when out of range.
pub(crate) fn axis(
    n: &Node,
    attribute: &'static str,
    a: i64,
    rank: usize,
) -> Result<usize, OnnxError> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if v < 0 || v >= r {
        return Err(n.unsupported(attribute, a, "axis out of range for the input's rank"));
    }
    Ok(v as usize)
}

/// Explicit 2-D pads `[top, left, bottom, right]` (ONNX's `[x1_begin, x2_begin, x1_end,
/// x2_end]`) for a window op over `spatial` (1 or 2) axes, resolving `auto_pad`. A 1-D
/// op runs as 2-D with a unit height ([`lift_1d`]): its pads `[begin, end]` become
/// `[0, begin, 0, end]`, and `auto_pad` needs no padding on the unit axis.
///
/// # Errors
/// [`OnnxError::UnsupportedAttribute`] for an unknown `auto_pad` or pads of the wrong
/// length or negative.
pub(crate) fn pads_2d(
    n: &Node,
    spatial: usize,
    input_hw: [u64; 2],
    kernel: [u64; 2],
    strides: [u64; 2],
    dilations: [u64; 2],
) -> Result<[u64; 4], OnnxError> {
    let auto = n.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
    match auto.as_str() {
        "NOTSET" | "" => match n.ints("pads")? {
            None => Ok([0; 4]),
            Some(p) if p.len() == 2 * spatial && p.iter().all(|&x| x >= 0) => Ok(match *p {
                [b, e] => [0, b as u64, 0, e as u64],
                _ => [p[0] as u64, p[1] as u64, p[2] as u64, p[3] as u64],
            }),
            Some(p) => Err(n.unsupported(
                "pads",
                format!("{p:?}"),
                "a begin and an end per spatial axis, >= 0",
            )),
        },
        "VALID" => Ok([0; 4]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut begin = [0u64; 2];
            let mut end = [0u64; 2];
            for i in 0..2 {
                let out = input_hw[i].div_ceil(strides[i]);
                let eff = (kernel[i] - 1) * dilations[i] + 1;
                let need = (out.saturating_sub(1) * strides[i] + eff).saturating_sub(input_hw[i]);
                let small = need / 2;
                (begin[i], end[i]) = if auto == "SAME_UPPER" {
                    (small, need - small)
                } else {
                    (need - small, small)
                };
            }
            Ok([begin[0], begin[1], end[0], end[1]])
        }
        other => Err(n.unsupported(
            "auto_pad",
            other,
            "expected NOTSET, VALID, SAME_UPPER or SAME_LOWER",
        )),
    }
}

/// Output size of a window along one axis: `floor((in + pads - eff) / stride) + 1`, or
/// with `ceil_mode` the ceiling, dropping a last window that would start in the end pad
/// (onnxruntime's and PyTorch's rule).
pub(crate) fn window_out(
    input: u64,
    pad_begin: u64,
    pad_end: u64,
    eff_kernel: u64,
    stride: u64,
    ceil: bool,
) -> Option<u64> {
    let span = (input + pad_begin + pad_end).checked_sub(eff_kernel)?;
    let mut out = if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    } + 1;
    if ceil && (out - 1) * stride >= input + pad_begin {
        out -= 1;
    }
    Some(out)
}

/// An INTS attribute of one positive value per spatial axis (`spatial` is 1 or 2), or
/// `default`, as 2-D values: a 1-D op's unit height gets 1.
///
/// # Errors
/// [`OnnxError::UnsupportedAttribute`] for another length or a value < 1.
pub(crate) fn pair(
    n: &Node,
    attribute: &'static str,
    spatial: usize,
    default: u64,
) -> Result<[u64; 2], OnnxError> {
    match n.ints(attribute)? {
        None if spatial == 1 => Ok([1, default]),
        None => Ok([default; 2]),
        Some(v) if v.len() == spatial && v.iter().all(|&x| x >= 1) => Ok(match *v {
            [w] => [1, w as u64],
            _ => [v[0] as u64, v[1] as u64],
        }),
        Some(v) => Err(n.unsupported(
            attribute,
            format!("{v:?}"),
            "one positive value per spatial axis",
        )),
    }
}

/// The 4-D NCHW shape a window op over `shape` runs on, and its spatial rank: a 2-D
/// shape `[N, C, H, W]` as it is, a 1-D `[N, C, L]` as `[N, C, 1, L]` (MOBI's window
/// operators are 2-D; a unit height computes the 1-D op exactly).
///
/// # Errors
/// [`OnnxError::Shape`] for any other rank.
pub(crate) fn lift_1d(n: &Node, shape: &[u64]) -> Result<([u64; 4], usize), OnnxError> {
    match *shape {
        [a, b, l] => Ok(([a, b, 1, l], 1)),
        [a, b, c, d] => Ok(([a, b, c, d], 2)),
        _ => Err(n.shape_err(format!(
            "input shape {shape:?}: MOBI has 1-D and 2-D (NCHW) windows only"
        ))),
    }
}

/// Product of a slice of dims.
pub(crate) fn product(d: &[u64]) -> u64 {
    d.iter().product()
}
