//! Resize (ONNX Resize opset 19): nearest, linear and cubic interpolation of an f32
//! tensor of any rank, every coordinate transformation mode, antialiasing, `roi` and
//! `extrapolation_value` for tf_crop_and_resize.
//!
//! Interpolation is separable: each axis is resized on its own, one after the other,
//! from a per-axis table of taps (for every output index: the clamped input indices and
//! their weights). The taps follow the ONNX reference implementation: the `n` input
//! indices nearest to the source coordinate (ties to the smaller), with the kernel's
//! weights evaluated at the coordinate's fractional part.

use super::{f32_tensor, Ctx, OpError, OpResult};
use crate::tensor::{numel, Tensor};

/// How a source coordinate becomes weights.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kernel {
    Nearest(Rounding),
    Linear { antialias: bool },
    Cubic { a: f64, antialias: bool },
}

/// `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

/// `coordinate_transformation_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

/// One axis's resampling: per output index, `n` taps (input index, weight), and whether
/// the output is extrapolated (tf_crop_and_resize outside the input).
struct Taps {
    n: usize,
    index: Vec<usize>,
    weight: Vec<f32>,
    outside: Vec<bool>,
}

/// The weights of the `n`-tap kernel at fractional position `ratio` (in (0, 1]) for
/// scale `scale` (ONNX reference: `_nearest_coeffs`, `_linear_coeffs[_antialias]`,
/// `_cubic_coeffs[_antialias]`).
fn coeffs(k: Kernel, ratio: f64, scale: f64, out: &mut Vec<f64>) {
    out.clear();
    match k {
        Kernel::Nearest(r) => {
            let right = if ratio == ratio.trunc() {
                true
            } else {
                match r {
                    Rounding::PreferFloor => ratio > 0.5,
                    Rounding::PreferCeil => ratio >= 0.5,
                    Rounding::Floor => false,
                    Rounding::Ceil => true,
                }
            };
            out.extend(if right { [0.0, 1.0] } else { [1.0, 0.0] });
        }
        Kernel::Linear { antialias: false } => out.extend([1.0 - ratio, ratio]),
        Kernel::Linear { antialias: true } => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            for i in start..start + footprint {
                let x = (i as f64 - ratio) * s;
                out.push((1.0 - x.abs()).clamp(0.0, 1.0));
            }
            normalize(out);
        }
        Kernel::Cubic {
            a,
            antialias: false,
        } => {
            let (r, q) = (ratio, 1.0 - ratio);
            out.extend([
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
            ]);
        }
        Kernel::Cubic { a, antialias: true } => {
            let s = scale.min(1.0);
            let start = (-2.0 / s).floor() as i64 + 1;
            for i in start..2 - start {
                let x = (s * (i as f64 - ratio)).abs();
                let (x2, x3) = (x * x, x * x * x);
                out.push(if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                });
            }
            normalize(out);
        }
    }
}

fn normalize(w: &mut [f64]) {
    let sum: f64 = w.iter().sum();
    if sum != 0.0 {
        w.iter_mut().for_each(|v| *v /= sum);
    }
}

/// The source coordinate of output index `y` (f64, as the reference), and whether it
/// lies outside the input for tf_crop_and_resize.
fn source(c: Coord, y: f64, scale: f64, input: usize, out: usize, roi: (f64, f64)) -> (f64, bool) {
    let (inf, outf) = (input as f64, scale * input as f64);
    match c {
        Coord::AlignCorners if outf == 1.0 => (0.0, false),
        Coord::AlignCorners => (y * (inf - 1.0) / (outf - 1.0), false),
        Coord::Asymmetric => (y / scale, false),
        Coord::TfHalfPixelForNn => ((y + 0.5) / scale, false),
        Coord::TfCropAndResize => {
            let x = if outf == 1.0 {
                (roi.1 - roi.0) * (inf - 1.0) / 2.0
            } else {
                y * (roi.1 - roi.0) * (inf - 1.0) / (outf - 1.0)
            } + roi.0 * (inf - 1.0);
            (x, x < 0.0 || x > inf - 1.0)
        }
        Coord::PytorchHalfPixel if outf == 1.0 => (-0.5, false),
        Coord::PytorchHalfPixel | Coord::HalfPixel => ((y + 0.5) / scale - 0.5, false),
        Coord::HalfPixelSymmetric => {
            let adjustment = out as f64 / outf;
            let offset = inf / 2.0 * (1.0 - adjustment);
            (offset + (y + 0.5) / scale - 0.5, false)
        }
    }
}

/// Antialiased kernels wider than this many taps are refused (a scale of about 1e-6):
/// the width grows as 1/scale, and a crafted scale must not size an allocation.
const MAX_TAPS: f64 = (1u64 << 20) as f64;

/// The number of taps of kernel `k` at `scale` (the length [`coeffs`] produces), `None`
/// above [`MAX_TAPS`].
fn kernel_width(k: Kernel, scale: f64) -> Option<usize> {
    let half = match k {
        Kernel::Nearest(_) | Kernel::Linear { antialias: false } => return Some(2),
        Kernel::Cubic {
            antialias: false, ..
        } => return Some(4),
        Kernel::Linear { antialias: true } => 1.0,
        Kernel::Cubic {
            antialias: true, ..
        } => 2.0,
    };
    // start = floor(-half / s) + 1, width = 2 - 2 * start.
    let start = (-half / scale.min(1.0)).floor() + 1.0;
    let width = 2.0 - 2.0 * start;
    (width <= MAX_TAPS).then_some(width as usize)
}

/// The taps of one axis (`input` > 0 elements resized to `out`), `n` taps per output
/// ([`kernel_width`], checked by the caller).
#[allow(clippy::too_many_arguments, reason = "one axis's resampling inputs")]
fn taps(
    k: Kernel,
    c: Coord,
    scale: f64,
    input: usize,
    out: usize,
    roi: (f64, f64),
    exclude_outside: bool,
    n: usize,
) -> Taps {
    let mut w = Vec::with_capacity(n);
    let mut t = Taps {
        n,
        index: Vec::with_capacity(out * n),
        weight: Vec::with_capacity(out * n),
        outside: Vec::with_capacity(out),
    };
    let pad = n.div_ceil(2) as f64;
    let last = input as i64 - 1;
    for y in 0..out {
        let (x, outside) = source(c, y as f64, scale, input, out, roi);
        // Beyond a kernel's width outside the input every tap clamps to the same edge
        // element (weights summing to 1, or all 0 with exclude_outside), so clamping x
        // there changes nothing and keeps the index arithmetic small; NaN (only from
        // infinite roi values) reads as 0.
        let margin = n as f64 + 2.0;
        let x = if x.is_nan() {
            0.0
        } else {
            x.clamp(-margin, input as f64 + margin)
        };
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        coeffs(k, ratio, scale, &mut w);
        debug_assert_eq!(w.len(), n);
        // The n indices nearest to x, ties to the smaller (the reference's
        // `_get_neighbor_idxes` on the edge-padded axis).
        let xp = x + pad;
        let pp = xp.floor();
        let frac = xp - pp;
        let half = (n / 2) as i64;
        let offset = if n.is_multiple_of(2) {
            if frac == 0.0 {
                -half
            } else {
                1 - half
            }
        } else {
            let base = -((n as i64 - 1) / 2);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let start = pp as i64 + offset - pad as i64;
        if exclude_outside {
            for (j, v) in w.iter_mut().enumerate() {
                let i = start + j as i64;
                if i < 0 || i > last {
                    *v = 0.0;
                }
            }
            normalize(&mut w);
        }
        for (j, v) in w.iter().enumerate() {
            t.index.push((start + j as i64).clamp(0, last) as usize);
            t.weight.push(*v as f32);
        }
        t.outside.push(outside);
    }
    t
}

/// Resize `src` (shape `shape`) along `axis` to `t.outside.len()` elements, into `dst`.
fn resample(
    src: &[f32],
    shape: &[usize],
    axis: usize,
    t: &Taps,
    extrapolation: f32,
    dst: &mut [f32],
) {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let (input, out) = (shape[axis], t.outside.len());
    for o in 0..outer {
        let s = &src[o * input * inner..][..input * inner];
        let d = &mut dst[o * out * inner..][..out * inner];
        for (y, row) in d.chunks_exact_mut(inner.max(1)).enumerate().take(out) {
            if t.outside[y] {
                row.fill(extrapolation);
                continue;
            }
            let idx = &t.index[y * t.n..][..t.n];
            let wt = &t.weight[y * t.n..][..t.n];
            row.fill(0.0);
            for (&i, &w) in idx.iter().zip(wt) {
                if w == 0.0 {
                    continue;
                }
                let from = &s[i * inner..][..inner];
                row.iter_mut().zip(from).for_each(|(r, &v)| *r += w * v);
            }
        }
    }
}

fn parse<T: Copy>(key: &'static str, v: Option<&str>, table: &[(&str, T)]) -> OpResult<T> {
    let v = v.unwrap_or("");
    table
        .iter()
        .find(|(name, _)| *name == v)
        .map(|(_, t)| *t)
        .ok_or(OpError::Param {
            key,
            value: 0,
            rule: "unknown value",
        })
}

/// Resize.
pub(crate) fn resize(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let x = cx.f32(0)?;
    let shape = cx.shape(0)?.to_vec();
    let p = cx.params();
    let rank = shape.len();
    let (scales, sizes) = (p.floats("scales"), p.ints("sizes"));
    for (key, len) in [
        ("scales", scales.map(<[f64]>::len)),
        ("sizes", sizes.map(<[i64]>::len)),
        ("roi", p.floats("roi").map(|r| r.len() / 2)),
    ] {
        if let Some(len) = len.filter(|&l| l != rank) {
            return Err(OpError::Param {
                key,
                value: len as i64,
                rule: "one value per axis of the input",
            });
        }
    }
    let mut out = shape.clone();
    let mut scale = vec![1.0f64; rank];
    for i in 0..rank {
        match (sizes, scales) {
            (Some(sz), sc) => {
                out[i] = super::to_usize("sizes", sz[i])?;
                scale[i] = match sc {
                    Some(sc) => sc[i],
                    None => out[i] as f64 / shape[i] as f64,
                };
            }
            (None, Some(sc)) => {
                scale[i] = sc[i];
                let o = sc[i] * shape[i] as f64;
                if !(0.0..=u64::MAX as f64).contains(&o) {
                    return Err(OpError::TooLarge { elements: u64::MAX });
                }
                out[i] = o as usize;
            }
            (None, None) => {
                return Err(OpError::Param {
                    key: "scales",
                    value: 0,
                    rule: "give scales, sizes or both",
                })
            }
        }
        if shape[i] == 0 && out[i] != 0 {
            return Err(OpError::Shape {
                input: 0,
                rule: "an empty axis cannot be resized to a non-empty one",
            });
        }
    }
    let total = cx.alloc(&out)?;
    if total == 0 {
        return Ok(f32_tensor(out, Vec::new()));
    }
    let coord = parse(
        "coordinate_transformation_mode",
        p.str("coordinate_transformation_mode"),
        &[
            ("half_pixel", Coord::HalfPixel),
            ("half_pixel_symmetric", Coord::HalfPixelSymmetric),
            ("pytorch_half_pixel", Coord::PytorchHalfPixel),
            ("align_corners", Coord::AlignCorners),
            ("asymmetric", Coord::Asymmetric),
            ("tf_half_pixel_for_nn", Coord::TfHalfPixelForNn),
            ("tf_crop_and_resize", Coord::TfCropAndResize),
        ],
    )?;
    let antialias = cx.int("antialias") == 1;
    let kernel = match p.str("mode") {
        Some("linear") => Kernel::Linear { antialias },
        Some("cubic") => Kernel::Cubic {
            a: p.float("cubic_coeff_a").unwrap_or(-0.75),
            antialias,
        },
        m => Kernel::Nearest(parse(
            "nearest_mode",
            p.str("nearest_mode").filter(|_| m == Some("nearest")),
            &[
                ("round_prefer_floor", Rounding::PreferFloor),
                ("round_prefer_ceil", Rounding::PreferCeil),
                ("floor", Rounding::Floor),
                ("ceil", Rounding::Ceil),
            ],
        )?),
    };
    let exclude = cx.int("exclude_outside") == 1;
    let extrapolation = cx.float("extrapolation_value");
    let roi = p.floats("roi");
    let crop = coord == Coord::TfCropAndResize;
    let mut cur_shape = shape.clone();
    let mut cur: Option<Vec<f32>> = None;
    for axis in 0..rank {
        let r = match (crop, roi) {
            (true, Some(r)) => (r[axis], r[axis + rank]),
            _ => (0.0, 1.0),
        };
        let identity = (scale[axis] - 1.0).abs() <= 1e-9
            && out[axis] == cur_shape[axis]
            && (!crop || ((r.0).abs() <= 1e-9 && (r.1 - 1.0).abs() <= 1e-9));
        if identity {
            continue;
        }
        let mut next_shape = cur_shape.clone();
        next_shape[axis] = out[axis];
        let n = cx.scratch(numel(&next_shape))?;
        let width = kernel_width(kernel, scale[axis]).ok_or(OpError::Param {
            key: "scales",
            value: 0,
            rule: "an antialiased kernel this wide (scale below about 1e-6) is refused",
        })?;
        cx.scratch(out[axis].checked_mul(width))?;
        let mut dst = cx.buffer(n);
        if cur_shape[axis] > 0 && n > 0 {
            let t = taps(
                kernel,
                coord,
                scale[axis],
                cur_shape[axis],
                out[axis],
                r,
                exclude,
                width,
            );
            let src = cur.as_deref().unwrap_or(x);
            resample(src, &cur_shape, axis, &t, extrapolation, &mut dst);
        }
        if let Some(old) = cur.replace(dst) {
            cx.give(old);
        }
        cur_shape = next_shape;
    }
    let y = match cur {
        Some(y) => y,
        None => {
            let mut y = cx.buffer(total);
            y.copy_from_slice(x);
            y
        }
    };
    Ok(f32_tensor(out, y))
}
