//! Lowering of Resize (opsets 10, 11, 13, 18, 19) and the deprecated Upsample (7, 9)
//! onto MOBI Resize: `roi`, `scales` and `sizes` must be constants; ONNX's `axes` and
//! `keep_aspect_ratio_policy` are resolved here to one scale and size per axis of X.
//!
//! Per opset: 10 and Upsample take `X, scales` and are asymmetric (ONNX Resize-10 /
//! onnxruntime: nearest picks floor(x) when upsampling, ceil(x) when downsampling);
//! 11 adds `roi`, `sizes`, the coordinate modes (tf_half_pixel_for_nn until 12), cubic
//! and the nearest modes; 13 makes `roi`/`scales` optional; 18 adds `antialias`, `axes`
//! and `keep_aspect_ratio_policy`; 19 adds half_pixel_symmetric.

use tensorvault_formats::mobi::{OperatorType as Op, ParamValue};

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{float, int, string};

const COORD_MODES: &[&str] = &[
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
];

/// A constant float input (absent or empty: `None`).
fn floats_in(ctx: &Ctx, n: &Node, i: usize) -> Result<Option<Vec<f32>>, OnnxError> {
    if !ctx.has_input(n, i) {
        return Ok(None);
    }
    let c = ctx.need_const(n, i)?;
    Ok(Some(c.to_f32()).filter(|v| !v.is_empty()))
}

/// `axes` (opset 18+) made non-negative and checked unique; all axes when absent.
fn resize_axes(n: &Node, rank: usize, opset: i64) -> Result<Vec<usize>, OnnxError> {
    let Some(raw) = n.ints("axes")? else {
        return Ok((0..rank).collect());
    };
    if opset < 18 {
        return Err(n.unsupported("axes", format!("{raw:?}"), "needs opset 18"));
    }
    let mut axes = Vec::with_capacity(raw.len());
    for &a in &raw {
        let v = crate::shape::axis(n, "axes", a, rank)?;
        if axes.contains(&v) {
            return Err(n.unsupported("axes", format!("{raw:?}"), "axes must be unique"));
        }
        axes.push(v);
    }
    Ok(axes)
}

/// The rounding of opset-10 Resize and Upsample nearest: floor when every resized axis
/// grows, ceil when every one shrinks (onnxruntime's rule for these opsets).
fn legacy_nearest(n: &Node, scales: &[f64]) -> Result<&'static str, OnnxError> {
    let up = scales.iter().any(|&s| s > 1.0);
    let down = scales.iter().any(|&s| s < 1.0);
    match (up, down) {
        (true, true) => Err(n.unsupported(
            "scales",
            format!("{scales:?}"),
            "opset-10 nearest rounds per axis (floor up, ceil down); mixed up- and downsampling has no single MOBI nearest_mode",
        )),
        (false, true) => Ok("ceil"),
        _ => Ok("floor"),
    }
}

/// Resize / Upsample -> MOBI Resize.
pub(crate) fn resize(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    let upsample = n.op() == "Upsample";
    let opset = ctx.opset;
    let legacy = upsample || opset < 11;
    match (upsample, opset) {
        (true, o) if o < 9 => n.arity(1, 1, "1")?,
        (_, o) if o < 11 => n.arity(2, 2, "2")?,
        (_, o) if o < 13 => n.arity(3, 4, "3..=4")?,
        _ => n.arity(1, 4, "1..=4")?,
    }
    let x = ctx.dyn_in(n, 0)?;
    let rank = x.shape.len();
    let (roi, scales, sizes) = if legacy {
        let s = match n.floats("scales")? {
            Some(s) if opset < 9 => Some(s),
            _ => floats_in(ctx, n, 1)?,
        };
        (None, s, None)
    } else {
        let sizes = if ctx.has_input(n, 3) {
            Some(ctx.need_const(n, 3)?.to_i64()).filter(|v| !v.is_empty())
        } else {
            None
        };
        (floats_in(ctx, n, 1)?, floats_in(ctx, n, 2)?, sizes)
    };
    let axes = if legacy {
        (0..rank).collect()
    } else {
        resize_axes(n, rank, opset)?
    };
    let given = match (&scales, &sizes) {
        (Some(_), Some(_)) => {
            return Err(n.unsupported("scales", "and sizes", "give scales or sizes, not both"))
        }
        (None, None) => return Err(n.missing("scales")),
        (Some(s), None) => s.len(),
        (None, Some(s)) => s.len(),
    };
    if given != axes.len() {
        return Err(n.shape_err(format!(
            "{given} scales/sizes for {} axes of input {:?}",
            axes.len(),
            x.shape
        )));
    }
    let mode = n.string("mode")?.unwrap_or_else(|| "nearest".into());
    let modes: &[&str] = if legacy {
        &["nearest", "linear"]
    } else {
        &["nearest", "linear", "cubic"]
    };
    if !modes.contains(&mode.as_str()) {
        return Err(n.unsupported("mode", &mode, "nearest, linear or (opset 11+) cubic"));
    }
    let coord = n
        .string("coordinate_transformation_mode")?
        .unwrap_or_else(|| "half_pixel".into());
    let coord = if legacy {
        "asymmetric".to_string()
    } else {
        let ok = COORD_MODES.contains(&coord.as_str())
            && (coord != "tf_half_pixel_for_nn" || opset < 13)
            && (coord != "half_pixel_symmetric" || opset >= 19);
        if !ok {
            return Err(n.unsupported(
                "coordinate_transformation_mode",
                &coord,
                "not defined at this opset",
            ));
        }
        coord
    };
    // Full-rank scales (f64 of the f32 values) and sizes.
    let input: Vec<u64> = x.shape.clone();
    let mut full_scales: Option<Vec<f64>> = None;
    let mut full_sizes: Option<Vec<i64>> = None;
    if let Some(s) = &scales {
        let mut f = vec![1.0f64; rank];
        for (&a, &v) in axes.iter().zip(s) {
            if !(v.is_finite() && v > 0.0) {
                return Err(n.unsupported("scales", v, "scales must be finite and > 0"));
            }
            f[a] = f64::from(v);
        }
        full_scales = Some(f);
    }
    let policy = n
        .string("keep_aspect_ratio_policy")?
        .unwrap_or_else(|| "stretch".into());
    if policy != "stretch" && opset < 18 {
        return Err(n.unsupported("keep_aspect_ratio_policy", &policy, "needs opset 18"));
    }
    if let Some(s) = &sizes {
        let mut f: Vec<i64> = input.iter().map(|&d| d as i64).collect();
        for (&a, &v) in axes.iter().zip(s) {
            if v < 0 {
                return Err(n.unsupported("sizes", v, "sizes must be >= 0"));
            }
            f[a] = v;
        }
        match policy.as_str() {
            "stretch" => {}
            "not_larger" | "not_smaller" => {
                let ratios = axes.iter().map(|&a| f[a] as f64 / input[a] as f64);
                let scale = if policy == "not_larger" {
                    ratios.fold(f64::INFINITY, f64::min)
                } else {
                    ratios.fold(f64::NEG_INFINITY, f64::max)
                };
                if !(scale.is_finite() && scale > 0.0) {
                    return Err(n.shape_err(format!(
                        "keep_aspect_ratio_policy {policy}: sizes {s:?} for input {input:?} give scale {scale}"
                    )));
                }
                let mut sc = vec![1.0f64; rank];
                for &a in &axes {
                    sc[a] = scale;
                    f[a] = (scale * input[a] as f64 + 0.5) as i64;
                }
                full_scales = Some(sc);
            }
            other => {
                return Err(n.unsupported(
                    "keep_aspect_ratio_policy",
                    other,
                    "stretch, not_larger or not_smaller",
                ))
            }
        }
        full_sizes = Some(f);
    }
    let out_shape: Vec<u64> = match (&full_sizes, &full_scales) {
        (Some(sz), _) => sz.iter().map(|&v| v as u64).collect(),
        (None, Some(sc)) => input
            .iter()
            .zip(sc)
            .map(|(&d, &s)| (s * d as f64) as u64)
            .collect(),
        (None, None) => return Err(n.missing("scales")),
    };
    if let Some((i, _)) = input
        .iter()
        .zip(&out_shape)
        .enumerate()
        .find(|(_, (&d, &o))| d == 0 && o != 0)
    {
        return Err(n.shape_err(format!("axis {i} of input {input:?} is empty")));
    }
    crate::tensor::check_elements(
        n.output(0).unwrap_or_default(),
        out_shape
            .iter()
            .try_fold(1u64, |a, &v| a.checked_mul(v))
            .unwrap_or(u64::MAX),
    )?;
    let mut params: Vec<(String, ParamValue)> = vec![
        string("mode", &mode),
        string("coordinate_transformation_mode", &coord),
    ];
    match mode.as_str() {
        "nearest" => {
            let nm = if legacy {
                legacy_nearest(n, full_scales.as_deref().unwrap_or(&[]))?.to_string()
            } else {
                n.string("nearest_mode")?
                    .unwrap_or_else(|| "round_prefer_floor".into())
            };
            if !["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"].contains(&nm.as_str())
            {
                return Err(n.unsupported("nearest_mode", &nm, "not an ONNX nearest mode"));
            }
            params.push(string("nearest_mode", &nm));
        }
        "cubic" => params.push(float(
            "cubic_coeff_a",
            f64::from(n.float_or("cubic_coeff_a", -0.75)?),
        )),
        _ => {}
    }
    if !legacy {
        let antialias = n.int_or("antialias", 0)?;
        if antialias != 0 {
            if opset < 18 || mode == "nearest" {
                return Err(n.unsupported(
                    "antialias",
                    antialias,
                    "opset 18+, modes linear and cubic",
                ));
            }
            params.push(int("antialias", 1));
        }
        if n.int_or("exclude_outside", 0)? != 0 {
            params.push(int("exclude_outside", 1));
        }
    }
    if coord == "tf_crop_and_resize" {
        let Some(r) = roi else {
            return Err(n.missing("roi"));
        };
        if r.len() != 2 * axes.len() {
            return Err(n.shape_err(format!(
                "roi has {} values for {} axes (start and end per axis)",
                r.len(),
                axes.len()
            )));
        }
        let mut full = vec![0.0f64; 2 * rank];
        full[rank..].fill(1.0);
        for (i, &a) in axes.iter().enumerate() {
            full[a] = f64::from(r[i]);
            full[rank + a] = f64::from(r[axes.len() + i]);
        }
        if full.iter().any(|v| !v.is_finite()) {
            return Err(n.unsupported("roi", format!("{r:?}"), "roi must be finite"));
        }
        params.push(("roi".into(), ParamValue::Floats(full)));
        params.push(float(
            "extrapolation_value",
            f64::from(n.float_or("extrapolation_value", 0.0)?),
        ));
    }
    if let Some(sc) = full_scales {
        params.push(("scales".into(), ParamValue::Floats(sc)));
    }
    if let Some(sz) = full_sizes {
        params.push(("sizes".into(), ParamValue::Ints(sz)));
    }
    let out = n.output(0).unwrap_or_default();
    ctx.emit(Op::Resize, &[x.v], params, out, out_shape);
    Ok(())
}
