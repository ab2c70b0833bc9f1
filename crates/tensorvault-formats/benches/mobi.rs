//! MOBI benchmarks: header parse, full validated loads of the two fixture models (f32 and
//! int8), and the same weights loaded from a safetensors file with the `safetensors`
//! crate. File sizes (f32 / fp16 / int8 / int16, with and without gzip) are printed once.
//!
//! Run: `cargo bench -p tensorvault-formats --bench mobi`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use tensorvault_formats::mobi::{models, ConstantTensor, Header, Model, QuantTarget, WriteOptions};

fn safetensors_bytes(m: &Model) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = m
        .tensors
        .iter()
        .map(|t| {
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (
                format!("t{}", t.id),
                TensorView::new(Dtype::F32, shape, &t.data).expect("valid view"),
            )
        })
        .collect();
    safetensors::tensor::serialize(views, &None).expect("serialize")
}

fn sizes(name: &str, m: &Model) {
    let f32_len = m.to_bytes().expect("encode").len();
    let mut line = format!("{name}: {} params; f32 {f32_len} B", m.parameter_count());
    for (label, q) in [
        ("fp16", QuantTarget::Fp16),
        ("int8", QuantTarget::Int8),
        ("int16", QuantTarget::Int16),
    ] {
        for gzip in [false, true] {
            let n = m
                .to_bytes_with(&WriteOptions {
                    quantize: Some(q),
                    gzip,
                })
                .expect("encode")
                .len();
            line += &format!(
                "; {label}{} {n} B ({:.1}%)",
                if gzip { "+gz" } else { "" },
                100.0 * n as f64 / f32_len as f64
            );
        }
    }
    let gz = m
        .to_bytes_with(&WriteOptions {
            quantize: None,
            gzip: true,
        })
        .expect("encode")
        .len();
    line += &format!(
        "; f32+gz {gz} B ({:.1}%); safetensors {} B",
        100.0 * gz as f64 / f32_len as f64,
        safetensors_bytes(m).len()
    );
    eprintln!("{line}");
}

fn bench(c: &mut Criterion) {
    let lenet = models::lenet5(1).expect("lenet5");
    let cifar = models::cifar10_cnn(1).expect("cifar10");
    sizes("lenet5", &lenet);
    sizes("cifar10", &cifar);
    let lenet_f32 = lenet.to_bytes().expect("encode");
    let mut g = c.benchmark_group("mobi");
    g.bench_function("header_parse", |b| {
        b.iter(|| Header::parse(black_box(&lenet_f32)).expect("header"))
    });
    for (name, m) in [("lenet5", &lenet), ("cifar10", &cifar)] {
        let f32_bytes = m.to_bytes().expect("encode");
        let int8 = m
            .to_bytes_with(&WriteOptions {
                quantize: Some(QuantTarget::Int8),
                gzip: false,
            })
            .expect("encode");
        let st = safetensors_bytes(m);
        g.bench_function(format!("{name}/load_f32"), |b| {
            b.iter(|| Model::from_bytes(black_box(&f32_bytes)).expect("load"))
        });
        g.bench_function(format!("{name}/load_int8"), |b| {
            b.iter(|| Model::from_bytes(black_box(&int8)).expect("load"))
        });
        g.bench_function(format!("{name}/load_int8_dequantize"), |b| {
            b.iter(|| {
                let mut m = Model::from_bytes(black_box(&int8)).expect("load");
                m.dequantize().expect("dequantize");
                m
            })
        });
        g.bench_function(format!("{name}/safetensors_load_f32"), |b| {
            b.iter(|| {
                let st = SafeTensors::deserialize(black_box(&st)).expect("deserialize");
                st.tensors()
                    .into_iter()
                    .map(|(_, v)| v.data().to_vec())
                    .collect::<Vec<_>>()
            })
        });
    }
    g.finish();
    dequantize(c);
}

/// `ConstantTensor::to_f32` of per-output-channel int8 weights in EfficientNet-Lite0's
/// shapes (a 5x5 depthwise kernel: 25 values per channel; a 1x1 projection: 1152 per
/// channel), the work `Session::new` does for every int8 weight.
fn dequantize(c: &mut Criterion) {
    let mut g = c.benchmark_group("mobi/dequantize_int8");
    for (name, shape) in [
        ("depthwise_1152x1x5x5", vec![1152u64, 1, 5, 5]),
        ("pointwise_320x1152x1x1", vec![320u64, 1152, 1, 1]),
    ] {
        let n: u64 = shape.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * (1.0 + (i / 25 % 13) as f32))
            .collect();
        let t = ConstantTensor::from_f32_per_channel_i8(2, &shape, &values, 0).expect("quantize");
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| {
            b.iter(|| black_box(&t).to_f32().expect("dequantize"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
