//! Per-operator numeric tests against hand-computed expectations (and, for conv and
//! gemm, against a naive reference on random data).

mod common;

use common::*;
use proptest::prelude::*;
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::{RuntimeError, Tensor};

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[test]
fn conv2d_padding_stride_bias() {
    // 1x1x3x3 input 0..9, one 2x2 kernel of ones, padding [1,1,0,0] (top, left), stride 2.
    let y = run(
        Op::Conv2D,
        vec![
            input(&[1, 1, 3, 3], &iota(9)),
            konst(&[1, 1, 2, 2], &[1.0; 4]),
            konst(&[1], &[0.5]),
        ],
        vec![("stride", ints(&[2, 2])), ("padding", ints(&[1, 1, 0, 0]))],
    )
    .unwrap();
    // Windows (top-left in padded coords): (0,0): x[0,0]=0; (0,2): x[0,1]+x[0,2]=3;
    // (2,0): x[1,0]+x[2,0]=3+6=9; (2,2): 4+5+7+8=24.
    close(&y, &[1, 1, 2, 2], &[0.5, 3.5, 9.5, 24.5], 0.0);
}

#[test]
fn conv2d_dilation_and_groups() {
    // Two channels, group 2: each output channel sees its own input channel.
    let x: Vec<f32> = iota(18);
    let w = [1.0, 0.0, 0.0, -1.0, 2.0, 0.0, 0.0, 0.0]; // [2,1,2,2]
    let y = run(
        Op::Conv2D,
        vec![input(&[1, 2, 3, 3], &x), konst(&[2, 1, 2, 2], &w)],
        vec![("group", P::Int(2)), ("dilation", ints(&[2, 2]))],
    )
    .unwrap();
    // Dilation 2 on 3x3 with 2x2 kernel: one output, taps (0,0),(0,2),(2,0),(2,2).
    // ch0: x0 - x8 = -8; ch1: 2*x9 = 18.
    close(&y, &[1, 2, 1, 1], &[-8.0, 18.0], 0.0);
}

/// Naive direct convolution, the reference for im2col + sgemm.
#[allow(clippy::too_many_arguments, reason = "geometry")]
fn naive_conv(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    wt: &[f32],
    [m, cg, kh, kw]: [usize; 4],
    s: usize,
    p: usize,
    g: usize,
) -> (Vec<usize>, Vec<f32>) {
    let ho = (h + 2 * p - kh) / s + 1;
    let wo = (w + 2 * p - kw) / s + 1;
    let mut y = vec![0f32; n * m * ho * wo];
    for b in 0..n {
        for oc in 0..m {
            let gi = oc / (m / g);
            for oy in 0..ho {
                for ox in 0..wo {
                    let mut acc = 0f32;
                    for ci in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (iy, ix) = (
                                    (oy * s + ky) as isize - p as isize,
                                    (ox * s + kx) as isize - p as isize,
                                );
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xi =
                                    ((b * c + gi * cg + ci) * h + iy as usize) * w + ix as usize;
                                acc += x[xi] * wt[((oc * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y[((b * m + oc) * ho + oy) * wo + ox] = acc;
                }
            }
        }
    }
    (vec![n, m, ho, wo], y)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn conv2d_matches_naive(n in 1usize..3, cg in 1usize..3, g in 1usize..3, mg in 1usize..3, h in 3usize..7, k in 1usize..4, s in 1usize..3, p in 0usize..2, seed in any::<u32>()) {
        let (c, m) = (cg * g, mg * g);
        let w = h + 1;
        let mut r = seed;
        let mut rnd = |len: usize| (0..len).map(|_| { r = r.wrapping_mul(1_664_525).wrapping_add(1_013_904_223); (r >> 8) as f32 / (1 << 24) as f32 - 0.5 }).collect::<Vec<f32>>();
        let x = rnd(n * c * h * w);
        let wt = rnd(m * cg * k * k);
        let (shape, want) = naive_conv(&x, [n, c, h, w], &wt, [m, cg, k, k], s, p, g);
        let pi = p as i64;
        let y = run(Op::Conv2D, vec![input(&[n, c, h, w], &x), konst(&[m as u64, cg as u64, k as u64, k as u64], &wt)],
            vec![("stride", ints(&[s as i64, s as i64])), ("padding", ints(&[pi, pi, pi, pi])), ("group", P::Int(g as i64))]).unwrap();
        close(&y, &shape, &want, 1e-5);
    }
}

#[test]
fn depthwise_with_multiplier() {
    // C = 2, m = 2: output channel k reads input channel k / 2.
    let y = run(
        Op::DepthwiseConv2D,
        vec![
            input(&[1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]),
            konst(&[4, 1, 1, 1], &[1.0, 10.0, 100.0, 1000.0]),
            konst(&[4], &[0.0, 0.0, 0.0, 1.0]),
        ],
        vec![],
    )
    .unwrap();
    close(
        &y,
        &[1, 4, 1, 2],
        &[1.0, 2.0, 10.0, 20.0, 300.0, 400.0, 3001.0, 4001.0],
        0.0,
    );
}

#[test]
fn fully_connected_and_matmul() {
    let y = run(
        Op::FullyConnected,
        vec![
            input(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            konst(&[2, 3], &[1.0, 0.0, -1.0, 0.5, 0.5, 0.5]),
            konst(&[2], &[10.0, 0.0]),
        ],
        vec![],
    )
    .unwrap();
    close(&y, &[2, 2], &[8.0, 3.0, 8.0, 7.5], 0.0);
    // Batched matmul with broadcasting: [2,1,2] x [2,1] -> [2,1,1]; rank-1 operands.
    let y = run(
        Op::MatMul,
        vec![
            input(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]),
            input(&[2, 1], &[10.0, 1.0]),
        ],
        vec![],
    )
    .unwrap();
    close(&y, &[2, 1, 1], &[12.0, 34.0], 0.0);
    let y = run(
        Op::MatMul,
        vec![input(&[2], &[1.0, 2.0]), input(&[2, 3], &iota(6))],
        vec![],
    )
    .unwrap();
    close(&y, &[3], &[6.0, 9.0, 12.0], 0.0);
    let e = run(
        Op::MatMul,
        vec![input(&[2, 3], &iota(6)), input(&[2, 3], &iota(6))],
        vec![],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Shape {
                index: 0,
                op: "MatMul",
                value: 1,
                rule: "inner dimensions differ",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn pools_ceil_mode_and_count_include_pad() {
    let x = iota(16); // 1x1x4x4
    let y = run(
        Op::MaxPool2D,
        vec![input(&[1, 1, 4, 4], &x)],
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[2, 2])),
            ("ceil_mode", P::Int(1)),
        ],
    )
    .unwrap();
    // ceil((4-3)/2)+1 = 2 per axis; the last window is clipped.
    close(&y, &[1, 1, 2, 2], &[10.0, 11.0, 14.0, 15.0], 0.0);
    let y = run(
        Op::MaxPool2D,
        vec![input(&[1, 1, 4, 4], &x)],
        vec![("kernel", ints(&[3, 3])), ("stride", ints(&[2, 2]))],
    )
    .unwrap();
    close(&y, &[1, 1, 1, 1], &[10.0], 0.0);
    let args = || vec![input(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0])];
    let pk = || {
        vec![
            ("kernel", ints(&[2, 2])),
            ("padding", ints(&[1, 1, 1, 1])),
            ("stride", ints(&[2, 2])),
        ]
    };
    let y = run(Op::AvgPool2D, args(), pk()).unwrap();
    close(&y, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0], 0.0);
    let mut p = pk();
    p.push(("count_include_pad", P::Int(1)));
    let y = run(Op::AvgPool2D, args(), p).unwrap();
    close(&y, &[1, 1, 2, 2], &[0.25, 0.5, 0.75, 1.0], 0.0);
    let y = run(
        Op::GlobalAveragePool,
        vec![input(&[1, 2, 1, 2], &[1.0, 3.0, 5.0, 9.0])],
        vec![],
    )
    .unwrap();
    close(&y, &[1, 2, 1, 1], &[2.0, 7.0], 0.0);
    let y = run(
        Op::GlobalMaxPool,
        vec![input(&[1, 2, 1, 2], &[1.0, 3.0, 5.0, 9.0])],
        vec![],
    )
    .unwrap();
    close(&y, &[1, 2, 1, 1], &[3.0, 9.0], 0.0);
}

#[test]
fn unary_functions() {
    let x = [-2.0f32, -0.5, 0.0, 0.5, 3.0, 7.0];
    type Case = (Op, Vec<(&'static str, P)>, Vec<f32>);
    let cases: Vec<Case> = vec![
        (Op::Relu, vec![], vec![0.0, 0.0, 0.0, 0.5, 3.0, 7.0]),
        (
            Op::Clip,
            vec![("min", P::Float(0.0)), ("max", P::Float(6.0))],
            vec![0.0, 0.0, 0.0, 0.5, 3.0, 6.0],
        ),
        (
            Op::LeakyRelu,
            vec![("alpha", P::Float(0.1))],
            vec![-0.2, -0.05, 0.0, 0.5, 3.0, 7.0],
        ),
        (Op::HardSigmoid, vec![], vec![0.1, 0.4, 0.5, 0.6, 1.0, 1.0]),
        (
            Op::HardSwish,
            vec![],
            vec![
                -2.0 * (1.0 / 6.0),
                -0.5 * (5.0 / 12.0),
                0.0,
                0.5 * (7.0 / 12.0),
                3.0,
                7.0,
            ],
        ),
        (Op::Abs, vec![], vec![2.0, 0.5, 0.0, 0.5, 3.0, 7.0]),
        (Op::Neg, vec![], vec![2.0, 0.5, -0.0, -0.5, -3.0, -7.0]),
        (Op::Floor, vec![], vec![-2.0, -1.0, 0.0, 0.0, 3.0, 7.0]),
        (Op::Ceil, vec![], vec![-2.0, -0.0, 0.0, 1.0, 3.0, 7.0]),
        (Op::Round, vec![], vec![-2.0, -0.0, 0.0, 0.0, 3.0, 7.0]),
        (Op::Sign, vec![], vec![-1.0, -1.0, 0.0, 1.0, 1.0, 1.0]),
        (
            Op::ThresholdedRelu,
            vec![("alpha", P::Float(1.0))],
            vec![0.0, 0.0, 0.0, 0.0, 3.0, 7.0],
        ),
        (
            Op::Shrink,
            vec![("lambd", P::Float(1.0)), ("bias", P::Float(0.5))],
            vec![-1.5, 0.0, 0.0, 0.0, 2.5, 6.5],
        ),
        (
            Op::Softsign,
            vec![],
            vec![-2.0 / 3.0, -0.5 / 1.5, 0.0, 0.5 / 1.5, 0.75, 7.0 / 8.0],
        ),
        (
            Op::Elu,
            vec![],
            x.iter()
                .map(|&v| if v < 0.0 { v.exp() - 1.0 } else { v })
                .collect(),
        ),
        (
            Op::Sigmoid,
            vec![],
            x.iter().map(|&v| 1.0 / (1.0 + (-v).exp())).collect(),
        ),
        (
            Op::Softplus,
            vec![],
            x.iter().map(|&v| (1.0 + v.exp()).ln()).collect(),
        ),
        (Op::Exp, vec![], x.iter().map(|&v| v.exp()).collect()),
        (Op::Sin, vec![], x.iter().map(|&v| v.sin()).collect()),
        (Op::Identity, vec![], x.to_vec()),
    ];
    for (op, params, want) in cases {
        let y = run(op, vec![input(&[2, 3], &x)], params).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        close(&y, &[2, 3], &want, 1e-6);
    }
    // erf and gelu against reference values.
    let y = run(Op::Erf, vec![input(&[3], &[0.5, 1.0, -2.0])], vec![]).unwrap();
    close(&y, &[3], &[0.520_499_9, 0.842_700_8, -0.995_322_3], 1e-6);
    let y = run(Op::Gelu, vec![input(&[2], &[1.0, -1.0])], vec![]).unwrap();
    close(&y, &[2], &[0.841_344_7, -0.158_655_3], 1e-6);
    let y = run(
        Op::Gelu,
        vec![input(&[1], &[1.0])],
        vec![("approximate", P::Str("tanh".into()))],
    )
    .unwrap();
    close(&y, &[1], &[0.841_192], 1e-5);
    // NaN propagates.
    let y = run(Op::Relu, vec![input(&[1], &[f32::NAN])], vec![]).unwrap();
    assert!(y.as_f32().unwrap()[0].is_nan());
}

#[test]
fn broadcasting_binary_and_variadic() {
    let y = run(
        Op::Add,
        vec![
            input(&[2, 1], &[1.0, 2.0]),
            input(&[3], &[10.0, 20.0, 30.0]),
        ],
        vec![],
    )
    .unwrap();
    close(&y, &[2, 3], &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0], 0.0);
    let y = run(
        Op::Divide,
        vec![input(&[2], &[1.0, -1.0]), konst(&[1], &[0.0])],
        vec![],
    )
    .unwrap();
    close(&y, &[2], &[f32::INFINITY, f32::NEG_INFINITY], 0.0);
    let y = run(
        Op::Pow,
        vec![input(&[3], &[2.0, 3.0, 4.0]), konst(&[], &[2.0])],
        vec![],
    )
    .unwrap();
    close(&y, &[3], &[4.0, 9.0, 16.0], 0.0);
    let y = run(
        Op::PRelu,
        vec![
            input(&[1, 2, 2], &[-1.0, 1.0, -2.0, 2.0]),
            konst(&[2, 1], &[0.5, 0.25]),
        ],
        vec![],
    )
    .unwrap();
    close(&y, &[1, 2, 2], &[-0.5, 1.0, -0.5, 2.0], 0.0);
    let args = || {
        vec![
            input(&[2], &[1.0, 5.0]),
            input(&[1], &[3.0]),
            input(&[2, 1], &[0.0, 10.0]),
        ]
    };
    close(
        &run(Op::Sum, args(), vec![]).unwrap(),
        &[2, 2],
        &[4.0, 8.0, 14.0, 18.0],
        0.0,
    );
    close(
        &run(Op::Mean, args(), vec![]).unwrap(),
        &[2, 2],
        &[4.0 / 3.0, 8.0 / 3.0, 14.0 / 3.0, 6.0],
        1e-6,
    );
    close(
        &run(Op::Max, args(), vec![]).unwrap(),
        &[2, 2],
        &[3.0, 5.0, 10.0, 10.0],
        0.0,
    );
    close(
        &run(Op::Min, args(), vec![]).unwrap(),
        &[2, 2],
        &[0.0, 0.0, 1.0, 3.0],
        0.0,
    );
    let e = run(
        Op::Add,
        vec![input(&[2], &[0.0; 2]), input(&[3], &[0.0; 3])],
        vec![],
    )
    .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Shape { index: 0, value: 1, ref shape, .. } if shape == &[3]),
        "{e}"
    );
}

#[test]
fn softmax_logsoftmax_norms() {
    let y = run(
        Op::Softmax,
        vec![input(&[2, 2], &[0.0, 0.0, 0.0, 2.0f32.ln()])],
        vec![("axis", P::Int(0))],
    )
    .unwrap();
    close(&y, &[2, 2], &[0.5, 1.0 / 3.0, 0.5, 2.0 / 3.0], 1e-6);
    let y = run(
        Op::Softmax,
        vec![input(&[2], &[0.0, 1.0])],
        vec![("beta", P::Float(2.0f64.ln()))],
    )
    .unwrap();
    close(&y, &[2], &[1.0 / 3.0, 2.0 / 3.0], 1e-6);
    let y = run(Op::LogSoftmax, vec![input(&[2], &[1.0, 1.0])], vec![]).unwrap();
    close(&y, &[2], &[-(2.0f32.ln()); 2], 1e-6);
    let y = run(
        Op::BatchNorm,
        vec![
            input(&[1, 2, 1, 1], &[3.0, 3.0]),
            konst(&[2], &[2.0, 1.0]),
            konst(&[2], &[1.0, 0.0]),
            konst(&[2], &[1.0, 3.0]),
            konst(&[2], &[4.0, 1.0]),
        ],
        vec![("epsilon", P::Float(0.0001))],
    )
    .unwrap();
    close(
        &y,
        &[1, 2, 1, 1],
        &[2.0 * 2.0 / 4.0001f32.sqrt() + 1.0, 0.0],
        1e-6,
    );
    let y = run(
        Op::LayerNorm,
        vec![
            input(&[2, 2], &[1.0, 3.0, 0.0, 0.0]),
            konst(&[2], &[1.0, 2.0]),
            konst(&[2], &[0.0, 1.0]),
        ],
        vec![("epsilon", P::Float(1e-12))],
    )
    .unwrap();
    close(&y, &[2, 2], &[-1.0, 3.0, 0.0, 1.0], 1e-5);
}

#[test]
fn reductions() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let r = |op: Op, p: Vec<(&str, P)>| run(op, vec![input(&[2, 3], &x)], p).unwrap();
    close(
        &r(Op::ReduceSum, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[6.0, 15.0],
        0.0,
    );
    close(
        &r(
            Op::ReduceMean,
            vec![("axes", ints(&[0])), ("keepdims", P::Int(0))],
        ),
        &[3],
        &[2.5, 3.5, 4.5],
        0.0,
    );
    close(&r(Op::ReduceMax, vec![]), &[1, 1], &[6.0], 0.0);
    close(
        &r(
            Op::ReduceMin,
            vec![("axes", ints(&[-1])), ("keepdims", P::Int(0))],
        ),
        &[2],
        &[1.0, 4.0],
        0.0,
    );
    close(
        &r(Op::ReduceProd, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[6.0, 120.0],
        0.0,
    );
    close(
        &r(Op::ReduceL1, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[6.0, 15.0],
        0.0,
    );
    close(
        &r(Op::ReduceL2, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[14f32.sqrt(), 77f32.sqrt()],
        1e-6,
    );
    close(
        &r(Op::ReduceSumSquare, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[14.0, 77.0],
        0.0,
    );
    close(
        &r(Op::ReduceLogSum, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[6f32.ln(), 15f32.ln()],
        1e-6,
    );
    let lse = |a: f32, b: f32, c: f32| (a.exp() + b.exp() + c.exp()).ln();
    close(
        &r(Op::ReduceLogSumExp, vec![("axes", ints(&[1]))]),
        &[2, 1],
        &[lse(1.0, 2.0, 3.0), lse(4.0, 5.0, 6.0)],
        1e-6,
    );
    close(
        &r(Op::ReduceSum, vec![("noop_with_empty_axes", P::Int(1))]),
        &[2, 3],
        &x,
        0.0,
    );
    let e = run(
        Op::ReduceSum,
        vec![input(&[2, 3], &x)],
        vec![("axes", ints(&[2]))],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Param {
                index: 0,
                key: "axes",
                value: 2,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn shapes_and_movement() {
    let x = iota(6);
    let r = |op: Op, p: Vec<(&str, P)>| run(op, vec![input(&[2, 3], &x)], p).unwrap();
    close(
        &r(Op::Transpose, vec![]),
        &[3, 2],
        &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
        0.0,
    );
    close(
        &r(Op::Reshape, vec![("shape", ints(&[3, -1]))]),
        &[3, 2],
        &x,
        0.0,
    );
    close(
        &r(Op::Reshape, vec![("shape", ints(&[0, 3]))]),
        &[2, 3],
        &x,
        0.0,
    );
    close(&r(Op::Flatten, vec![("axis", P::Int(0))]), &[1, 6], &x, 0.0);
    close(
        &r(Op::Unsqueeze, vec![("axes", ints(&[0, -1]))]),
        &[1, 2, 3, 1],
        &x,
        0.0,
    );
    // Slice with a negative step, clamped ends (ONNX).
    close(
        &r(
            Op::Slice,
            vec![
                ("starts", ints(&[-1])),
                ("ends", ints(&[i64::MIN])),
                ("axes", ints(&[1])),
                ("steps", ints(&[-2])),
            ],
        ),
        &[2, 2],
        &[2.0, 0.0, 5.0, 3.0],
        0.0,
    );
    close(
        &r(
            Op::Slice,
            vec![("starts", ints(&[1, 1])), ("ends", ints(&[100, 1000]))],
        ),
        &[1, 2],
        &[4.0, 5.0],
        0.0,
    );
    close(
        &r(
            Op::Pad,
            vec![("pads", ints(&[0, 1, 0, 1])), ("value", P::Float(-1.0))],
        ),
        &[2, 5],
        &[-1.0, 0.0, 1.0, 2.0, -1.0, -1.0, 3.0, 4.0, 5.0, -1.0],
        0.0,
    );
    close(
        &r(
            Op::Pad,
            vec![
                ("pads", ints(&[0, 2, 0, 0])),
                ("mode", P::Str("reflect".into())),
            ],
        ),
        &[2, 5],
        &[2.0, 1.0, 0.0, 1.0, 2.0, 5.0, 4.0, 3.0, 4.0, 5.0],
        0.0,
    );
    close(
        &r(
            Op::Pad,
            vec![
                ("pads", ints(&[1, 0, 0, 0])),
                ("mode", P::Str("edge".into())),
            ],
        ),
        &[3, 3],
        &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        0.0,
    );
    close(
        &r(
            Op::Pad,
            vec![
                ("pads", ints(&[0, 1, 0, -1])),
                ("mode", P::Str("wrap".into())),
            ],
        ),
        &[2, 3],
        &[2.0, 0.0, 1.0, 5.0, 3.0, 4.0],
        0.0,
    );
    close(
        &r(Op::Tile, vec![("repeats", ints(&[1, 2]))]),
        &[2, 6],
        &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 4.0, 5.0],
        0.0,
    );
    close(
        &run(
            Op::Expand,
            vec![input(&[3, 1], &[1.0, 2.0, 3.0])],
            vec![("shape", ints(&[2, 1, 2]))],
        )
        .unwrap(),
        &[2, 3, 2],
        &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
        0.0,
    );
    close(
        &run(
            Op::Squeeze,
            vec![input(&[1, 3, 1], &[1.0, 2.0, 3.0])],
            vec![],
        )
        .unwrap(),
        &[3],
        &[1.0, 2.0, 3.0],
        0.0,
    );
    close(
        &run(
            Op::Concat,
            vec![input(&[2, 1], &[9.0, 8.0]), input(&[2, 3], &x)],
            vec![("axis", P::Int(1))],
        )
        .unwrap(),
        &[2, 4],
        &[9.0, 0.0, 1.0, 2.0, 8.0, 3.0, 4.0, 5.0],
        0.0,
    );
    let parts = run_n(Op::Split, vec![input(&[5], &iota(5))], vec![], 2).unwrap();
    close(&parts[0], &[3], &[0.0, 1.0, 2.0], 0.0);
    close(&parts[1], &[2], &[3.0, 4.0], 0.0);
    let parts = run_n(
        Op::Split,
        vec![input(&[2, 3], &x)],
        vec![("axis", P::Int(1)), ("split", ints(&[1, 2]))],
        2,
    )
    .unwrap();
    close(&parts[1], &[2, 2], &[1.0, 2.0, 4.0, 5.0], 0.0);
    // Gather: a scalar constant index removes the axis; a tensor of runtime indices.
    let y = run(
        Op::Gather,
        vec![input(&[2, 3], &x), Arg::ConstI64(vec![], vec![-1])],
        vec![("axis", P::Int(1))],
    )
    .unwrap();
    close(&y, &[2], &[2.0, 5.0], 0.0);
    let idx = Arg::In(Tensor::i64(vec![2, 1], vec![1, 0]).unwrap());
    let y = run(Op::Gather, vec![input(&[2, 3], &x), idx], vec![]).unwrap();
    close(&y, &[2, 1, 3], &[3.0, 4.0, 5.0, 0.0, 1.0, 2.0], 0.0);
    let e = run(
        Op::Gather,
        vec![input(&[2, 3], &x), Arg::ConstI64(vec![1], vec![2])],
        vec![],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Param {
                key: "indices",
                value: 2,
                ..
            }
        ),
        "{e}"
    );
    // Reshape from an i64 input.
    let shape = Arg::In(Tensor::i64(vec![1], vec![-1]).unwrap());
    close(
        &run(Op::Reshape, vec![input(&[2, 3], &x), shape], vec![]).unwrap(),
        &[6],
        &x,
        0.0,
    );
    let e = run(
        Op::Reshape,
        vec![input(&[2, 3], &x)],
        vec![("shape", ints(&[4, -1]))],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Param {
                key: "shape",
                value: -1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn every_operator_is_implemented() {
    // Each op with a minimal valid input runs without `Unsupported`.
    use tensorvault_formats::mobi::ops::{spec, InputKind, ParamDefault};
    for &op in tensorvault_formats::mobi::OperatorType::ALL {
        let s = spec(op);
        let mut args = Vec::new();
        for i in 0..usize::from(s.min_inputs) {
            args.push(match s.input(i).map(|p| p.kind) {
                Some(InputKind::Integer) => Arg::ConstI64(vec![1], vec![0]),
                Some(InputKind::Constant) => konst(&[1, 1, 1, 1], &[1.0]),
                _ => input(&[1, 1, 1, 1], &[0.5]),
            });
        }
        let mut params: Vec<(&str, P)> = Vec::new();
        for p in s.params {
            if p.default == ParamDefault::Required {
                params.push((
                    p.key,
                    match p.key {
                        "kernel" => ints(&[1, 1]),
                        "pads" => ints(&[0; 8]),
                        "axis" => P::Int(0),
                        "to" => P::Str("f32".into()),
                        _ => ints(&[0]),
                    },
                ));
            }
        }
        if matches!(op, Op::Reshape | Op::Expand) {
            params.push(("shape", ints(&[1, 1, 1, 1])));
        }
        if op == Op::Tile {
            params.push(("repeats", ints(&[1, 1, 1, 1])));
        }
        if op == Op::Slice {
            params = vec![("starts", ints(&[0])), ("ends", ints(&[1]))];
        }
        if op == Op::Resize {
            params = vec![("sizes", ints(&[1, 1, 2, 2]))];
        }
        if matches!(op, Op::FullyConnected) {
            args[1] = konst(&[1, 1], &[1.0]);
        }
        if op == Op::LayerNorm {
            args[1] = konst(&[1], &[1.0]);
        }
        if op == Op::BatchNorm {
            args = vec![
                input(&[1, 1, 1, 1], &[0.5]),
                konst(&[1], &[1.0]),
                konst(&[1], &[0.0]),
                konst(&[1], &[0.0]),
                konst(&[1], &[1.0]),
            ];
        }
        let r = run(op, args, params);
        assert!(r.is_ok(), "{op:?}: {:?}", r.err());
    }
}
