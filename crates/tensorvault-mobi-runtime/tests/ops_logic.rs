//! ArgMax/ArgMin, comparisons, logic and Where: values checked against hand-computed
//! (numpy-equivalent) results, broadcasting, integer and f32 operands, bad operands
//! refused with typed errors.

mod common;

use common::{input, run, Arg};
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue as P};
use tensorvault_mobi_runtime::{RuntimeError, Tensor};

fn ints_in(shape: &[usize], v: &[i64]) -> Arg {
    Arg::In(Tensor::i64(shape.to_vec(), v.to_vec()).unwrap())
}

fn i64s(t: &Tensor) -> (&[usize], &[i64]) {
    (&t.shape, t.as_i64().expect("i64 output"))
}

#[test]
fn argmax_argmin_axis_keepdims_and_last_index() {
    // x [2, 3]: [[1, 5, 5], [7, -2, 7]]
    let x = || input(&[2, 3], &[1.0, 5.0, 5.0, 7.0, -2.0, 7.0]);
    let t = run(Op::ArgMax, vec![x()], vec![("axis", P::Int(1))]).unwrap();
    assert_eq!(i64s(&t), (&[2usize, 1][..], &[1i64, 0][..]));
    let t = run(
        Op::ArgMax,
        vec![x()],
        vec![("axis", P::Int(-1)), ("select_last_index", P::Int(1))],
    )
    .unwrap();
    assert_eq!(i64s(&t), (&[2usize, 1][..], &[2i64, 2][..]));
    let t = run(
        Op::ArgMin,
        vec![x()],
        vec![("axis", P::Int(0)), ("keepdims", P::Int(0))],
    )
    .unwrap();
    assert_eq!(i64s(&t), (&[3usize][..], &[0i64, 1, 0][..]));
    // Default axis 0, keepdims 1; integers compare exactly (2^53 + 1 > 2^53).
    let big = 1i64 << 53;
    let t = run(Op::ArgMax, vec![ints_in(&[2, 1], &[big + 1, big])], vec![]).unwrap();
    assert_eq!(i64s(&t), (&[1usize, 1][..], &[0i64][..]));
    // NaN wins, the first one stays (numpy).
    let t = run(
        Op::ArgMin,
        vec![input(&[4], &[3.0, f32::NAN, -1.0, f32::NAN])],
        vec![],
    )
    .unwrap();
    assert_eq!(i64s(&t).1, &[1]);
}

#[test]
fn argmax_refuses_an_axis_out_of_range_and_an_empty_axis() {
    let e = run(
        Op::ArgMax,
        vec![input(&[2, 3], &[0.0; 6])],
        vec![("axis", P::Int(2))],
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Param {
                key: "axis",
                value: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = run(
        Op::ArgMax,
        vec![input(&[2, 0], &[])],
        vec![("axis", P::Int(1))],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::Shape { .. }), "{e}");
}

#[test]
fn comparisons_broadcast_and_give_zero_one() {
    let a = || input(&[2, 3], &[1.0, 2.0, 3.0, 4.0, f32::NAN, 6.0]);
    let b = || input(&[3], &[2.0, 2.0, 2.0]);
    for (op, want) in [
        (Op::Equal, [0, 1, 0, 0, 0, 0]),
        (Op::Less, [1, 0, 0, 0, 0, 0]),
        (Op::Greater, [0, 0, 1, 1, 0, 1]),
        (Op::LessOrEqual, [1, 1, 0, 0, 0, 0]),
        (Op::GreaterOrEqual, [0, 1, 1, 1, 0, 1]),
    ] {
        let t = run(op, vec![a(), b()], vec![]).unwrap();
        assert_eq!(i64s(&t), (&[2usize, 3][..], &want[..]), "{op:?}");
    }
    // Integers compare as integers.
    let t = run(
        Op::Less,
        vec![ints_in(&[3], &[-5, 0, 9]), Arg::ConstI64(vec![1], vec![0])],
        vec![],
    )
    .unwrap();
    assert_eq!(i64s(&t).1, &[1, 0, 0]);
    // Mixed types are refused, naming the input.
    let e = run(
        Op::Equal,
        vec![a(), Arg::ConstI64(vec![1], vec![2])],
        vec![],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::DType { op: "Equal", .. }), "{e}");
    let e = run(Op::Equal, vec![a(), input(&[2], &[0.0, 0.0])], vec![]).unwrap_err();
    assert!(matches!(e, RuntimeError::Shape { op: "Equal", .. }), "{e}");
}

#[test]
fn not_and_or_xor_on_zero_one_values() {
    let a = || ints_in(&[4], &[0, 0, 1, 1]);
    let b = || ints_in(&[4], &[0, 1, 0, 1]);
    for (op, want) in [
        (Op::And, [0, 0, 0, 1]),
        (Op::Or, [0, 1, 1, 1]),
        (Op::Xor, [0, 1, 1, 0]),
    ] {
        let t = run(op, vec![a(), b()], vec![]).unwrap();
        assert_eq!(i64s(&t).1, &want, "{op:?}");
    }
    let t = run(Op::Not, vec![ints_in(&[2, 2], &[0, 1, 7, 0])], vec![]).unwrap();
    assert_eq!(i64s(&t), (&[2usize, 2][..], &[1i64, 0, 0, 1][..]));
    // Broadcast: [2, 1] and [3].
    let t = run(
        Op::And,
        vec![ints_in(&[2, 1], &[0, 1]), ints_in(&[3], &[1, 0, 1])],
        vec![],
    )
    .unwrap();
    assert_eq!(i64s(&t), (&[2usize, 3][..], &[0i64, 0, 0, 1, 0, 1][..]));
}

#[test]
fn where_selects_with_three_way_broadcasting() {
    // condition [2, 1], X [1, 3], Y scalar.
    let t = run(
        Op::Where,
        vec![
            ints_in(&[2, 1], &[1, 0]),
            input(&[1, 3], &[1.0, 2.0, 3.0]),
            input(&[], &[-1.0]),
        ],
        vec![],
    )
    .unwrap();
    common::close(&t, &[2, 3], &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0], 0.0);
    // Integer branches stay integers.
    let t = run(
        Op::Where,
        vec![
            ints_in(&[3], &[0, 1, 0]),
            ints_in(&[3], &[10, 20, 30]),
            ints_in(&[3], &[-1, -2, -3]),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(i64s(&t).1, &[-1, 20, -3]);
    let e = run(
        Op::Where,
        vec![
            ints_in(&[1], &[1]),
            input(&[1], &[1.0]),
            ints_in(&[1], &[1]),
        ],
        vec![],
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::DType { op: "Where", .. }), "{e}");
}

#[test]
fn cast_truncates_wraps_and_rounds_to_f16() {
    let x = || input(&[5], &[-2.7, 0.0, 300.9, f32::NAN, 1.0 / 3.0]);
    let to = |t: &str| vec![("to", P::Str(t.into()))];
    let t = run(Op::Cast, vec![x()], to("i64")).unwrap();
    assert_eq!(i64s(&t).1, &[-2, 0, 300, 0, 0]);
    let t = run(Op::Cast, vec![x()], to("u8")).unwrap();
    assert_eq!(i64s(&t).1, &[254, 0, 44, 0, 0]);
    let t = run(Op::Cast, vec![x()], to("i8")).unwrap();
    assert_eq!(i64s(&t).1, &[-2, 0, 44, 0, 0]);
    let t = run(Op::Cast, vec![x()], to("bool")).unwrap();
    assert_eq!(i64s(&t).1, &[1, 0, 1, 1, 1]);
    let t = run(Op::Cast, vec![x()], to("f16")).unwrap();
    let f = t.as_f32().unwrap();
    assert_eq!(f[4], 0.333_251_95, "1/3 rounded to f16");
    assert_eq!(f[2], 301.0);
    let t = run(Op::Cast, vec![ints_in(&[3], &[-1, 1 << 40, 7])], to("f32")).unwrap();
    assert_eq!(t.as_f32().unwrap(), &[-1.0, (1u64 << 40) as f32, 7.0]);
    let t = run(Op::Cast, vec![ints_in(&[2], &[-1, 1 << 32])], to("u32")).unwrap();
    assert_eq!(i64s(&t).1, &[4_294_967_295, 0]);
    // A target outside the table is refused by the reader's parameter check.
    let e = run(Op::Cast, vec![x()], to("f64")).unwrap_err();
    assert!(matches!(e, RuntimeError::Model(_)), "{e}");
}
