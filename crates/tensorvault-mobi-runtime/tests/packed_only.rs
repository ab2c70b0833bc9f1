//! Quantized and fp16 weights whose only readers pack them (Conv2D, FullyConnected) are
//! decoded row by row straight into the packed copy and never held whole in f32
//! (`ConstantMemory::dropped_bytes`); the results have the bits of the path that
//! dequantizes every constant first. A weight that another operator also reads keeps
//! its f32 copy, and so does a depthwise weight (its kernel reads the values).

use tensorvault_formats::mobi::{
    models, ConstantTensor, DataType, Model, ModelBuilder, OperatorType, QuantTarget, WriteOptions,
};
use tensorvault_mobi_runtime::{Session, Tensor};

/// `m` with every fp16 / affine constant replaced by its dequantized f32 values: a
/// session of it dequantizes nothing, it packs the f32 values (the path before packed-only
/// weights).
fn dequantized(m: &Model) -> Model {
    let mut d = m.clone();
    for t in &mut d.tensors {
        if t.dtype != DataType::F32 && t.dtype != DataType::I64 && t.dtype != DataType::I32 {
            *t = ConstantTensor::from_f32(t.id, &t.shape, &t.to_f32().unwrap()).unwrap();
        }
    }
    d
}

fn ramp(shape: Vec<usize>) -> Tensor {
    let len = shape.iter().product::<usize>();
    let v = (0..len)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
        .collect();
    Tensor::f32(shape, v).unwrap()
}

fn bits(s: &Session, inputs: &[(&str, Tensor)]) -> Vec<Vec<u32>> {
    s.run(inputs)
        .unwrap()
        .iter()
        .map(|(_, t)| t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect())
        .collect()
}

#[test]
fn quantized_weights_are_packed_without_a_kept_copy_and_give_the_same_bits() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("lenet5", models::lenet5(4).unwrap(), vec![1usize, 28, 28]),
        ("cifar", models::cifar10_cnn(5).unwrap(), vec![3, 32, 32]),
    ];
    for (name, model, image) in cases {
        let input = model.inputs[0].name.clone();
        for target in [QuantTarget::Int8, QuantTarget::Fp16, QuantTarget::Int16] {
            let opts = WriteOptions {
                quantize: Some(target),
                gzip: false,
            };
            let path = dir.path().join(format!("{name}-{target:?}.mobi"));
            model.save(&path, &opts).unwrap();
            let q = Model::open(&path).unwrap();
            let s = Session::new(&q).unwrap();
            let mem = s.constant_memory();
            // Every byte is accounted for once: in place, converted and kept, or dropped.
            assert_eq!(
                mem.in_place_bytes + mem.converted_bytes + mem.dropped_bytes,
                4 * model.parameter_count(),
                "{name} {target:?}"
            );
            // The packed (non-depthwise) weights are converted ones: all dropped.
            let converted: u64 = q
                .tensors
                .iter()
                .filter(|t| t.dtype != DataType::F32)
                .map(|t| 4 * t.len())
                .sum();
            assert!(mem.dropped_bytes > 0, "{name} {target:?}");
            assert_eq!(mem.dropped_bytes + mem.converted_bytes, converted);
            assert!(mem.packed_bytes >= mem.dropped_bytes);
            if name == "lenet5" {
                // The mapped codes of its 400 x 120 fully-connected weights alone span
                // whole pages: given back once packed.
                assert!(mem.released_bytes >= 4096, "{target:?}");
            }
            let reference = Session::new(&dequantized(&q)).unwrap();
            assert_eq!(reference.constant_memory().dropped_bytes, 0);
            for n in [1, 3] {
                let mut shape = vec![n];
                shape.extend(&image);
                let x = [(input.as_str(), ramp(shape))];
                assert_eq!(
                    bits(&s, &x),
                    bits(&reference, &x),
                    "{name} {target:?} n={n}"
                );
            }
        }
    }
}

/// x [1, 4]; `w` (int8, [4, 4]) is FullyConnected's weights and MatMul's right operand.
fn shared_weight_model(share: bool) -> Model {
    let mut b = ModelBuilder::new("shared").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 4]);
    let values: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) / 4.0).collect();
    let wq = ConstantTensor::from_f32_per_channel_i8(0, &[4, 4], &values, 0).unwrap();
    let w = b.constant(wq.clone());
    let w2 = if share { w } else { b.constant(wq) };
    let bias = b.constant_f32(&[4], &[0.5, -0.5, 0.25, 0.0]).unwrap();
    let y = b.op(OperatorType::FullyConnected, &[x, w, bias], vec![]);
    let z = b.op(OperatorType::MatMul, &[x, w2], vec![]);
    let s = b.op(OperatorType::Add, &[y, z], vec![]);
    b.output("s", DataType::F32, &[1, 4], s);
    b.build().unwrap()
}

#[test]
fn a_weight_read_by_a_packed_and_an_unpacked_operator_keeps_its_values() {
    let x = [(
        "x",
        Tensor::f32(vec![1, 4], vec![1.0, -2.0, 0.5, 3.0]).unwrap(),
    )];
    let shared = shared_weight_model(true);
    let s = Session::new(&shared).unwrap();
    let mem = s.constant_memory();
    assert_eq!(mem.dropped_bytes, 0, "MatMul reads the values");
    assert_eq!(mem.converted_bytes, 64);
    assert!(mem.packed_bytes > 0, "FullyConnected still packs them");
    // Two copies of the constant: FullyConnected's is dropped, MatMul's kept.
    let apart = Session::new(&shared_weight_model(false)).unwrap();
    assert_eq!(apart.constant_memory().dropped_bytes, 64);
    assert_eq!(apart.constant_memory().converted_bytes, 64);
    let want = bits(&Session::new(&dequantized(&shared)).unwrap(), &x);
    assert_eq!(bits(&s, &x), want);
    assert_eq!(bits(&apart, &x), want);
    // And the value itself: x W^T + b + x W, from the dequantized weights.
    let w = shared.tensors[0].to_f32().unwrap();
    let xv = [1.0f32, -2.0, 0.5, 3.0];
    let b = [0.5f32, -0.5, 0.25, 0.0];
    let out = s.run(&x).unwrap();
    for (j, got) in out[0].1.as_f32().unwrap().iter().enumerate() {
        let fc: f32 = (0..4).map(|p| xv[p] * w[j * 4 + p]).sum::<f32>() + b[j];
        let mm: f32 = (0..4).map(|p| xv[p] * w[p * 4 + j]).sum();
        assert!((got - (fc + mm)).abs() < 1e-5, "{j}: {got} vs {}", fc + mm);
    }
}

#[test]
fn depthwise_and_thin_weights_keep_the_values_their_kernels_read() {
    // One input channel per group: the depthwise kernel reads the weights unpacked.
    let mut b = ModelBuilder::new("dw").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 2, 6, 6]);
    let values: Vec<f32> = (0..2 * 9).map(|i| (i as f32 - 8.0) / 8.0).collect();
    let w =
        b.constant(ConstantTensor::from_f32_per_channel_i8(0, &[2, 1, 3, 3], &values, 0).unwrap());
    let y = b.op(
        OperatorType::Conv2D,
        &[x, w],
        vec![(
            "group".into(),
            tensorvault_formats::mobi::ParamValue::Int(2),
        )],
    );
    b.output("y", DataType::F32, &[1, 2, 4, 4], y);
    let model = b.build().unwrap();
    let s = Session::new(&model).unwrap();
    let mem = s.constant_memory();
    assert_eq!((mem.dropped_bytes, mem.converted_bytes), (0, 4 * 18));
    let input = [("x", ramp(vec![1, 2, 6, 6]))];
    assert_eq!(
        bits(&s, &input),
        bits(&Session::new(&dequantized(&model)).unwrap(), &input)
    );
}
