//! The packed gemm (`tensorvault_mobi_runtime::gemm`): the widest kernel the CPU has
//! (AVX-512 or AVX2), the AVX2 + FMA one and the portable one against a naive f64
//! product and each other, over random shapes (across the 6- and 8-row panels, the 16-
//! and 32-column tiles and the 256-deep block), strides, pre-packed or not, bias and
//! activation; `Rhs::Rows` (columns read in place) against the dense operand.

use proptest::prelude::*;
use tensorvault_mobi_runtime::gemm::{
    gemm, sgemm, Act, Bias, Epilogue, Kernel, Lhs, PackedA, PackedB, Rhs,
};

fn naive(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| f64::from(a[i * sa.0 + p * sa.1]) * f64::from(b[p * sb.0 + j * sb.1]))
                .sum();
        }
    }
    c
}

fn close(got: f32, want: f64, k: usize) -> bool {
    // Values in [-1, 1): the f32 sum of k products is off by at most ~k ulps of k.
    (f64::from(got) - want).abs() <= 1e-6 * (k as f64 + 1.0) * 4.0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn kernels_match_naive(
        m in 1usize..40,
        k in 0usize..300,
        n in 1usize..100,
        a_t in any::<bool>(),
        b_t in any::<bool>(),
        prepack in any::<bool>(),
        extra in 0usize..5,
        seed in any::<u32>(),
    ) {
        let v = |len: usize, s: u32| -> Vec<f32> {
            (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(s) >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0).collect()
        };
        let a = v(m * k, seed);
        let b = v(k * n, seed ^ 0x5555);
        // Row-major or transposed (column-major) storage of each operand.
        let sa = if a_t { (1, m) } else { (k, 1) };
        let sb = if b_t { (1, k) } else { (n, 1) };
        let want = naive(m, k, n, &a, sa, &b, sb);
        let rsc = n + extra;
        let pa = PackedA::new(m, k, &a, sa);
        let pb = PackedB::new(k, n, &b, sb);
        let mut outs = Vec::new();
        for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
            let lhs = if prepack { Lhs::Packed(&pa) } else { Lhs::Strided { data: &a, rs: sa.0, cs: sa.1 } };
            let rhs = if prepack { Rhs::Packed(&pb) } else { Rhs::Strided { data: &b, rs: sb.0, cs: sb.1 } };
            let mut c = vec![9f32; m * rsc];
            gemm([m, k, n], lhs, rhs, &mut c, rsc, Epilogue::default(), kernel);
            for i in 0..m {
                for j in 0..n {
                    prop_assert!(close(c[i * rsc + j], want[i * n + j], k), "{kernel:?} ({i},{j}): {} vs {}", c[i * rsc + j], want[i * n + j]);
                }
                prop_assert!(c[i * rsc + n..(i + 1) * rsc].iter().all(|&x| x == 9.0), "padding columns untouched");
            }
            outs.push(c);
        }
        for other in &outs[1..] {
            for (x, y) in outs[0].iter().zip(other) {
                prop_assert!((x - y).abs() <= 1e-5 * (k as f32 + 1.0), "widest kernel {x} vs {y}");
            }
        }
        // The convenience entry point is the Auto kernel on strided operands.
        let mut c = vec![9f32; m * rsc];
        sgemm(m, k, n, &a, sa, &b, sb, &mut c, rsc);
        for i in 0..m {
            for j in 0..n {
                prop_assert!(close(c[i * rsc + j], want[i * n + j], k));
            }
        }
    }

    #[test]
    fn fused_bias_and_clip_match_separate_passes(
        m in 1usize..20,
        k in 1usize..40,
        n in 1usize..40,
        rows in any::<bool>(),
        lo in -1.0f32..0.0,
        hi in 0.0f32..1.0,
    ) {
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 19) as f32 / 9.0 - 1.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 53) % 23) as f32 / 11.0 - 1.0).collect();
        let bias: Vec<f32> = (0..m.max(n)).map(|i| (i % 7) as f32 / 5.0 - 0.6).collect();
        let want = naive(m, k, n, &a, (k, 1), &b, (n, 1));
        for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
            let epi = Epilogue {
                bias: if rows { Bias::Rows(&bias) } else { Bias::Cols(&bias) },
                act: Some(Act::Clip { lo, hi }),
            };
            let mut c = vec![0f32; m * n];
            let pa = PackedA::new(m, k, &a, (k, 1));
            gemm([m, k, n], Lhs::Packed(&pa), Rhs::Strided { data: &b, rs: n, cs: 1 }, &mut c, n, epi, kernel);
            for i in 0..m {
                for j in 0..n {
                    let v = want[i * n + j] + f64::from(bias[if rows { i } else { j }]);
                    let v = v.clamp(f64::from(lo), f64::from(hi));
                    prop_assert!(close(c[i * n + j], v, k), "{kernel:?} ({i},{j})");
                }
            }
        }
    }
}

#[test]
fn short_operand_is_refused_before_any_access() {
    let a = vec![1f32; 5]; // 2 x 3 needs 6
    let b = vec![1f32; 6];
    let mut c = vec![0f32; 4];
    let r = std::panic::catch_unwind(move || sgemm(2, 3, 2, &a, (3, 1), &b, (2, 1), &mut c, 2));
    assert!(r.is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `Rhs::Rows` (columns read in place: panel `q`'s row `p` is 16 consecutive values at
    /// `bases[q] + rows[p]`) against the same operand written out densely, every kernel,
    /// with a bias and Relu, across the 256-deep block.
    #[test]
    fn rows_read_in_place_match_the_dense_operand(
        m in 1usize..40, k in 0usize..300, panels in 1usize..7, tail in 0usize..16,
        seed in any::<u32>(),
    ) {
        let n = (panels - 1) * 16 + tail.max(1);
        let len = 3000; // bases < 1900, rows < 900: every run of 16 inside
        let data: Vec<f32> = (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0).collect();
        let pick = |i: usize, s: u32| (((i as u32).wrapping_mul(40_503).wrapping_add(s)) % 900) as usize;
        let rows: Vec<usize> = (0..k).map(|p| pick(p, seed)).collect();
        let bases: Vec<usize> = (0..panels).map(|q| pick(q, seed ^ 77) + 1000).collect();
        let dense: Vec<f32> = (0..k * n).map(|i| {
            let (p, j) = (i / n, i % n);
            data[bases[j / 16] + rows[p] + j % 16]
        }).collect();
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 19) as f32 / 9.0 - 1.0).collect();
        let bias: Vec<f32> = (0..m).map(|i| (i % 7) as f32 / 5.0 - 0.6).collect();
        let want = naive(m, k, n, &a, (k, 1), &dense, (n, 1));
        let epi = Epilogue { bias: Bias::Rows(&bias), act: Some(Act::Relu) };
        let pa = PackedA::new(m, k, &a, (k, 1));
        for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
            let mut c = vec![9f32; m * n];
            let rhs = Rhs::Rows { data: &data, rows: &rows, bases: &bases };
            gemm([m, k, n], Lhs::Packed(&pa), rhs, &mut c, n, epi, kernel);
            for i in 0..m {
                for j in 0..n {
                    let v = (want[i * n + j] + f64::from(bias[i])).max(0.0);
                    prop_assert!(close(c[i * n + j], v, k), "{:?} ({},{}): {} vs {}", kernel, i, j, c[i * n + j], v);
                }
            }
        }
    }
}

#[test]
fn rows_past_the_data_are_refused_before_any_access() {
    let data = vec![1f32; 40];
    let a = vec![1f32; 2];
    // Row offset 30 + 16 values > 40.
    let r = std::panic::catch_unwind(|| {
        let mut c = vec![0f32; 16];
        let rhs = Rhs::Rows {
            data: &data,
            rows: &[0, 30],
            bases: &[0],
        };
        gemm(
            [1, 2, 16],
            Lhs::Strided {
                data: &a,
                rs: 2,
                cs: 1,
            },
            rhs,
            &mut c,
            16,
            Epilogue::default(),
            Kernel::Auto,
        );
    });
    assert!(r.is_err());
}

// Fixed shapes (moved from the module's unit tests).
fn naive_f32(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f64;
            for p in 0..k {
                s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            }
            c[i * n + j] = s as f32;
        }
    }
    c
}

fn vals(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 31) % 97) as f32 / 48.0 - 1.0)
        .collect()
}

#[test]
fn packed_and_strided_agree_with_naive_across_blocks() {
    // Shapes crossing MR, NR, KC, MC and NC boundaries.
    for &(m, k, n) in &[
        (1, 1, 1),
        (7, 3, 17),
        (13, 300, 40),
        (150, 20, 1030),
        (6, 513, 16),
        (5, 0, 9),
        // The CIFAR-shaped CNN's convolutions: whole 8-row panels, 32-column tiles.
        (16, 27, 1024),
        (32, 144, 256),
        (64, 288, 64),
    ] {
        let (a, b) = (vals(m * k, 1), vals(k * n, 2));
        let want = naive_f32(m, k, n, &a, &b);
        let pa = PackedA::new(m, k, &a, (k, 1));
        let pb = PackedB::new(k, n, &b, (n, 1));
        for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
            for (lhs, rhs) in [
                (
                    Lhs::Strided {
                        data: &a,
                        rs: k,
                        cs: 1,
                    },
                    Rhs::Strided {
                        data: &b,
                        rs: n,
                        cs: 1,
                    },
                ),
                (Lhs::Packed(&pa), Rhs::Packed(&pb)),
            ] {
                let mut c = vec![f32::NAN; m * n];
                gemm([m, k, n], lhs, rhs, &mut c, n, Epilogue::default(), kernel);
                for (x, y) in c.iter().zip(&want) {
                    assert!(
                        (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                        "{m}x{k}x{n}: {x} vs {y}"
                    );
                }
            }
        }
    }
}

#[test]
fn epilogue_bias_rows_cols_and_activations() {
    let (m, k, n) = (7, 5, 19);
    let (a, b) = (vals(m * k, 3), vals(k * n, 4));
    let base = naive_f32(m, k, n, &a, &b);
    let (rb, cb) = (vals(m, 5), vals(n, 6));
    let lhs = Lhs::Strided {
        data: &a,
        rs: k,
        cs: 1,
    };
    let rhs = Rhs::Strided {
        data: &b,
        rs: n,
        cs: 1,
    };
    for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
        for (bias, act) in [
            (Bias::Rows(&rb), Some(Act::Relu)),
            (Bias::Cols(&cb), Some(Act::Clip { lo: -0.25, hi: 0.5 })),
            (Bias::None, None),
        ] {
            let mut c = vec![0f32; m * n];
            gemm(
                [m, k, n],
                lhs,
                rhs,
                &mut c,
                n,
                Epilogue { bias, act },
                kernel,
            );
            for i in 0..m {
                for j in 0..n {
                    let mut v = base[i * n + j]
                        + match bias {
                            Bias::Rows(r) => r[i],
                            Bias::Cols(c) => c[j],
                            Bias::None => 0.0,
                        };
                    if let Some(a) = act {
                        let mut one = [v];
                        a.apply(&mut one);
                        v = one[0];
                    }
                    assert!((c[i * n + j] - v).abs() < 1e-5, "{kernel:?} ({i},{j})");
                }
            }
        }
    }
}

#[test]
fn relu_keeps_nan_and_rsc_leaves_other_columns() {
    // A NaN in the first row and negatives in the second, on a 6 x 16 (full AVX2) tile.
    let (m, k, n) = (6, 1, 16);
    let mut a = vec![1f32; m];
    a[1] = -2.0;
    let mut b = vec![1f32; n];
    b[0] = f32::NAN;
    let mut c = vec![7f32; m * (n + 3)];
    let epi = Epilogue {
        bias: Bias::None,
        act: Some(Act::Relu),
    };
    for kernel in [Kernel::Auto, Kernel::Avx2, Kernel::Portable] {
        let lhs = Lhs::Strided {
            data: &a,
            rs: 1,
            cs: 1,
        };
        let rhs = Rhs::Strided {
            data: &b,
            rs: n,
            cs: 1,
        };
        gemm([m, k, n], lhs, rhs, &mut c, n + 3, epi, kernel);
        assert!(c[0].is_nan());
        assert_eq!(c[1], 1.0);
        assert_eq!(c[n + 3 + 1], 0.0, "relu of -2");
        assert_eq!(c[2 * (n + 3) + 1], 1.0);
        assert_eq!(&c[n..n + 3], &[7.0; 3], "columns past n untouched");
    }
}
