//! Convolution kernels on the shapes that dominate the benchmarked models, one thread:
//! LeNet-5's 5x5 convolutions (im2col + sgemm), EfficientNet-Lite0's depthwise 3x3/5x5 at
//! stride 1 and 2 and its 1x1 expand/project convolutions (direct sgemm), each with the
//! ReLU6 (Clip 0..6) the model fuses into it, at batch 1. With `TV_MOBI_BENCH_MODEL` set
//! to a `.mobi` file (an absolute path: cargo runs benches in the crate's directory; e.g.
//! `tensorvault mobi convert` of the EfficientNet-Lite0 ONNX file that
//! `tests/mobi_models/build_efficientnet.py` writes) it also runs that model end to end
//! at the batch sizes of `TV_MOBI_BENCH_BATCH` (comma-separated, default 1) on inputs of
//! its declared size (a symbolic first dimension takes the batch size).
//!
//! Times are the benchmark thread's CPU time (`cpu_time::CpuTime`), not wall time: on
//! the shared 2-core VM wall time mostly measures waiting for a core.
//!
//! Run: `cargo bench -p tensorvault-mobi-runtime --bench conv`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod cpu_time;

use cpu_time::CpuTime;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tensorvault_formats::mobi::{DataType, Model, ModelBuilder, OperatorType as Op, ParamValue};
use tensorvault_mobi_runtime::{Session, Tensor};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + seed) % 101) as f32 / 101.0 - 0.5)
        .collect()
}

/// One convolution `[1, c, hw, hw]` -> `m` channels, kernel `k`, stride `s`, SAME-style
/// pads, `group` groups, followed by Clip(0, 6).
fn conv_model(c: usize, hw: usize, m: usize, k: usize, s: usize, group: usize) -> Model {
    let mut b = ModelBuilder::new("conv-bench");
    let x = b.input("x", DataType::F32, &[1, c as u64, hw as u64, hw as u64]);
    let cg = c / group;
    let w = b
        .constant_f32(
            &[m as u64, cg as u64, k as u64, k as u64],
            &values(m * cg * k * k, 1),
        )
        .expect("weights");
    let bias = b.constant_f32(&[m as u64], &values(m, 2)).expect("bias");
    let p = (k / 2) as i64;
    let y = b.op(
        Op::Conv2D,
        &[x, w, bias],
        vec![
            ("stride".into(), ParamValue::Ints(vec![s as i64, s as i64])),
            ("padding".into(), ParamValue::Ints(vec![p, p, p, p])),
            ("group".into(), ParamValue::Int(group as i64)),
        ],
    );
    let y = b.op(
        Op::Clip,
        &[y],
        vec![
            ("min".into(), ParamValue::Float(0.0)),
            ("max".into(), ParamValue::Float(6.0)),
        ],
    );
    let out = (hw + 2 * p as usize - k) / s + 1;
    b.output(
        "y",
        DataType::F32,
        &[1, m as u64, out as u64, out as u64],
        y,
    );
    b.build().expect("model")
}

fn bench_kernels(c: &mut Criterion<CpuTime>) {
    // (name, C, HW, M, k, stride, group)
    let shapes = [
        ("lenet_conv1_5x5", 1, 28, 6, 5, 1, 1),
        ("lenet_conv2_5x5", 6, 14, 16, 5, 1, 1),
        ("effnet_stem_3x3s2", 3, 224, 32, 3, 2, 1),
        ("effnet_dw3x3_112", 32, 112, 32, 3, 1, 32),
        ("effnet_dw3x3s2_112", 96, 112, 96, 3, 2, 96),
        ("effnet_dw5x5_28", 240, 28, 240, 5, 1, 240),
        ("effnet_dw5x5s2_28", 240, 28, 240, 5, 2, 240),
        ("effnet_dw3x3_14", 480, 14, 480, 3, 1, 480),
        ("effnet_dw5x5_14", 672, 14, 672, 5, 1, 672),
        ("effnet_dw5x5s2_14", 672, 14, 672, 5, 2, 672),
        ("effnet_dw5x5_7", 1152, 7, 1152, 5, 1, 1152),
        ("effnet_dw3x3_7", 1152, 7, 1152, 3, 1, 1152),
        ("effnet_1x1_expand_56", 24, 56, 144, 1, 1, 1),
        ("effnet_1x1_project_14", 480, 14, 112, 1, 1, 1),
        ("effnet_1x1_head_7", 320, 7, 1280, 1, 1, 1),
    ];
    let mut g = c.benchmark_group("conv");
    g.sample_size(30);
    for (name, ch, hw, m, k, s, group) in shapes {
        let model = conv_model(ch, hw, m, k, s, group);
        let session = Session::new(&model).expect("session");
        let x = Tensor::f32(vec![1, ch, hw, hw], values(ch * hw * hw, 3)).expect("input");
        g.bench_function(name, |b| {
            b.iter(|| session.run(&[("x", black_box(x.clone()))]).expect("run"))
        });
    }
    g.finish();
}

fn bench_model_file(c: &mut Criterion<CpuTime>) {
    let Ok(path) = std::env::var("TV_MOBI_BENCH_MODEL") else {
        return;
    };
    let model = Model::open(&path).expect("TV_MOBI_BENCH_MODEL: a readable .mobi file");
    let session = Session::new(&model).expect("session");
    let spec = &model.inputs[0];
    // TV_MOBI_BENCH_BATCH: the batch sizes to run (comma-separated, default 1).
    let batches: Vec<usize> = std::env::var("TV_MOBI_BENCH_BATCH")
        .unwrap_or_else(|_| "1".into())
        .split(',')
        .map(|b| b.trim().parse().expect("TV_MOBI_BENCH_BATCH: batch sizes"))
        .collect();
    let name = spec.name.clone();
    let mut g = c.benchmark_group("model_file");
    g.sample_size(10);
    for batch in batches {
        let shape: Vec<usize> = spec
            .shape
            .iter()
            .enumerate()
            .map(|(i, d)| match d.fixed() {
                Some(v) => v as usize,
                None if i == 0 => batch,
                None => 1,
            })
            .collect();
        let n = shape.iter().product();
        let x = Tensor::f32(shape, values(n, 4)).expect("input");
        g.bench_function(format!("batch{batch}"), |b| {
            b.iter(|| session.run(&[(&name, black_box(x.clone()))]).expect("run"))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench_kernels, bench_model_file
}
criterion_main!(benches);
