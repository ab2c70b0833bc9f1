//! 1-D Conv, MaxPool and AveragePool run as the 2-D MOBI operators on a unit height,
//! between two Reshapes, and compute what a naive 1-D reference computes; 3-D windows
//! and attributes of the wrong length are refused with typed errors.

mod common;

use common::*;
use tensorvault_formats::mobi::{Model, OperatorType as Op};
use tensorvault_mobi_runtime::{Session, Tensor};
use tensorvault_onnx::{import, ImportOptions, OnnxError};

/// Naive 1-D convolution `[N, C, L]` * `[M, C/group, K]` with begin/end pads.
#[allow(clippy::too_many_arguments)]
fn conv1d(
    x: &[f32],
    [n, c, l]: [usize; 3],
    w: &[f32],
    [m, cg, k]: [usize; 3],
    b: &[f32],
    stride: usize,
    dil: usize,
    [pb, pe]: [usize; 2],
) -> (Vec<f32>, [usize; 3]) {
    let group = c / cg;
    let eff = (k - 1) * dil + 1;
    let ol = (l + pb + pe - eff) / stride + 1;
    let mut y = vec![0f32; n * m * ol];
    for ni in 0..n {
        for mi in 0..m {
            let g = mi / (m / group);
            for o in 0..ol {
                let mut acc = b[mi];
                for ci in 0..cg {
                    for ki in 0..k {
                        let i = (o * stride + ki * dil) as isize - pb as isize;
                        if i < 0 || i >= l as isize {
                            continue;
                        }
                        let xc = g * cg + ci;
                        acc += x[(ni * c + xc) * l + i as usize] * w[(mi * cg + ci) * k + ki];
                    }
                }
                y[(ni * m + mi) * ol + o] = acc;
            }
        }
    }
    (y, [n, m, ol])
}

fn conv_model(
    x: [i64; 3],
    w: [i64; 3],
    attrs: Vec<tensorvault_onnx::proto::AttributeProto>,
    out: [i64; 3],
) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
    let wv = values((w[0] * w[1] * w[2]) as usize, 7);
    let bv = values(w[0] as usize, 9);
    let bytes = model(
        13,
        vec![node("Conv", "c", &["x", "w", "b"], &["y"], attrs)],
        vec![vi("x", FLOAT, &x)],
        vec![vi("y", FLOAT, &out)],
        vec![tf32("w", &w, &wv), tf32("b", &[w[0]], &bv)],
    );
    (bytes, wv, bv)
}

fn run(m: &Model, shape: [usize; 3], x: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let t = Tensor::f32(shape.to_vec(), x.to_vec()).unwrap();
    let y = Session::new(m).unwrap().run(&[("x", t)]).unwrap();
    let out = &y[0].1;
    (out.shape.clone(), out.as_f32().unwrap().to_vec())
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "value {i}: {g} != {w}"
        );
    }
}

/// One 1-D convolution: input and weight shapes, group, stride, dilation, pads.
struct Case1d {
    xs: [usize; 3],
    ws: [usize; 3],
    group: usize,
    stride: usize,
    dil: usize,
    pads: [usize; 2],
}

#[test]
fn conv_1d_with_stride_pads_dilation_and_groups_matches_the_naive_reference() {
    // Plain, strided + padded, dilated, grouped, depthwise (group = channels).
    let cases = [
        Case1d {
            xs: [2, 4, 10],
            ws: [3, 4, 3],
            group: 1,
            stride: 1,
            dil: 1,
            pads: [0, 0],
        },
        Case1d {
            xs: [2, 4, 10],
            ws: [3, 4, 3],
            group: 1,
            stride: 2,
            dil: 1,
            pads: [1, 2],
        },
        Case1d {
            xs: [1, 4, 11],
            ws: [2, 4, 3],
            group: 1,
            stride: 1,
            dil: 2,
            pads: [2, 2],
        },
        Case1d {
            xs: [2, 4, 6],
            ws: [6, 2, 3],
            group: 2,
            stride: 1,
            dil: 1,
            pads: [1, 1],
        },
        Case1d {
            xs: [1, 4, 9],
            ws: [8, 1, 5],
            group: 4,
            stride: 2,
            dil: 1,
            pads: [2, 2],
        },
    ];
    for case in cases {
        let Case1d {
            xs,
            ws,
            group,
            stride,
            dil,
            pads,
        } = case;
        let x = values(xs.iter().product(), 3);
        let mut attrs = vec![
            attr_ints("strides", &[stride as i64]),
            attr_ints("dilations", &[dil as i64]),
            attr_ints("pads", &[pads[0] as i64, pads[1] as i64]),
            attr_ints("kernel_shape", &[ws[2] as i64]),
        ];
        if group > 1 {
            attrs.push(attr_i("group", group as i64));
        }
        let as_i64 = |a: [usize; 3]| a.map(|v| v as i64);
        let probe_w = values(ws.iter().product(), 7);
        let probe_b = values(ws[0], 9);
        let (want, ys) = conv1d(&x, xs, &probe_w, ws, &probe_b, stride, dil, pads);
        let (bytes, wv, bv) = conv_model(as_i64(xs), as_i64(ws), attrs, as_i64(ys));
        assert_eq!((wv, bv), (probe_w, probe_b));
        let m = imp(&bytes);
        let conv = if group == xs[1] {
            Op::DepthwiseConv2D
        } else {
            Op::Conv2D
        };
        assert_eq!(
            ops(&m),
            vec![Op::Reshape, conv, Op::Reshape],
            "{xs:?} {ws:?}"
        );
        let (shape, got) = run(&m, xs, &x);
        assert_eq!(shape, ys.to_vec());
        assert_close(&got, &want);
    }
}

#[test]
fn conv_1d_same_upper_keeps_ceil_of_length_over_stride() {
    let xs = [1, 2, 9];
    let ws = [2, 2, 4];
    let x = values(18, 5);
    let (bytes, wv, bv) = conv_model(
        [1, 2, 9],
        [2, 2, 4],
        vec![attr_s("auto_pad", "SAME_UPPER"), attr_ints("strides", &[2])],
        [1, 2, 5],
    );
    // SAME_UPPER: output ceil(9 / 2) = 5, total padding (5 - 1) * 2 + 4 - 9 = 3: 1 begin, 2 end.
    let (want, ys) = conv1d(&x, xs, &wv, ws, &bv, 2, 1, [1, 2]);
    assert_eq!(ys, [1, 2, 5]);
    let (shape, got) = run(&imp(&bytes), xs, &x);
    assert_eq!(shape, ys.to_vec());
    assert_close(&got, &want);
}

fn pool_model(
    op: &str,
    x: [i64; 3],
    attrs: Vec<tensorvault_onnx::proto::AttributeProto>,
    out: [i64; 3],
) -> Vec<u8> {
    model(
        13,
        vec![node(op, "p", &["x"], &["y"], attrs)],
        vec![vi("x", FLOAT, &x)],
        vec![vi("y", FLOAT, &out)],
        vec![],
    )
}

#[test]
fn pools_1d_match_the_naive_reference() {
    let xs = [2, 3, 11];
    let x = values(66, 11);
    let (k, stride, pb, pe) = (3usize, 2usize, 1usize, 1usize);
    let ol = (11 + pb + pe - k) / stride + 1;
    let attrs = || {
        vec![
            attr_ints("kernel_shape", &[k as i64]),
            attr_ints("strides", &[stride as i64]),
            attr_ints("pads", &[pb as i64, pe as i64]),
        ]
    };
    let mut want_max = Vec::new();
    let mut want_avg = Vec::new();
    for row in x.chunks(11) {
        for o in 0..ol {
            let lo = (o * stride) as isize - pb as isize;
            let win: Vec<f32> = (lo..lo + k as isize)
                .filter(|i| (0..11).contains(i))
                .map(|i| row[i as usize])
                .collect();
            want_max.push(win.iter().copied().fold(f32::MIN, f32::max));
            // count_include_pad = 0: the mean of the values inside the input.
            want_avg.push(win.iter().sum::<f32>() / win.len() as f32);
        }
    }
    for (op, mobi, want) in [
        ("MaxPool", Op::MaxPool2D, &want_max),
        ("AveragePool", Op::AvgPool2D, &want_avg),
    ] {
        let m = imp(&pool_model(op, [2, 3, 11], attrs(), [2, 3, ol as i64]));
        assert_eq!(ops(&m), vec![Op::Reshape, mobi, Op::Reshape], "{op}");
        let (shape, got) = run(&m, xs, &x);
        assert_eq!(shape, vec![2, 3, ol]);
        assert_close(&got, want);
    }
}

#[test]
fn three_d_windows_and_wrong_length_attributes_are_refused() {
    let e = import(
        &model(
            13,
            vec![node("Conv", "c", &["x", "w"], &["y"], vec![])],
            vec![vi("x", FLOAT, &[1, 1, 3, 3, 3])],
            vec![vi("y", FLOAT, &[1, 1, 2, 2, 2])],
            vec![tf32("w", &[1, 1, 2, 2, 2], &[1.0; 8])],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, OnnxError::Shape { .. }) && e.to_string().contains("1-D and 2-D"),
        "{e}"
    );
    // A 1-D conv given 2-D pads, and a 1-D pool given a 2-D kernel.
    let (bytes, _, _) = conv_model(
        [1, 2, 8],
        [2, 2, 3],
        vec![attr_ints("pads", &[1, 1, 1, 1])],
        [1, 2, 6],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(e, OnnxError::UnsupportedAttribute { .. }) && e.to_string().contains("pads"),
        "{e}"
    );
    let e = import(
        &pool_model(
            "MaxPool",
            [1, 2, 8],
            vec![attr_ints("kernel_shape", &[2, 2])],
            [1, 2, 7],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, OnnxError::UnsupportedAttribute { .. })
            && e.to_string().contains("kernel_shape"),
        "{e}"
    );
    // A rank-4 weight for a 1-D input.
    let e = import(
        &model(
            13,
            vec![node("Conv", "c", &["x", "w"], &["y"], vec![])],
            vec![vi("x", FLOAT, &[1, 1, 8])],
            vec![vi("y", FLOAT, &[1, 1, 7])],
            vec![tf32("w", &[1, 1, 1, 2], &[1.0; 2])],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, OnnxError::Shape { .. }), "{e}");
}
