//! FullyConnected at batch 1 (`x [1, K] * W^T + b`, weights packed by the session), one
//! benchmark per layer shape of the real models in `tests/mobi_models`: the digits MLP
//! (64 -> 64, 64 -> 10), the CIFAR-shaped CNN (1024 -> 64), LeNet-5 (400 -> 120,
//! 120 -> 84, 84 -> 10) and EfficientNet-Lite0's classifier (1280 -> 1000). Each runs a
//! one-operator session, so the times include the session's per-run bookkeeping (the
//! same before and after a kernel change).
//!
//! Times are the benchmark thread's CPU time (`cpu_time::CpuTime`, see benches/conv.rs).
//!
//! Run: `cargo bench -p tensorvault-mobi-runtime --bench fc`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod cpu_time;

use cpu_time::CpuTime;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType};
use tensorvault_mobi_runtime::{Session, Tensor};

/// `[K, M]` of each layer, named after its model.
const SHAPES: [(&str, usize, usize); 7] = [
    ("mlp_64x64", 64, 64),
    ("mlp_64x10", 64, 10),
    ("cifar_1024x64", 1024, 64),
    ("lenet_400x120", 400, 120),
    ("lenet_120x84", 120, 84),
    ("lenet_84x10", 84, 10),
    ("effnet_1280x1000", 1280, 1000),
];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 31) % 97) as f32 / 48.0 - 1.0)
        .collect()
}

fn session(k: usize, m: usize) -> Session {
    let mut b = ModelBuilder::new("fc").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, k as u64]);
    let w = b
        .constant_f32(&[m as u64, k as u64], &values(m * k, 1))
        .expect("weights");
    let bias = b.constant_f32(&[m as u64], &values(m, 2)).expect("bias");
    let y = b.op(OperatorType::FullyConnected, &[x, w, bias], vec![]);
    b.output("y", DataType::F32, &[1, m as u64], y);
    Session::new(&b.build().expect("model")).expect("session")
}

fn bench(c: &mut Criterion<CpuTime>) {
    let mut g = c.benchmark_group("fc_batch1");
    for (name, k, m) in SHAPES {
        let s = session(k, m);
        let x = Tensor::f32(vec![1, k], values(k, 3)).expect("input");
        g.bench_function(name, |b| {
            b.iter(|| s.run(&[("x", black_box(x.clone()))]).expect("run"))
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
