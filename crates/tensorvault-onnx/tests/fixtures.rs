//! The committed real ONNX files (tests/fixtures/onnx/, made by make_fixtures.py with the
//! `onnx` package and checked against onnxruntime there): both opsets import to the same
//! MOBI graph, and a small evaluator of that graph reproduces the reference output.

mod common;

use std::path::PathBuf;

use common::conv2d;
use tensorvault_formats::mobi::{Model, OperatorType as Op, ParamValue};
use tensorvault_onnx::{import_with_report, read_model, ImportOptions, WeightsMode};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

/// The f32 payload of a committed little-endian `.npy` file.
fn npy_f32(name: &str) -> Vec<f32> {
    let b = std::fs::read(fixture(name)).unwrap();
    let header = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + header..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn ints(o: &tensorvault_formats::mobi::Operator, k: &str) -> Vec<usize> {
    match o.param(k) {
        Some(ParamValue::Ints(v)) => v.iter().map(|&x| x as usize).collect(),
        other => panic!("{k}: {other:?}"),
    }
}

/// Evaluate the ops the fixtures use (batch 2, NCHW).
fn run(m: &Model, x: Vec<f32>) -> Vec<f32> {
    let mut vals: std::collections::HashMap<u32, (Vec<f32>, Vec<usize>)> =
        std::collections::HashMap::new();
    let shape: Vec<usize> = m.inputs[0]
        .shape
        .iter()
        .map(|d| d.fixed().unwrap_or(1) as usize)
        .collect();
    vals.insert(0, (x, shape));
    for t in &m.tensors {
        vals.insert(
            t.id,
            (
                t.to_f32().unwrap(),
                t.shape.iter().map(|&d| d as usize).collect(),
            ),
        );
    }
    for o in &m.operators {
        let (x, xs) = vals[&o.inputs[0]].clone();
        let (y, ys) = match o.op {
            Op::Conv2D => {
                let (w, ws) = vals[&o.inputs[1]].clone();
                let (b, _) = vals[&o.inputs[2]].clone();
                let p = ints(o, "padding");
                let (y, s) = conv2d(
                    &x,
                    [xs[0], xs[1], xs[2], xs[3]],
                    &w,
                    [ws[0], ws[1], ws[2], ws[3]],
                    &b,
                    ints(o, "stride")[0],
                    [p[0], p[1], p[2], p[3]],
                );
                (y, s.to_vec())
            }
            Op::Relu => (x.iter().map(|v| v.max(0.0)).collect(), xs),
            Op::MaxPool2D => {
                let (k, s) = (ints(o, "kernel"), ints(o, "stride"));
                let (oh, ow) = ((xs[2] - k[0]) / s[0] + 1, (xs[3] - k[1]) / s[1] + 1);
                let mut y = Vec::new();
                for nc in 0..xs[0] * xs[1] {
                    for i in 0..oh {
                        for j in 0..ow {
                            let mut mx = f32::NEG_INFINITY;
                            for a in 0..k[0] {
                                for b in 0..k[1] {
                                    mx = mx
                                        .max(x[(nc * xs[2] + i * s[0] + a) * xs[3] + j * s[1] + b]);
                                }
                            }
                            y.push(mx);
                        }
                    }
                }
                (y, vec![xs[0], xs[1], oh, ow])
            }
            Op::Flatten => (x, vec![xs[0], xs[1..].iter().product()]),
            Op::Reshape => (x, ints(o, "shape")),
            Op::FullyConnected => {
                let (w, ws) = vals[&o.inputs[1]].clone();
                let (b, _) = vals[&o.inputs[2]].clone();
                let (n, k) = (ws[0], ws[1]);
                let mut y = Vec::new();
                for r in 0..xs[0] {
                    for c in 0..n {
                        y.push(b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>());
                    }
                }
                (y, vec![xs[0], n])
            }
            Op::Softmax => {
                assert_eq!(o.param("axis"), Some(&ParamValue::Int(xs.len() as i64 - 1)));
                let last = xs[xs.len() - 1];
                let mut y = Vec::new();
                for row in x.chunks(last) {
                    let mx = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
                    let s: f32 = e.iter().sum();
                    y.extend(e.iter().map(|v| v / s));
                }
                (y, xs)
            }
            other => panic!("evaluator lacks {other:?}"),
        };
        vals.insert(o.outputs[0], (y, ys));
    }
    vals.remove(&m.output_id(0)).unwrap().0
}

fn import_fixture(name: &str, weights: WeightsMode) -> (Model, tensorvault_onnx::ImportStats) {
    let bytes = read_model(&fixture(name), 1 << 20).unwrap();
    let opts = ImportOptions {
        weights,
        pin_symbolic_dims: Some(2),
        ..ImportOptions::default()
    };
    import_with_report(&bytes, &opts, &mut |_, _| {}).unwrap()
}

#[test]
fn both_opsets_import_to_the_folded_graph_and_match_the_reference() {
    let x = npy_f32("tiny_cnn.input.npy");
    let want = npy_f32("tiny_cnn.output.npy");
    for name in ["tiny_cnn_opset11.onnx", "tiny_cnn_opset13.onnx"] {
        let (m, stats) = import_fixture(name, WeightsMode::F32);
        let kinds: Vec<Op> = m.operators.iter().map(|o| o.op).collect();
        let shape_op = if name.contains("11") {
            Op::Flatten
        } else {
            Op::Reshape
        };
        assert_eq!(
            kinds,
            vec![
                Op::Conv2D,
                Op::Relu,
                Op::MaxPool2D,
                shape_op,
                Op::FullyConnected,
                Op::Softmax
            ],
            "{name}"
        );
        assert_eq!(stats.folded_batchnorm, 1, "{name}");
        assert_eq!(stats.folded_gemm + stats.folded_matmul_add, 1, "{name}");
        assert_eq!(m.inputs[0].shape, vec![2, 1, 8, 8]);
        assert_eq!(m.outputs[0].name, "probs");
        let got = run(&m, x.clone());
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(err < 1e-5, "{name}: max |diff| {err}");
    }
}

#[test]
fn quantized_fixtures_stay_close_to_the_reference() {
    let x = npy_f32("tiny_cnn.input.npy");
    let want = npy_f32("tiny_cnn.output.npy");
    for (mode, tol) in [
        (WeightsMode::Fp16, 1e-3),
        (WeightsMode::Int16, 1e-3),
        (WeightsMode::Int8, 5e-2),
    ] {
        let (m, stats) = import_fixture("tiny_cnn_opset13.onnx", mode);
        assert_eq!(
            stats.tensors_quantized, 2,
            "{mode:?}: the conv and fc weights"
        );
        let got = run(&m, x.clone());
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(err < tol, "{mode:?}: max |diff| {err}");
    }
}
