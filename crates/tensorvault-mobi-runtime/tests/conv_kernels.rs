//! The convolution kernel paths (depthwise with a multiplier, 1x1 direct sgemm, im2col +
//! sgemm, grouped) against a naive direct convolution on random data, over strides,
//! dilations, asymmetric pads and batches > 1; MaxPool2D/AvgPool2D against a naive pool;
//! and activations fused into Conv2D, DepthwiseConv2D and FullyConnected against the
//! unfused operators.

mod common;

use common::*;
use proptest::prelude::*;
use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::{Session, Tensor};

/// Geometry of one convolution: input `[n, c, h, w]`, weights `[m, c/g, kh, kw]`,
/// strides, dilations, pads `[top, left, bottom, right]`, groups.
#[derive(Debug, Clone)]
struct Geo {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    kh: usize,
    kw: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 4],
    g: usize,
}

impl Geo {
    fn out(&self) -> (usize, usize) {
        let o = |i: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize| {
            (i + pb + pe - (d * (k - 1) + 1)) / s + 1
        };
        (
            o(self.h, self.kh, self.s[0], self.d[0], self.p[0], self.p[2]),
            o(self.w, self.kw, self.s[1], self.d[1], self.p[1], self.p[3]),
        )
    }

    fn fits(&self) -> bool {
        self.h + self.p[0] + self.p[2] > self.d[0] * (self.kh - 1)
            && self.w + self.p[1] + self.p[3] > self.d[1] * (self.kw - 1)
    }

    fn params(&self) -> Vec<(&'static str, P)> {
        let i = |v: usize| v as i64;
        vec![
            ("stride", ints(&[i(self.s[0]), i(self.s[1])])),
            ("dilation", ints(&[i(self.d[0]), i(self.d[1])])),
            (
                "padding",
                ints(&[i(self.p[0]), i(self.p[1]), i(self.p[2]), i(self.p[3])]),
            ),
        ]
    }
}

/// Naive direct convolution with bias.
fn naive(g: &Geo, x: &[f32], wt: &[f32], bias: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let (oh, ow) = g.out();
    let (cg, mg) = (g.c / g.g, g.m / g.g);
    let mut y = vec![0f32; g.n * g.m * oh * ow];
    for b in 0..g.n {
        for oc in 0..g.m {
            let gi = oc / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = f64::from(bias[oc]);
                    for ci in 0..cg {
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let iy = (oy * g.s[0] + ky * g.d[0]) as isize - g.p[0] as isize;
                                let ix = (ox * g.s[1] + kx * g.d[1]) as isize - g.p[1] as isize;
                                if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                    continue;
                                }
                                let xi = ((b * g.c + gi * cg + ci) * g.h + iy as usize) * g.w
                                    + ix as usize;
                                let wi = ((oc * cg + ci) * g.kh + ky) * g.kw + kx;
                                acc += f64::from(x[xi]) * f64::from(wt[wi]);
                            }
                        }
                    }
                    y[((b * g.m + oc) * oh + oy) * ow + ox] = acc as f32;
                }
            }
        }
    }
    (vec![g.n, g.m, oh, ow], y)
}

fn rnd(seed: u32, len: usize) -> Vec<f32> {
    let mut r = seed;
    (0..len)
        .map(|_| {
            r = r.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (r >> 8) as f32 / (1 << 24) as f32 - 0.5
        })
        .collect()
}

/// Run `g` as `op` (Conv2D with `group`, or DepthwiseConv2D) and compare with `naive`.
fn check(g: &Geo, op: Op, seed: u32) {
    let x = rnd(seed, g.n * g.c * g.h * g.w);
    let wt = rnd(seed ^ 0x55, g.m * (g.c / g.g) * g.kh * g.kw);
    let bias = rnd(seed ^ 0xaa, g.m);
    let (shape, want) = naive(g, &x, &wt, &bias);
    let mut params = g.params();
    if op == Op::Conv2D {
        params.push(("group", P::Int(g.g as i64)));
    }
    let wshape = [g.m, g.c / g.g, g.kh, g.kw].map(|v| v as u64);
    let y = run(
        op,
        vec![
            input(&[g.n, g.c, g.h, g.w], &x),
            konst(&wshape, &wt),
            konst(&[g.m as u64], &bias),
        ],
        params,
    )
    .unwrap();
    close(&y, &shape, &want, 1e-5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Depthwise (one input channel per group) with multiplier 1..3, both operator codes.
    #[test]
    fn depthwise_matches_naive(n in 1usize..3, c in 1usize..4, mult in 1usize..3, h in 1usize..9, w in 1usize..9,
                               kh in 1usize..6, kw in 1usize..6, s in prop::array::uniform2(1usize..4),
                               d in prop::array::uniform2(1usize..3), p in prop::array::uniform4(0usize..3),
                               as_conv in any::<bool>(), seed in any::<u32>()) {
        let g = Geo { n, c, h, w, m: c * mult, kh, kw, s, d, p, g: c };
        prop_assume!(g.fits());
        check(&g, if as_conv { Op::Conv2D } else { Op::DepthwiseConv2D }, seed);
    }

    /// Grouped and dense convolutions (im2col + sgemm, and the direct 1x1 path when the
    /// kernel is 1x1 without stride or pads).
    #[test]
    fn grouped_and_dense_match_naive(n in 1usize..3, cg in 2usize..4, groups in 1usize..3, mg in 1usize..4,
                                     h in 1usize..8, w in 1usize..8, kh in 1usize..4, kw in 1usize..4,
                                     s in prop::array::uniform2(1usize..3), d in prop::array::uniform2(1usize..3),
                                     p in prop::array::uniform4(0usize..2), seed in any::<u32>()) {
        let g = Geo { n, c: cg * groups, h, w, m: mg * groups, kh, kw, s, d, p, g: groups };
        prop_assume!(g.fits());
        check(&g, Op::Conv2D, seed);
    }
}

#[test]
fn pointwise_1x1_batch_and_groups() {
    // The direct-sgemm path: 1x1, stride 1, no pads; batch 3, one and two groups.
    for groups in [1, 2] {
        let g = Geo {
            n: 3,
            c: 6,
            h: 5,
            w: 7,
            m: 4,
            kh: 1,
            kw: 1,
            s: [1, 1],
            d: [1, 1],
            p: [0; 4],
            g: groups,
        };
        check(&g, Op::Conv2D, 7 + groups as u32);
        // 1x1 with a stride or pads goes through im2col.
        check(
            &Geo {
                s: [2, 1],
                ..g.clone()
            },
            Op::Conv2D,
            9,
        );
        check(
            &Geo {
                p: [1, 0, 0, 2],
                ..g
            },
            Op::Conv2D,
            11,
        );
    }
}

#[test]
fn small_planes_at_batch_run_in_several_chunks() {
    // A 10x10 output plane (its last 16-column panel mostly padding) at batch 3 takes the
    // chunked path; 300 input channels x 3x3 make one image's column panels larger than
    // a chunk's budget (2^18 elements), so every image is its own chunk. Then 2 channels
    // (all three images in one chunk, columns of two images sharing a panel), strided
    // and padded.
    // Output planes: 10x10 both times.
    for (c, [h, w], s, p) in [
        (300, [12, 12], [1, 1], [0; 4]),
        (2, [18, 11], [2, 1], [1, 0, 2, 1]),
    ] {
        let g = Geo {
            n: 3,
            c,
            h,
            w,
            m: 5,
            kh: 3,
            kw: 3,
            s,
            d: [1, 1],
            p,
            g: 1,
        };
        check(&g, Op::Conv2D, 11);
    }
}

#[test]
fn many_output_channels_span_several_column_blocks() {
    // 1100 output channels: the sgemm runs in column blocks of 256 (65,536 output
    // elements per block, at least 256 columns), so a 17x17 plane takes two blocks; 1x1
    // and 3x3 paths (batch 1: larger batches of small planes take the whole-batch path).
    for (k, p) in [(1, [0; 4]), (3, [1, 1, 1, 1])] {
        let g = Geo {
            n: 1,
            c: 2,
            h: 17,
            w: 17,
            m: 1100,
            kh: k,
            kw: k,
            s: [1, 1],
            d: [1, 1],
            p,
            g: 1,
        };
        check(&g, Op::Conv2D, 5);
    }
}

#[test]
fn depthwise_efficientnet_shapes() {
    // 3x3 and 5x5, stride 1 and 2, TensorFlow SAME pads (asymmetric at stride 2).
    for (k, s, p) in [
        (3, 1, [1, 1, 1, 1]),
        (3, 2, [0, 0, 1, 1]),
        (5, 1, [2, 2, 2, 2]),
        (5, 2, [1, 1, 2, 2]),
    ] {
        let g = Geo {
            n: 2,
            c: 8,
            h: 14,
            w: 14,
            m: 8,
            kh: k,
            kw: k,
            s: [s, s],
            d: [1, 1],
            p,
            g: 8,
        };
        check(&g, Op::DepthwiseConv2D, k as u32 * 10 + s as u32);
    }
}

/// `op` (then Clip 0..6 or Relu), output only the activation (fused) or both (not fused).
fn op_then_act(op: Op, act: Op, both_outputs: bool) -> Vec<Tensor> {
    let mut b = ModelBuilder::new("fused");
    let (x, w, bias, params) = if op == Op::FullyConnected {
        let x = b.input("x", DataType::F32, &[3, 5]);
        let w = b.constant_f32(&[4, 5], &rnd(1, 20)).unwrap();
        (x, w, b.constant_f32(&[4], &rnd(2, 4)).unwrap(), vec![])
    } else {
        let x = b.input("x", DataType::F32, &[2, 3, 6, 6]);
        let cg = if op == Op::DepthwiseConv2D { 1 } else { 3 };
        let w = b
            .constant_f32(&[6, cg, 3, 3], &rnd(1, 6 * cg as usize * 9))
            .unwrap();
        let pad = vec![("padding".to_string(), P::Ints(vec![1, 0, 0, 1]))];
        (x, w, b.constant_f32(&[6], &rnd(2, 6)).unwrap(), pad)
    };
    let y = b.op(op, &[x, w, bias], params);
    let act_params = match act {
        Op::Clip => vec![
            ("min".to_string(), P::Float(0.0)),
            ("max".to_string(), P::Float(0.25)),
        ],
        _ => vec![],
    };
    let z = b.op(act, &[y], act_params);
    b.output("z", DataType::F32, &[], z);
    if both_outputs {
        b.output("y", DataType::F32, &[], y);
    }
    let model = b.build().unwrap();
    let shape = if op == Op::FullyConnected {
        vec![3, 5]
    } else {
        vec![2, 3, 6, 6]
    };
    let n = shape.iter().product();
    let s = Session::new(&model).unwrap();
    let x = Tensor::f32(shape, rnd(3, n).iter().map(|v| v * 8.0).collect()).unwrap();
    s.run(&[("x", x)])
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect()
}

#[test]
fn fused_activations_match_unfused() {
    for op in [Op::Conv2D, Op::DepthwiseConv2D, Op::FullyConnected] {
        for act in [Op::Relu, Op::Clip] {
            let fused = op_then_act(op, act, false);
            let unfused = op_then_act(op, act, true);
            assert_eq!(fused.len(), 1);
            assert_eq!(
                unfused.len(),
                2,
                "the pre-activation value is an output too"
            );
            assert_eq!(fused[0], unfused[0], "{op:?} + {act:?}");
            let (z, y) = (fused[0].as_f32().unwrap(), unfused[1].as_f32().unwrap());
            // The activation did something: some values were clamped, some were not.
            assert!(y.iter().any(|&v| v < 0.0) && z.iter().all(|&v| v >= 0.0));
            assert!(z.iter().zip(y).any(|(a, b)| a == b && *a > 0.0));
            if act == Op::Clip {
                assert!(y.iter().any(|&v| v > 0.25) && z.iter().all(|&v| v <= 0.25));
            }
        }
    }
}

/// Naive MaxPool2D / AvgPool2D (ONNX semantics: NaN propagates through max, the average
/// divides by the taps inside the input, or inside the padded input with
/// `count_include_pad`).
fn naive_pool(
    g: &Geo,
    x: &[f32],
    max: bool,
    ceil: bool,
    include_pad: bool,
) -> (Vec<usize>, Vec<f32>) {
    let out = |i: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize| {
        let span = i + pb + pe - (d * (k - 1) + 1);
        let mut o = if ceil { span.div_ceil(s) } else { span / s } + 1;
        if ceil && (o - 1) * s >= i + pb {
            o -= 1;
        }
        o
    };
    let oh = out(g.h, g.kh, g.s[0], g.d[0], g.p[0], g.p[2]);
    let ow = out(g.w, g.kw, g.s[1], g.d[1], g.p[1], g.p[3]);
    let (ph, pw) = (g.h + g.p[0] + g.p[2], g.w + g.p[1] + g.p[3]);
    let mut y = Vec::new();
    for plane in 0..g.n * g.c {
        for oy in 0..oh {
            for ox in 0..ow {
                let (mut s, mut m, mut cnt, mut pcnt) = (0f32, f32::NEG_INFINITY, 0, 0);
                for ky in 0..g.kh {
                    for kx in 0..g.kw {
                        let (py, px) = (oy * g.s[0] + ky * g.d[0], ox * g.s[1] + kx * g.d[1]);
                        if py < ph && px < pw {
                            pcnt += 1;
                        }
                        let (iy, ix) =
                            (py as isize - g.p[0] as isize, px as isize - g.p[1] as isize);
                        if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w {
                            let v = x[(plane * g.h + iy as usize) * g.w + ix as usize];
                            s += v;
                            m = if m.is_nan() || v.is_nan() {
                                f32::NAN
                            } else {
                                m.max(v)
                            };
                            cnt += 1;
                        }
                    }
                }
                let d = if include_pad { pcnt } else { cnt };
                y.push(if max { m } else { s / d.max(1) as f32 });
            }
        }
    }
    (vec![g.n, g.c, oh, ow], y)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pools_match_naive(n in 1usize..3, c in 1usize..3, h in 1usize..9, w in 1usize..9, kh in 1usize..4, kw in 1usize..4,
                         s in prop::array::uniform2(1usize..4), d in prop::array::uniform2(1usize..3),
                         p in prop::array::uniform4(0usize..2), max in any::<bool>(), ceil in any::<bool>(),
                         include_pad in any::<bool>(), nan_at in prop::option::of(0usize..200), seed in any::<u32>()) {
        // Pads smaller than the kernel (a window entirely in the padding has no value).
        let p = [p[0].min(kh - 1), p[1].min(kw - 1), p[2].min(kh - 1), p[3].min(kw - 1)];
        let g = Geo { n, c, h, w, m: c, kh, kw, s, d, p, g: 1 };
        prop_assume!(g.fits());
        let mut x = rnd(seed, n * c * h * w);
        if let Some(i) = nan_at.filter(|&i| i < x.len()) {
            x[i] = f32::NAN;
        }
        let (shape, want) = naive_pool(&g, &x, max, ceil, include_pad);
        let mut params = g.params();
        params.push(("kernel", ints(&[kh as i64, kw as i64])));
        params.push(("ceil_mode", P::Int(i64::from(ceil))));
        if !max {
            params.push(("count_include_pad", P::Int(i64::from(include_pad))));
        }
        let y = run(if max { Op::MaxPool2D } else { Op::AvgPool2D }, vec![input(&[n, c, h, w], &x)], params).unwrap();
        close(&y, &shape, &want, 1e-6);
    }
}

#[test]
fn recycled_buffers_do_not_leak_between_runs() {
    // One session reuses the buffers of freed values and scratch across runs; runs of
    // different batch sizes and inputs must equal runs of fresh sessions.
    use tensorvault_formats::mobi::models;
    for (model, c, hw) in [
        (models::lenet5(3).unwrap(), 1, 28),
        (models::cifar10_cnn(3).unwrap(), 3, 32),
    ] {
        let shared = Session::new(&model).unwrap();
        for (i, batch) in [3usize, 1, 4, 1].into_iter().enumerate() {
            let n = batch * c * hw * hw;
            let x = Tensor::f32(vec![batch, c, hw, hw], rnd(i as u32, n)).unwrap();
            let fresh = Session::new(&model)
                .unwrap()
                .run(&[("image", x.clone())])
                .unwrap();
            let again = shared.run(&[("image", x)]).unwrap();
            assert_eq!(fresh, again, "run {i}, batch {batch}");
        }
    }
}

#[test]
fn max_pool_2x2_stride_2_fast_path() {
    // Even and odd sizes, floor and ceil mode (a partial last window leaves the fast
    // path), with a NaN in one window.
    for (h, w, ceil) in [(8, 6, false), (7, 5, false), (7, 5, true), (2, 2, false)] {
        let g = Geo {
            n: 2,
            c: 3,
            h,
            w,
            m: 3,
            kh: 2,
            kw: 2,
            s: [2, 2],
            d: [1, 1],
            p: [0; 4],
            g: 1,
        };
        let mut x = rnd(h as u32 * 31 + w as u32, 2 * 3 * h * w);
        x[w + 1] = f32::NAN;
        let (shape, want) = naive_pool(&g, &x, true, ceil, false);
        assert!(want[0].is_nan());
        let mut params = g.params();
        params.push(("kernel", ints(&[2, 2])));
        params.push(("ceil_mode", P::Int(i64::from(ceil))));
        let y = run(Op::MaxPool2D, vec![input(&[2, 3, h, w], &x)], params).unwrap();
        close(&y, &shape, &want, 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The 2x2 / stride 2 max pool (the vectorized path: 16 outputs per step, masked row
    /// ends) against the naive pool: planes up to 70 wide (several steps per row, odd
    /// widths and heights leave a last column or row out), NaN and -inf inputs.
    #[test]
    fn max_pool_2x2_vectorized_matches_naive(n in 1usize..3, c in 1usize..3, h in 2usize..12, w in 2usize..70,
                                             nans in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
                                             infs in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
                                             seed in any::<u32>()) {
        let g = Geo { n, c, h, w, m: c, kh: 2, kw: 2, s: [2, 2], d: [1, 1], p: [0; 4], g: 1 };
        let len = n * c * h * w;
        let mut x = rnd(seed, len);
        for i in &infs {
            x[i.index(len)] = f32::NEG_INFINITY;
        }
        for i in &nans {
            x[i.index(len)] = f32::NAN;
        }
        let (shape, want) = naive_pool(&g, &x, true, false, false);
        let mut params = g.params();
        params.push(("kernel", ints(&[2, 2])));
        let y = run(Op::MaxPool2D, vec![input(&[n, c, h, w], &x)], params).unwrap();
        prop_assert_eq!(&y.shape, &shape);
        let got = y.as_f32().unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            prop_assert!(a.is_nan() == b.is_nan() && (a.is_nan() || a == b), "output {}: {} vs {}", i, a, b);
        }
    }
}
