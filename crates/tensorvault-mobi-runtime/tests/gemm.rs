//! The packed gemm (`tensorvault_mobi_runtime::gemm`): the widest kernel the CPU has
//! (AVX-512 or AVX2), the AVX2 + FMA one and the portable one against a naive f64
//! product and each other, over random shapes (across
//! the 6- and 8-row panels, the 16- and 32-column tiles and the 256-deep block), strides, pre-packed or not, bias and
//! activation.

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
