//! A 2x2 / stride 2 MaxPool2D fused into the Conv2D before it (and its Relu): against a
//! naive convolution, activation and pool on random data, and bit for bit against the
//! same graph run unfused (the pre-pool value also a graph output, so it is
//! materialized). Covers the three convolution paths the pool is fused into: 1x1 direct
//! gemm, im2col + gemm per image (grouped too), and the batched small-plane path (several
//! images per gemm, pooled as the planes are scattered); odd output sizes (the last row and
//! column are not pooled), NaN inputs, and a 1-pixel output the pool cannot take.

use proptest::prelude::*;
use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::{RuntimeError, Session, Tensor};

fn rnd(seed: u32, len: usize) -> Vec<f32> {
    let mut r = seed;
    (0..len)
        .map(|_| {
            r = r.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (r >> 8) as f32 / (1 << 24) as f32 - 0.5
        })
        .collect()
}

/// Input `[n, c, h, w]`, `m` output channels, a `k x k` kernel with pad `p` on every side,
/// `g` groups.
#[derive(Debug, Clone, Copy)]
struct Shape {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    k: usize,
    p: usize,
    g: usize,
}

impl Shape {
    fn out(&self) -> (usize, usize) {
        (
            self.h + 2 * self.p + 1 - self.k,
            self.w + 2 * self.p + 1 - self.k,
        )
    }
}

/// Conv2D (bias) -> Relu (when `relu`) -> MaxPool 2x2 / 2; outputs the pool, and also the
/// pre-pool value when `unfused`.
fn run(s: Shape, relu: bool, unfused: bool, x: &[f32]) -> Result<Vec<Tensor>, RuntimeError> {
    let mut b = ModelBuilder::new("conv-pool");
    let input = b.input(
        "x",
        DataType::F32,
        &[s.n as u64, s.c as u64, s.h as u64, s.w as u64],
    );
    let cg = s.c / s.g;
    let wt = rnd(7, s.m * cg * s.k * s.k);
    let w = b
        .constant_f32(&[s.m as u64, cg as u64, s.k as u64, s.k as u64], &wt)
        .unwrap();
    let bias = b.constant_f32(&[s.m as u64], &rnd(8, s.m)).unwrap();
    let p = s.p as i64;
    let mut y = b.op(
        Op::Conv2D,
        &[input, w, bias],
        vec![
            ("padding".into(), P::Ints(vec![p, p, p, p])),
            ("group".into(), P::Int(s.g as i64)),
        ],
    );
    if relu {
        y = b.op(Op::Relu, &[y], vec![]);
    }
    let z = b.op(
        Op::MaxPool2D,
        &[y],
        vec![
            ("kernel".into(), P::Ints(vec![2, 2])),
            ("stride".into(), P::Ints(vec![2, 2])),
        ],
    );
    b.output("z", DataType::F32, &[], z);
    if unfused {
        b.output("y", DataType::F32, &[], y);
    }
    let session = Session::new(&b.build().unwrap()).unwrap();
    let x = Tensor::f32(vec![s.n, s.c, s.h, s.w], x.to_vec()).unwrap();
    Ok(session
        .run(&[("x", x)])?
        .into_iter()
        .map(|(_, t)| t)
        .collect())
}

/// The naive result: convolution with bias, optional Relu, 2x2 / 2 max pool (NaN wins).
fn naive(s: Shape, relu: bool, x: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let (oh, ow) = s.out();
    let (cg, mg) = (s.c / s.g, s.m / s.g);
    let (wt, bias) = (rnd(7, s.m * cg * s.k * s.k), rnd(8, s.m));
    let conv = |b: usize, oc: usize, oy: usize, ox: usize| {
        let mut acc = f64::from(bias[oc]);
        for ci in 0..cg {
            for ky in 0..s.k {
                for kx in 0..s.k {
                    let (iy, ix) = (
                        (oy + ky) as isize - s.p as isize,
                        (ox + kx) as isize - s.p as isize,
                    );
                    if iy < 0 || ix < 0 || iy >= s.h as isize || ix >= s.w as isize {
                        continue;
                    }
                    let xi =
                        ((b * s.c + (oc / mg) * cg + ci) * s.h + iy as usize) * s.w + ix as usize;
                    acc += f64::from(x[xi]) * f64::from(wt[((oc * cg + ci) * s.k + ky) * s.k + kx]);
                }
            }
        }
        let v = acc as f32;
        if relu && v < 0.0 {
            0.0
        } else {
            v
        }
    };
    let (ph, pw) = (oh / 2, ow / 2);
    let mut out = Vec::new();
    for b in 0..s.n {
        for oc in 0..s.m {
            for py in 0..ph {
                for px in 0..pw {
                    let mut m = f32::NEG_INFINITY;
                    for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        let v = conv(b, oc, 2 * py + dy, 2 * px + dx);
                        m = if m.is_nan() || v.is_nan() {
                            f32::NAN
                        } else {
                            m.max(v)
                        };
                    }
                    out.push(m);
                }
            }
        }
    }
    (vec![s.n, s.m, ph, pw], out)
}

fn check(s: Shape, relu: bool, nan_at: Option<usize>, seed: u32) -> Result<(), TestCaseError> {
    let mut x = rnd(seed, s.n * s.c * s.h * s.w);
    if let Some(i) = nan_at {
        let len = x.len();
        x[i % len] = f32::NAN;
    }
    let fused = run(s, relu, false, &x).unwrap();
    let unfused = run(s, relu, true, &x).unwrap();
    prop_assert_eq!(fused.len(), 1);
    prop_assert_eq!(unfused.len(), 2);
    let (shape, want) = naive(s, relu, &x);
    prop_assert_eq!(&fused[0].shape, &shape);
    let (got, plain) = (fused[0].as_f32().unwrap(), unfused[0].as_f32().unwrap());
    for (i, ((&g, &u), &w)) in got.iter().zip(plain).zip(&want).enumerate() {
        prop_assert!(
            g.to_bits() == u.to_bits() || (g.is_nan() && u.is_nan()),
            "fused {} vs unfused {} at {}",
            g,
            u,
            i
        );
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-5 * (1.0 + w.abs());
        prop_assert!(ok, "{:?}: {} vs naive {} at {}", s, g, w, i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn conv_relu_pool_matches_naive_and_unfused(
        n in 1usize..5, cg in 1usize..5, g in 1usize..3, mg in 1usize..20, h in 2usize..20, w in 2usize..20,
        k in prop::sample::select(vec![1usize, 3, 5]), pad in 0usize..3, relu in any::<bool>(),
        nan_at in prop::option::of(any::<usize>()), seed in any::<u32>(),
    ) {
        // A 1x1 kernel only without pads (the direct gemm path; with pads it is im2col).
        let p = if k == 1 { pad % 2 } else { pad.min(k / 2) };
        let s = Shape { n, c: cg * g, h: h.max(k), w: w.max(k), m: mg * g, k, p, g };
        prop_assume!(s.out().0 >= 2 && s.out().1 >= 2);
        check(s, relu, nan_at, seed)?;
    }
}

#[test]
fn cifar_shaped_layers_and_a_plane_too_small_to_pool() {
    // 32x32 / 16x16 / 8x8 planes with 16, 32, 64 channels (whole 8-row gemm panels), a
    // batched 10x10 plane at batch 3, and a 1x1 output the fused pool declines (the
    // pool then runs alone and refuses it: its input is smaller than its kernel).
    for (s, relu) in [
        (
            Shape {
                n: 2,
                c: 3,
                h: 32,
                w: 32,
                m: 16,
                k: 3,
                p: 1,
                g: 1,
            },
            true,
        ),
        (
            Shape {
                n: 2,
                c: 16,
                h: 16,
                w: 16,
                m: 32,
                k: 3,
                p: 1,
                g: 1,
            },
            true,
        ),
        (
            Shape {
                n: 1,
                c: 32,
                h: 8,
                w: 8,
                m: 64,
                k: 3,
                p: 1,
                g: 1,
            },
            false,
        ),
        (
            Shape {
                n: 3,
                c: 6,
                h: 14,
                w: 14,
                m: 16,
                k: 5,
                p: 0,
                g: 1,
            },
            true,
        ),
    ] {
        check(s, relu, None, 5).unwrap();
    }
    let tiny = Shape {
        n: 1,
        c: 2,
        h: 3,
        w: 3,
        m: 4,
        k: 3,
        p: 0,
        g: 1,
    };
    match run(tiny, true, false, &rnd(1, 18)) {
        Err(RuntimeError::Shape { op, .. }) => assert_eq!(op, "MaxPool2D"),
        other => panic!("a 1x1 plane cannot be pooled 2x2: {other:?}"),
    }
}
