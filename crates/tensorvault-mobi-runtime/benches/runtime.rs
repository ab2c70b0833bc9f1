//! Runtime hot paths: LeNet-5 and the CIFAR-10 CNN end to end at batch 1 and 64 (one
//! thread: matrixmultiply runs single-threaded by default), and session preparation
//! (dequantizing an int8 file's weights). The side-by-side comparison with onnxruntime
//! is `bench/mobi/run.sh` (it drives `mobi run` / `MobiModel.run`).
//!
//! Times are the benchmark thread's CPU time (`cpu_time::CpuTime`, see benches/conv.rs).
//!
//! Run: `cargo bench -p tensorvault-mobi-runtime --bench runtime`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod cpu_time;

use cpu_time::CpuTime;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tensorvault_formats::mobi::{models, Model, QuantTarget, WriteOptions};
use tensorvault_mobi_runtime::{Session, Tensor};

fn image(n: usize, c: usize, hw: usize) -> Tensor {
    let len = n * c * hw * hw;
    let data = (0..len).map(|i| ((i * 37) % 101) as f32 / 101.0).collect();
    Tensor::f32(vec![n, c, hw, hw], data).expect("shape")
}

fn bench(c: &mut Criterion<CpuTime>) {
    let nets = [
        ("lenet5", models::lenet5(1).expect("model"), 1, 28),
        ("cifar10", models::cifar10_cnn(1).expect("model"), 3, 32),
    ];
    for (name, model, ch, hw) in &nets {
        let s = Session::new(model).expect("session");
        for batch in [1usize, 64] {
            let x = image(batch, *ch, *hw);
            let mut g = c.benchmark_group(format!("{name}/run"));
            g.sample_size(if batch == 1 { 50 } else { 10 });
            g.bench_function(format!("batch{batch}"), |b| {
                b.iter(|| s.run(&[("image", black_box(x.clone()))]).expect("run"))
            });
            g.finish();
        }
        let int8 = model
            .to_bytes_with(&WriteOptions {
                quantize: Some(QuantTarget::Int8),
                gzip: false,
            })
            .expect("encode");
        c.bench_function(&format!("{name}/prepare_int8_file"), |b| {
            b.iter(|| {
                let m = Model::from_bytes(black_box(&int8)).expect("read");
                Session::new(&m).expect("session")
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench
}
criterion_main!(benches);
