//! The packed gemm (`tensorvault_mobi_runtime::gemm`) on the matrix shapes of the
//! benchmarked models, one thread, side by side with matrixmultiply's sgemm (the
//! runtime's gemm before): `packed` = left operand packed ahead of time (how the session
//! runs Conv2D weights; the widest kernel the CPU has), `packed_avx2` = the same with the
//! AVX2 + FMA kernel, `strided` = both operands packed per call, `portable` = packed, no
//! SIMD intrinsics, `matrixmultiply` = `matrixmultiply::sgemm`.
//! Throughput is in floating-point operations (2 m k n) per CPU second.
//!
//! Times are the benchmark thread's CPU time (`cpu_time::CpuTime`, see benches/conv.rs).
//!
//! Run: `cargo bench -p tensorvault-mobi-runtime --bench gemm`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod cpu_time;

use cpu_time::CpuTime;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_mobi_runtime::gemm::{gemm, Epilogue, Kernel, Lhs, PackedA, Rhs};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + seed) % 101) as f32 / 101.0 - 0.5)
        .collect()
}

fn bench(c: &mut Criterion<CpuTime>) {
    // (name, m, k, n): a convolution's [out channels, in channels * kh * kw, out plane].
    let shapes = [
        ("effnet_1x1_expand_56", 144, 24, 3136),
        ("effnet_1x1_project_28", 40, 240, 784),
        ("effnet_1x1_expand_14", 480, 80, 196),
        ("effnet_1x1_project_7", 192, 1152, 49),
        ("effnet_1x1_head_7", 1280, 320, 49),
        ("effnet_stem_3x3s2", 32, 27, 12544),
        ("cifar_3x3_16", 64, 288, 256),
        ("lenet_conv2_5x5", 16, 150, 100),
        ("square_256", 256, 256, 256),
    ];
    let mut g = c.benchmark_group("gemm");
    g.sample_size(20);
    for (name, m, k, n) in shapes {
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let packed = PackedA::new(m, k, &a, (k, 1));
        let mut out = vec![0f32; m * n];
        g.throughput(Throughput::Elements((2 * m * k * n) as u64));
        let rhs = Rhs::Strided {
            data: &b,
            rs: n,
            cs: 1,
        };
        let strided = Lhs::Strided {
            data: &a,
            rs: k,
            cs: 1,
        };
        let runs = [
            ("packed", Lhs::Packed(&packed), Kernel::Auto),
            ("packed_avx2", Lhs::Packed(&packed), Kernel::Avx2),
            ("strided", strided, Kernel::Auto),
            ("portable", Lhs::Packed(&packed), Kernel::Portable),
        ];
        for (how, lhs, kernel) in runs {
            g.bench_function(format!("{name}/{how}"), |bn| {
                bn.iter(|| {
                    gemm(
                        [m, k, n],
                        lhs,
                        rhs,
                        &mut out,
                        n,
                        Epilogue::default(),
                        kernel,
                    );
                    black_box(&out);
                })
            });
        }
        g.bench_function(format!("{name}/matrixmultiply"), |bn| {
            bn.iter(|| {
                // SAFETY: a is m x k (row stride k), b is k x n (row stride n), out is
                // m x n (row stride n): every index matrixmultiply forms is in bounds.
                unsafe {
                    matrixmultiply::sgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        out.as_mut_ptr(),
                        n as isize,
                        1,
                    );
                }
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench
}
criterion_main!(benches);
