//! Sub-batch execution: a per-image graph run in slices of images gives bitwise the
//! outputs of one run over the whole batch; a graph that mixes images runs whole.

use proptest::prelude::*;
use tensorvault_formats::mobi::{models, DataType, Model, ModelBuilder, OperatorType as Op};
use tensorvault_formats::mobi::{ParamValue, Value};
use tensorvault_mobi_runtime::{Limits, RuntimeError, Session, Tensor};

fn ints(v: &[i64]) -> ParamValue {
    ParamValue::Ints(v.to_vec())
}

/// Deterministic weights in [-0.5, 0.5).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn conv(b: &mut ModelBuilder, r: &mut Rng, x: Value, dw: bool, shape: [u64; 4], s: i64) -> Value {
    let n = shape.iter().product::<u64>() as usize;
    let w = b.constant_f32(&shape, &r.vec(n)).unwrap();
    let bias = b
        .constant_f32(&[shape[0]], &r.vec(shape[0] as usize))
        .unwrap();
    let p = (shape[2] / 2) as i64;
    let params = vec![
        ("stride".to_string(), ints(&[s, s])),
        ("padding".to_string(), ints(&[p, p, p, p])),
    ];
    let op = if dw { Op::DepthwiseConv2D } else { Op::Conv2D };
    b.op(op, &[x, w, bias], params)
}

fn relu6(b: &mut ModelBuilder, x: Value) -> Value {
    let params = vec![
        ("min".to_string(), ParamValue::Float(0.0)),
        ("max".to_string(), ParamValue::Float(6.0)),
    ];
    b.op(Op::Clip, &[x], params)
}

/// An EfficientNet-shaped network: stem conv (stride 2) + ReLU6, a depthwise 3x3 +
/// ReLU6, a 1x1 projection with a residual Add, an expand 1x1, a depthwise 5x5 stride 2,
/// global average pool, flatten, fully connected, softmax; plus a second output taken
/// from the middle (an ArgMax over the channels).
fn effnet_like(seed: u64) -> Model {
    let mut r = Rng(seed);
    let mut b = ModelBuilder::new("effnet-like");
    let x = b.input("image", DataType::F32, &[1, 3, 13, 11]);
    let y = conv(&mut b, &mut r, x, false, [8, 3, 3, 3], 2);
    let y = relu6(&mut b, y);
    let d = conv(&mut b, &mut r, y, true, [8, 1, 3, 3], 1);
    let d = relu6(&mut b, d);
    let p = conv(&mut b, &mut r, d, false, [8, 8, 1, 1], 1);
    let y = b.op(Op::Add, &[p, y], vec![]);
    let e = conv(&mut b, &mut r, y, false, [16, 8, 1, 1], 1);
    let e = relu6(&mut b, e);
    let d = conv(&mut b, &mut r, e, true, [16, 1, 5, 5], 2);
    let d = b.op(Op::Relu, &[d], vec![]);
    let g = b.op(Op::GlobalAveragePool, &[d], vec![]);
    let f = b.op(Op::Flatten, &[g], vec![("axis".into(), ParamValue::Int(1))]);
    let w = b.constant_f32(&[10, 16], &r.vec(160)).unwrap();
    let bias = b.constant_f32(&[10], &r.vec(10)).unwrap();
    let fc = b.op(Op::FullyConnected, &[f, w, bias], vec![]);
    let sm = b.op(
        Op::Softmax,
        &[fc],
        vec![("axis".into(), ParamValue::Int(-1))],
    );
    b.output("probabilities", DataType::F32, &[1, 10], sm);
    let am = b.op(Op::ArgMax, &[e], vec![("axis".into(), ParamValue::Int(1))]);
    b.output("argmax", DataType::I64, &[1, 1, 7, 6], am);
    b.build().unwrap()
}

fn session(model: &Model, sub_batch_elements: u64) -> Session {
    let limits = Limits {
        sub_batch_elements,
        ..Limits::default()
    };
    Session::with_limits(model, limits).unwrap()
}

fn batch(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::f32(
        shape.to_vec(),
        Rng(seed).vec(n).iter().map(|v| 4.0 * v).collect(),
    )
    .unwrap()
}

/// Bitwise equality of every output (f32 compared by bits, so -0.0 and NaN count).
fn assert_bitwise(a: &[(String, Tensor)], b: &[(String, Tensor)]) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!((na, &ta.shape), (nb, &tb.shape));
        match (ta.as_f32(), tb.as_f32()) {
            (Some(x), Some(y)) => {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(x), bits(y), "output {na}");
            }
            _ => assert_eq!(ta.as_i64(), tb.as_i64(), "output {na}"),
        }
    }
}

#[test]
fn the_rule_accepts_cnns_and_refuses_batch_mixing() {
    assert!(session(&effnet_like(1), 1 << 18).per_image());
    assert!(Session::new(&models::lenet5(1).unwrap())
        .unwrap()
        .per_image());
    assert!(Session::new(&models::cifar10_cnn(1).unwrap())
        .unwrap()
        .per_image());

    // A reshape to [-1, k] may move images across rows; a reduction over axis 0 and a
    // MatMul of two run-time values mix them.
    let mut b = ModelBuilder::new("flat");
    let x = b.input("x", DataType::F32, &[1, 4]);
    let y = b.op(Op::Reshape, &[x], vec![("shape".into(), ints(&[-1, 2]))]);
    b.output("y", DataType::F32, &[2, 2], y);
    assert!(!Session::new(&b.build().unwrap()).unwrap().per_image());

    let mut b = ModelBuilder::new("reduce0");
    let x = b.input("x", DataType::F32, &[1, 4]);
    let y = b.op(Op::ReduceSum, &[x], vec![("axes".into(), ints(&[0]))]);
    b.output("y", DataType::F32, &[1, 4], y);
    assert!(!Session::new(&b.build().unwrap()).unwrap().per_image());

    let mut b = ModelBuilder::new("gram");
    let x = b.input("x", DataType::F32, &[1, 4]);
    let t = b.op(Op::Transpose, &[x], vec![("perm".into(), ints(&[1, 0]))]);
    let y = b.op(Op::MatMul, &[x, t], vec![]);
    b.output("y", DataType::F32, &[1, 1], y);
    assert!(!Session::new(&b.build().unwrap()).unwrap().per_image());

    // A constant with the batch size on axis 0 broadcast against a batched value.
    let mut b = ModelBuilder::new("rowconst");
    let x = b.input("x", DataType::F32, &[3, 2]);
    let c = b
        .constant_f32(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    let y = b.op(Op::Add, &[x, c], vec![]);
    b.output("y", DataType::F32, &[3, 2], y);
    let s = Session::new(&b.build().unwrap()).unwrap();
    assert!(!s.per_image());
    let out = s.run(&[("x", batch(&[3, 2], 9))]).unwrap();
    let want: Vec<f32> = batch(&[3, 2], 9)
        .as_f32()
        .unwrap()
        .iter()
        .zip([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .map(|(a, b)| a + b)
        .collect();
    assert_eq!(out[0].1.as_f32().unwrap(), want.as_slice(), "ran whole");
}

#[test]
fn a_graph_that_mixes_images_gives_the_whole_batch_result() {
    // Reduce over the batch axis: sliced runs would give per-slice sums.
    let mut b = ModelBuilder::new("reduce0");
    let x = b.input("x", DataType::F32, &[1, 2]);
    let y = b.op(Op::ReduceSum, &[x], vec![("axes".into(), ints(&[0]))]);
    b.output("y", DataType::F32, &[1, 2], y);
    let s = session(&b.build().unwrap(), 1);
    let x = Tensor::f32(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let out = s.run(&[("x", x)]).unwrap();
    assert_eq!(out[0].1.as_f32().unwrap(), &[9.0, 12.0]);
}

#[test]
fn real_cnns_in_slices_match_one_run() {
    let nets = [
        (models::lenet5(3).unwrap(), 1, 28),
        (models::cifar10_cnn(4).unwrap(), 3, 32),
    ];
    for (model, c, side) in nets {
        let x = batch(&[7, c, side, side], 11);
        let whole = session(&model, 0).run(&[("image", x.clone())]).unwrap();
        // One image per slice, then a few.
        for budget in [1, 3 * 32 * 32 * 2, 1 << 18] {
            let sliced = session(&model, budget)
                .run(&[("image", x.clone())])
                .unwrap();
            assert_bitwise(&whole, &sliced);
        }
    }
}

#[test]
fn an_error_names_the_batch_shapes_not_a_slice() {
    // FullyConnected with weights for 5 features on a 4-feature input: the Shape error
    // shows the whole batch's input shape.
    let mut b = ModelBuilder::new("bad-fc");
    let x = b.input("x", DataType::F32, &[1, 4]);
    let w = b.constant_f32(&[3, 5], &[0.5; 15]).unwrap();
    let y = b.op(Op::FullyConnected, &[x, w], vec![]);
    b.output("y", DataType::F32, &[1, 3], y);
    let s = session(&b.build().unwrap(), 1);
    assert!(s.per_image());
    let e = s.run(&[("x", batch(&[6, 4], 3))]).unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Shape { index: 0, shape, .. } if shape == &vec![6, 4]),
        "{e:?}"
    );
}

#[test]
fn outputs_over_the_element_limit_are_refused_as_for_one_run() {
    // Concat doubles each image (8 -> 16 elements): 3 images give a 48-element output
    // over the 32-element limit, though the input (24) and every slice fit.
    let mut b = ModelBuilder::new("big-out");
    let x = b.input("x", DataType::F32, &[1, 8]);
    let y = b.op(
        Op::Concat,
        &[x, x],
        vec![("axis".into(), ParamValue::Int(1))],
    );
    b.output("y", DataType::F32, &[1, 16], y);
    let limits = Limits {
        max_elements: 32,
        sub_batch_elements: 1,
    };
    let s = Session::with_limits(&b.build().unwrap(), limits).unwrap();
    assert!(s.per_image());
    let two = s.run(&[("x", batch(&[2, 8], 1))]).unwrap();
    assert_eq!(two[0].1.shape, vec![2, 16]);
    let e = s.run(&[("x", batch(&[3, 8], 1))]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::TooLarge { index: 0, .. }),
        "{e:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn slices_are_bitwise_the_whole_batch(
        n in 1usize..10,
        seed in 0u64..1000,
        budget in prop_oneof![Just(1u64), 100u64..3000, Just(1 << 18)],
    ) {
        let model = effnet_like(seed);
        let x = batch(&[n, 3, 13, 11], seed + 7);
        let whole = session(&model, 0).run(&[("image", x.clone())]).unwrap();
        let sliced = session(&model, budget).run(&[("image", x)]).unwrap();
        prop_assert_eq!(&whole[0].1.shape, &vec![n, 10]);
        prop_assert_eq!(&whole[1].1.shape, &vec![n, 1, 7, 6]);
        assert_bitwise(&whole, &sliced);
    }
}
