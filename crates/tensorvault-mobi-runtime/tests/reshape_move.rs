//! A reshape (Flatten, Reshape, ...) takes over its input's buffer when no later
//! operator reads it, and copies otherwise: both give the same values.

use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType as Op, ParamValue};
use tensorvault_mobi_runtime::{Session, Tensor};

/// x -> Relu -> a; Flatten(a) -> f; with `reread`, also Neg(a) -> g (a read after the
/// Flatten, so it must not be moved away).
fn run(reread: bool) -> Vec<(String, Tensor)> {
    let mut b = ModelBuilder::new("reshape-move");
    let x = b.input("x", DataType::F32, &[2, 3]);
    let a = b.op(Op::Relu, &[x], vec![]);
    let f = b.op(Op::Flatten, &[a], vec![("axis".into(), ParamValue::Int(0))]);
    b.output("f", DataType::F32, &[1, 6], f);
    if reread {
        let g = b.op(Op::Neg, &[a], vec![]);
        b.output("g", DataType::F32, &[2, 3], g);
    }
    let s = Session::new(&b.build().unwrap()).unwrap();
    let x = Tensor::f32(vec![2, 3], vec![-1.0, 2.0, -3.0, 4.0, 5.0, -6.0]).unwrap();
    // Twice: the second run reuses the pooled buffers of the first.
    s.run(&[("x", x.clone())]).unwrap();
    s.run(&[("x", x)]).unwrap()
}

#[test]
fn moved_and_copied_reshapes_agree() {
    let want = [0.0, 2.0, 0.0, 4.0, 5.0, 0.0];
    let only = run(false);
    assert_eq!(only[0].1.shape, vec![1, 6]);
    assert_eq!(only[0].1.as_f32().unwrap(), &want);
    let both = run(true);
    assert_eq!(both[0].1.as_f32().unwrap(), &want);
    assert_eq!(both[1].1.shape, vec![2, 3]);
    let neg: Vec<f32> = want.iter().map(|v| -v).collect();
    assert_eq!(both[1].1.as_f32().unwrap(), neg.as_slice());
}
