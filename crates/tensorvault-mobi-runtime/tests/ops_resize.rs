//! Resize against the ONNX backend test expectations (values computed by onnx 1.23's
//! reference implementation, `onnx.reference.ReferenceEvaluator`, for the same inputs
//! as its node tests) and the kernel's own rules: identity axes, empty outputs, limits.

mod common;

use common::*;
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::RuntimeError;

fn s(v: &str) -> P {
    P::Str(v.into())
}

fn floats(v: &[f64]) -> P {
    P::Floats(v.to_vec())
}

fn iota(n: usize) -> Vec<f32> {
    (1..=n).map(|v| v as f32).collect()
}

fn resize(shape: &[usize], x: &[f32], params: Vec<(&str, P)>) -> (Vec<usize>, Vec<f32>) {
    let t = run(Op::Resize, vec![input(shape, x)], params).unwrap();
    (t.shape.clone(), t.as_f32().unwrap().to_vec())
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "element {i}: {g} vs {w}\n{got:?}"
        );
    }
}

#[test]
fn nearest_upsample_and_downsample() {
    // resize_upsample_scales_nearest: [[1,2],[3,4]] x [1,1,2,3].
    let (shape, y) = resize(
        &[1, 1, 2, 2],
        &iota(4),
        vec![("scales", floats(&[1.0, 1.0, 2.0, 3.0]))],
    );
    assert_eq!(shape, [1, 1, 4, 6]);
    let row = |a: f32, b: f32| [a, a, a, b, b, b];
    let want: Vec<f32> = [row(1., 2.), row(1., 2.), row(3., 4.), row(3., 4.)].concat();
    close(&y, &want);
    // resize_downsample_scales_nearest: 2x4 by 0.6 -> 1x2 = [1, 3].
    let (shape, y) = resize(
        &[1, 1, 2, 4],
        &iota(8),
        vec![("scales", floats(&[1.0, 1.0, 0.6, 0.6]))],
    );
    assert_eq!(shape, [1, 1, 1, 2]);
    close(&y, &[1.0, 3.0]);
    // resize_upsample_sizes_nearest_ceil_half_pixel, first row of 8.
    let (_, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![("sizes", ints(&[1, 1, 8, 8])), ("nearest_mode", s("ceil"))],
    );
    close(&y[..8], &[1., 2., 2., 3., 3., 4., 4., 4.]);
    // floor + align_corners, first row.
    let (_, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("sizes", ints(&[1, 1, 8, 8])),
            ("nearest_mode", s("floor")),
            ("coordinate_transformation_mode", s("align_corners")),
        ],
    );
    close(&y[..8], &[1., 1., 1., 2., 2., 3., 3., 4.]);
}

#[test]
fn linear_modes() {
    // resize_upsample_scales_linear (half_pixel): first row of 4x4.
    let (shape, y) = resize(
        &[1, 1, 2, 2],
        &iota(4),
        vec![
            ("mode", s("linear")),
            ("scales", floats(&[1.0, 1.0, 2.0, 2.0])),
        ],
    );
    assert_eq!(shape, [1, 1, 4, 4]);
    close(
        &y,
        &[
            1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0,
        ],
    );
    // align_corners.
    let (_, y) = resize(
        &[1, 1, 2, 2],
        &iota(4),
        vec![
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("align_corners")),
            ("scales", floats(&[1.0, 1.0, 2.0, 2.0])),
        ],
    );
    close(&y[..4], &[1.0, 1.333_333_3, 1.666_666_7, 2.0]);
    // resize_downsample_scales_linear: [[2.6666665, 4.3333331]].
    let (_, y) = resize(
        &[1, 1, 2, 4],
        &iota(8),
        vec![
            ("mode", s("linear")),
            ("scales", floats(&[1.0, 1.0, 0.6, 0.6])),
        ],
    );
    close(&y, &[2.666_666_5, 4.333_333]);
    // resize_downsample_sizes_linear_pytorch_half_pixel: 4x4 -> 3x1.
    let (shape, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("pytorch_half_pixel")),
            ("sizes", ints(&[1, 1, 3, 1])),
        ],
    );
    assert_eq!(shape, [1, 1, 3, 1]);
    close(&y, &[1.666_666_7, 7.0, 12.333_333]);
}

#[test]
fn cubic_and_antialias() {
    // resize_downsample_scales_cubic (A = -0.75, half_pixel), 4x4 -> 3x3.
    let (shape, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("mode", s("cubic")),
            ("scales", floats(&[1.0, 1.0, 0.8, 0.8])),
        ],
    );
    assert_eq!(shape, [1, 1, 3, 3]);
    close(
        &y,
        &[
            1.471_191_4,
            2.781_25,
            4.082_519_5,
            6.711_426,
            8.021_484,
            9.322_754,
            11.916_504,
            13.226_563,
            14.527_831,
        ],
    );
    // resize_downsample_scales_cubic_A_n0p5_exclude_outside.
    let (_, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("mode", s("cubic")),
            ("cubic_coeff_a", P::Float(-0.5)),
            ("exclude_outside", P::Int(1)),
            ("scales", floats(&[1.0, 1.0, 0.8, 0.8])),
        ],
    );
    close(
        &y,
        &[
            1.368_126_7,
            2.669_501_3,
            4.013_336_7,
            6.573_625_6,
            7.875,
            9.218_835,
            11.948_966,
            13.250_341,
            14.594_176,
        ],
    );
    // resize_downsample_scales_linear_antialias: 4x4 by 0.6 -> 2x2.
    let (_, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("mode", s("linear")),
            ("antialias", P::Int(1)),
            ("scales", floats(&[1.0, 1.0, 0.6, 0.6])),
        ],
    );
    close(&y, &[2.875, 4.5, 9.375, 11.0]);
}

#[test]
fn tf_crop_and_resize_extrapolates() {
    // resize_tf_crop_and_resize_extrapolation_value: roi [0.4, 0.6, 0.6, 0.8] on the
    // spatial axes, 3x3 output; the last column and last row fall outside.
    let (shape, y) = resize(
        &[1, 1, 4, 4],
        &iota(16),
        vec![
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("tf_crop_and_resize")),
            ("roi", floats(&[0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 1.2, 1.7])),
            ("extrapolation_value", P::Float(10.0)),
            ("sizes", ints(&[1, 1, 3, 3])),
        ],
    );
    assert_eq!(shape, [1, 1, 3, 3]);
    close(&y, &[7.6, 10.0, 10.0, 12.4, 10.0, 10.0, 10.0, 10.0, 10.0]);
}

#[test]
fn identity_empty_and_bad_parameters() {
    // Every axis kept: a copy.
    let (shape, y) = resize(&[2, 3], &iota(6), vec![("scales", floats(&[1.0, 1.0]))]);
    assert_eq!(shape, [2, 3]);
    close(&y, &iota(6));
    // An axis resized to 0 elements.
    let (shape, y) = resize(&[2, 3], &iota(6), vec![("sizes", ints(&[0, 3]))]);
    assert_eq!((shape, y.len()), (vec![0, 3], 0));
    // scales of another rank than X.
    let e = run(
        Op::Resize,
        vec![input(&[2, 3], &iota(6))],
        vec![("scales", floats(&[2.0]))],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Param {
                key: "scales",
                value: 1,
                ..
            }
        ),
        "{e}"
    );
    // An antialiased kernel as wide as 1/scale: refused above 2^20 taps, never sized
    // from the file.
    let e = run(
        Op::Resize,
        vec![input(&[1, 4], &iota(4))],
        vec![
            ("mode", s("linear")),
            ("antialias", P::Int(1)),
            ("scales", floats(&[1.0, 1e-300])),
            ("sizes", ints(&[1, 1])),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Param { key: "scales", .. }),
        "{e}"
    );
    // Extreme coordinates (a scale near the smallest float, an infinite roi) clamp to
    // the edges.
    let (_, y) = resize(
        &[1, 4],
        &iota(4),
        vec![("scales", floats(&[1.0, 5e-324])), ("sizes", ints(&[1, 2]))],
    );
    assert_eq!(y, [4.0, 4.0]);
    let (_, y) = resize(
        &[1, 4],
        &iota(4),
        vec![
            ("mode", s("cubic")),
            ("coordinate_transformation_mode", s("tf_crop_and_resize")),
            ("roi", floats(&[0.0, f64::NEG_INFINITY, 1.0, f64::INFINITY])),
            ("extrapolation_value", P::Float(-1.0)),
            ("sizes", ints(&[1, 3])),
        ],
    );
    // inf - inf makes the coordinate NaN: read as 0 (the first element), never a panic.
    assert_eq!(y, [1.0, 1.0, 1.0]);
    // An output over the element limit is refused before it is allocated.
    let e = run(
        Op::Resize,
        vec![input(&[1, 1], &[1.0])],
        vec![("scales", floats(&[1e12, 1e12]))],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::TooLarge { .. }), "{e}");
}
