//! The example models end to end (any batch size, stored f32 / fp16 / int8), and bad
//! inputs or crafted models refused with typed errors.

use tensorvault_formats::mobi::{
    models, DataType, Model, ModelBuilder, OperatorType, ParamValue, QuantTarget, WriteOptions,
};
use tensorvault_mobi_runtime::{Limits, RuntimeError, Session, Tensor};

fn image(n: usize, c: usize, hw: usize) -> Tensor {
    let len = n * c * hw * hw;
    Tensor::f32(
        vec![n, c, hw, hw],
        (0..len).map(|i| ((i * 37) % 101) as f32 / 101.0).collect(),
    )
    .unwrap()
}

fn probs(s: &Session, x: Tensor) -> Vec<f32> {
    let out = s.run(&[("image", x)]).unwrap();
    assert_eq!(out.len(), 1);
    out[0].1.as_f32().unwrap().to_vec()
}

#[test]
fn lenet5_and_cifar_run_at_any_batch_size() {
    for (model, c, hw) in [
        (models::lenet5(3).unwrap(), 1, 28),
        (models::cifar10_cnn(3).unwrap(), 3, 32),
    ] {
        let s = Session::new(&model).unwrap();
        let one = probs(&s, image(1, c, hw));
        assert_eq!(one.len(), 10);
        assert!((one.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(one.iter().all(|&p| p > 0.0 && p < 1.0));
        // A batch of 3 copies gives the same row three times.
        let b = image(1, c, hw);
        let mut data = Vec::new();
        for _ in 0..3 {
            data.extend_from_slice(b.as_f32().unwrap());
        }
        let three = probs(&s, Tensor::f32(vec![3, c, hw, hw], data).unwrap());
        assert_eq!(three.len(), 30);
        for row in three.chunks(10) {
            for (a, b) in row.iter().zip(&one) {
                assert!((a - b).abs() < 1e-6, "{a} vs {b}");
            }
        }
    }
}

#[test]
fn quantized_files_dequantize_once_and_stay_close() {
    let model = models::lenet5(5).unwrap();
    let f32_out = probs(&Session::new(&model).unwrap(), image(2, 1, 28));
    for (target, tol) in [(QuantTarget::Fp16, 1e-3f32), (QuantTarget::Int8, 5e-2)] {
        let bytes = model
            .to_bytes_with(&WriteOptions {
                quantize: Some(target),
                gzip: true,
            })
            .unwrap();
        let stored = Model::from_bytes(&bytes).unwrap();
        // The large weights are stored quantized (int8 per output channel in v2); biases
        // and small tensors may stay f32 (the writer's choose_quantization).
        let big = stored.tensors.iter().filter(|t| t.len() >= 1024);
        assert!(big.clone().count() >= 3);
        assert!(big.into_iter().all(|t| t.dtype != DataType::F32));
        let q = probs(&Session::new(&stored).unwrap(), image(2, 1, 28));
        let max = q
            .iter()
            .zip(&f32_out)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(max < tol, "{target:?}: max abs diff {max}");
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    let s = Session::new(&models::lenet5(1).unwrap()).unwrap();
    assert!(
        matches!(s.run(&[]).unwrap_err(), RuntimeError::MissingInput { ref name } if name == "image")
    );
    let e = s.run(&[("img", image(1, 1, 28))]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::UnknownInput { ref name, ref known } if name == "img" && known == &["image"]),
        "{e}"
    );
    let e = s
        .run(&[("image", image(1, 1, 28)), ("image", image(1, 1, 28))])
        .unwrap_err();
    assert!(matches!(e, RuntimeError::DuplicateInput { .. }), "{e}");
    let e = s.run(&[("image", image(1, 1, 27))]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::InputShape { ref found, .. } if found == &[1, 1, 27, 27]),
        "{e}"
    );
    let e = s
        .run(&[(
            "image",
            Tensor::i64(vec![1, 1, 28, 28], vec![0; 784]).unwrap(),
        )])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::InputDType {
                expected: "f32",
                found: "i64",
                ..
            }
        ),
        "{e}"
    );
    // NaN is fine: it propagates.
    let mut x = image(1, 1, 28);
    if let tensorvault_mobi_runtime::Data::F32(v) = &mut x.data {
        v[0] = f32::NAN;
    }
    let out = s.run(&[("image", x)]).unwrap();
    assert!(out[0].1.as_f32().unwrap().iter().any(|v| v.is_nan()));
    assert!(Tensor::f32(vec![2, 2], vec![0.0; 3]).is_err());
}

#[test]
fn shape_mismatch_inside_the_graph_names_op_and_value() {
    // x [1, 4] -> FC(W [2, 3]) fails inside the graph: op 0, value id 0 (the input).
    let mut b = ModelBuilder::new("bad");
    let x = b.input("x", DataType::F32, &[1, 4]);
    let w = b.constant_f32(&[2, 3], &[0.0; 6]).unwrap();
    let y = b.op(OperatorType::FullyConnected, &[x, w], vec![]);
    b.output("y", DataType::F32, &[1, 2], y);
    let m = b.build().unwrap();
    let m = Model::from_bytes(&m.to_bytes().unwrap()).unwrap();
    let e = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(vec![1, 4], vec![1.0; 4]).unwrap())])
        .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Shape { index: 0, op: "FullyConnected", value: 0, ref shape, .. } if shape == &[1, 4]),
        "{e}"
    );
}

#[test]
fn crafted_huge_shapes_are_refused_before_allocation() {
    // Tile of a [1, 1] input by 2^40 per axis, and Expand to a 2^62-element shape.
    for (op, key) in [
        (OperatorType::Tile, "repeats"),
        (OperatorType::Expand, "shape"),
    ] {
        let mut b = ModelBuilder::new("huge");
        let x = b.input("x", DataType::F32, &[1, 1]);
        let y = b.op(
            op,
            &[x],
            vec![(key.into(), ParamValue::Ints(vec![1 << 40, 1 << 22]))],
        );
        b.output("y", DataType::F32, &[], y);
        let m = b.build().unwrap();
        let s = Session::with_limits(
            &m,
            Limits {
                max_elements: 1 << 20,
                ..Limits::default()
            },
        )
        .unwrap();
        let e = s
            .run(&[("x", Tensor::f32(vec![1, 1], vec![1.0]).unwrap())])
            .unwrap_err();
        assert!(
            matches!(
                e,
                RuntimeError::TooLarge {
                    index: 0,
                    limit: 1_048_576,
                    ..
                }
            ),
            "{op:?}: {e}"
        );
    }
    // A conv whose padding makes a huge output.
    let mut b = ModelBuilder::new("pad");
    let x = b.input("x", DataType::F32, &[1, 1, 1, 1]);
    let w = b.constant_f32(&[1, 1, 1, 1], &[1.0]).unwrap();
    let y = b.op(
        OperatorType::Conv2D,
        &[x, w],
        vec![(
            "padding".into(),
            ParamValue::Ints(vec![1 << 30, 1 << 30, 1 << 30, 1 << 30]),
        )],
    );
    b.output("y", DataType::F32, &[], y);
    let s = Session::new(&b.build().unwrap()).unwrap();
    let e = s
        .run(&[("x", Tensor::f32(vec![1, 1, 1, 1], vec![1.0]).unwrap())])
        .unwrap_err();
    assert!(matches!(e, RuntimeError::TooLarge { .. }), "{e}");
    // An input claiming a huge empty dimension.
    let mut b = ModelBuilder::new("empty");
    let x = b.input("x", DataType::F32, &[0, 1 << 40]);
    let y = b.op(OperatorType::Transpose, &[x], vec![]);
    b.output("y", DataType::F32, &[], y);
    let s = Session::new(&b.build().unwrap()).unwrap();
    let e = s
        .run(&[("x", Tensor::f32(vec![0, 1 << 40], vec![]).unwrap())])
        .unwrap_err();
    assert!(matches!(e, RuntimeError::InputShape { .. }), "{e}");
}

#[test]
fn invalid_models_are_refused_at_session_creation() {
    let mut m = models::lenet5(1).unwrap();
    m.operators[0].inputs.truncate(1);
    assert!(matches!(
        Session::new(&m).unwrap_err(),
        RuntimeError::Model(_)
    ));
    let mut m = models::lenet5(1).unwrap();
    m.operators[1].inputs[0] = 999;
    assert!(matches!(
        Session::new(&m).unwrap_err(),
        RuntimeError::UndefinedValue {
            index: 1,
            value: 999,
            ..
        }
    ));
}
