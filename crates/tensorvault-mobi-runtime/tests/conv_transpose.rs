//! ConvTranspose2D (gemm + col2im) against a naive scatter over random geometries
//! (strides, dilations, asymmetric pads, output_padding, groups, batches > 1), a worked
//! example, and its typed errors.

mod common;

use common::*;
use proptest::prelude::*;
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::RuntimeError;

fn noise(n: usize, seed: u32) -> Vec<f32> {
    let mut s = u64::from(seed) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

/// Input `[n, c, h, w]`, weights `[c, mg, kh, kw]`, group `g`, strides, dilations,
/// pads `[top, left, bottom, right]`, output padding.
#[derive(Debug, Clone)]
struct Geo {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    mg: usize,
    k: [usize; 2],
    g: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 4],
    op: [usize; 2],
}

impl Geo {
    fn full(&self, a: usize) -> usize {
        let i = if a == 0 { self.h } else { self.w };
        self.s[a] * (i - 1) + self.op[a] + self.d[a] * (self.k[a] - 1) + 1
    }

    fn out(&self) -> Option<[usize; 2]> {
        Some([
            self.full(0).checked_sub(self.p[0] + self.p[2])?,
            self.full(1).checked_sub(self.p[1] + self.p[3])?,
        ])
    }

    fn params(&self) -> Vec<(&'static str, P)> {
        let i = |v: &[usize]| ints(&v.iter().map(|&x| x as i64).collect::<Vec<_>>());
        vec![
            ("stride", i(&self.s)),
            ("dilation", i(&self.d)),
            ("padding", i(&self.p)),
            ("output_padding", i(&self.op)),
            ("group", P::Int(self.g as i64)),
        ]
    }

    /// The definition: every input element scattered through every tap.
    fn naive(&self, x: &[f32], wt: &[f32], b: &[f32]) -> Vec<f32> {
        let [oh, ow] = self.out().unwrap();
        let (cg, m) = (self.c / self.g, self.mg * self.g);
        let mut y = vec![0f32; self.n * m * oh * ow];
        for (i, v) in y.iter_mut().enumerate() {
            *v = b[(i / (oh * ow)) % m];
        }
        for n in 0..self.n {
            for ci in 0..self.c {
                let g = ci / cg;
                for iy in 0..self.h {
                    for ix in 0..self.w {
                        let xv = x[((n * self.c + ci) * self.h + iy) * self.w + ix];
                        for mo in 0..self.mg {
                            for ky in 0..self.k[0] {
                                for kx in 0..self.k[1] {
                                    let oy =
                                        (iy * self.s[0] + ky * self.d[0]) as i64 - self.p[0] as i64;
                                    let ox =
                                        (ix * self.s[1] + kx * self.d[1]) as i64 - self.p[1] as i64;
                                    if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                        continue;
                                    }
                                    let wv =
                                        wt[((ci * self.mg + mo) * self.k[0] + ky) * self.k[1] + kx];
                                    let oc = g * self.mg + mo;
                                    y[((n * m + oc) * oh + oy as usize) * ow + ox as usize] +=
                                        xv * wv;
                                }
                            }
                        }
                    }
                }
            }
        }
        y
    }
}

fn run_geo(geo: &Geo, seed: u32) -> (Vec<f32>, Vec<f32>) {
    let x = noise(geo.n * geo.c * geo.h * geo.w, seed);
    let wt = noise(geo.c * geo.mg * geo.k[0] * geo.k[1], seed ^ 0x55);
    let m = geo.mg * geo.g;
    let b = noise(m, seed ^ 0xaa);
    let t = run(
        Op::ConvTranspose2D,
        vec![
            input(&[geo.n, geo.c, geo.h, geo.w], &x),
            konst(
                &[
                    geo.c as u64,
                    geo.mg as u64,
                    geo.k[0] as u64,
                    geo.k[1] as u64,
                ],
                &wt,
            ),
            konst(&[m as u64], &b),
        ],
        geo.params(),
    )
    .unwrap();
    let [oh, ow] = geo.out().unwrap();
    assert_eq!(t.shape, [geo.n, m, oh, ow]);
    (t.as_f32().unwrap().to_vec(), geo.naive(&x, &wt, &b))
}

#[test]
fn worked_example_stride_2() {
    // 1x1x2x2 input, 1x1x2x2 kernel of ones, stride 2: each input becomes a 2x2 block.
    let t = run(
        Op::ConvTranspose2D,
        vec![
            input(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
            konst(&[1, 1, 2, 2], &[1.0; 4]),
        ],
        vec![("stride", ints(&[2, 2]))],
    )
    .unwrap();
    assert_eq!(t.shape, [1, 1, 4, 4]);
    assert_eq!(
        t.as_f32().unwrap(),
        &[1., 1., 2., 2., 1., 1., 2., 2., 3., 3., 4., 4., 3., 3., 4., 4.]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn matches_naive_scatter(
        n in 1usize..3, cg in 1usize..3, g in 1usize..3, mg in 1usize..3,
        h in 1usize..5, w in 1usize..5, kh in 1usize..4, kw in 1usize..4,
        s in prop::array::uniform2(1usize..4), d in prop::array::uniform2(1usize..3),
        p in prop::array::uniform4(0usize..3), op in prop::array::uniform2(0usize..2),
        seed in any::<u32>(),
    ) {
        let geo = Geo { n, c: cg * g, h, w, mg, k: [kh, kw], g, s, d, p, op };
        prop_assume!(geo.out().is_some());
        let (got, want) = run_geo(&geo, seed);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            prop_assert!((a - b).abs() <= 1e-5, "element {}: {} vs {} ({:?})", i, a, b, geo);
        }
    }
}

#[test]
fn typed_errors() {
    // Weights of another input-channel count.
    let e = run(
        Op::ConvTranspose2D,
        vec![
            input(&[1, 2, 2, 2], &[0.0; 8]),
            konst(&[1, 1, 1, 1], &[1.0]),
        ],
        vec![],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::Shape { .. }), "{e}");
    // Pads larger than the full output.
    let e = run(
        Op::ConvTranspose2D,
        vec![input(&[1, 1, 1, 1], &[1.0]), konst(&[1, 1, 1, 1], &[1.0])],
        vec![("padding", ints(&[1, 0, 1, 0]))],
    )
    .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Param { key: "padding", .. }),
        "{e}"
    );
    // An output over the element limit is refused before it is allocated.
    let e = run(
        Op::ConvTranspose2D,
        vec![
            input(&[1, 1, 2, 2], &[1.0; 4]),
            konst(&[1, 1, 1, 1], &[1.0]),
        ],
        vec![("stride", ints(&[1 << 20, 1 << 20]))],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::TooLarge { .. }), "{e}");
}
