//! One-operator models for kernel tests.
#![allow(dead_code, reason = "each test file uses a subset")]

use tensorvault_formats::mobi::{ConstantTensor, DataType, ModelBuilder, OperatorType, ParamValue};
use tensorvault_mobi_runtime::{RuntimeError, Session, Tensor};

/// An operand: a runtime input or a constant.
pub enum Arg {
    In(Tensor),
    Const(Vec<u64>, Vec<f32>),
    ConstI64(Vec<u64>, Vec<i64>),
}

pub fn input(shape: &[usize], data: &[f32]) -> Arg {
    Arg::In(Tensor::f32(shape.to_vec(), data.to_vec()).unwrap())
}

pub fn konst(shape: &[u64], data: &[f32]) -> Arg {
    Arg::Const(shape.to_vec(), data.to_vec())
}

pub fn ints(v: &[i64]) -> ParamValue {
    ParamValue::Ints(v.to_vec())
}

/// Run `op` on `args` with `params`, `n_out` outputs.
pub fn run_n(
    op: OperatorType,
    args: Vec<Arg>,
    params: Vec<(&str, ParamValue)>,
    n_out: usize,
) -> Result<Vec<Tensor>, RuntimeError> {
    let mut b = ModelBuilder::new("one-op");
    let mut vals = Vec::new();
    let mut feeds = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        match a {
            Arg::In(t) => {
                let name = format!("in{i}");
                let dt = if t.as_i64().is_some() {
                    DataType::I64
                } else {
                    DataType::F32
                };
                let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
                vals.push(b.input(name.clone(), dt, &shape));
                feeds.push((name, t));
            }
            Arg::Const(s, d) => vals.push(b.constant_f32(&s, &d).unwrap()),
            Arg::ConstI64(s, d) => vals.push(b.constant(ConstantTensor {
                id: 0,
                dtype: DataType::I64,
                shape: s,
                quant: None,
                gzip: false,
                data: d.iter().flat_map(|v| v.to_le_bytes()).collect(),
            })),
        }
    }
    let params = params
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let outs = b.op_n(op, &vals, n_out, params);
    for (j, o) in outs.into_iter().enumerate() {
        b.output(format!("out{j}"), DataType::F32, &[], o);
    }
    let model = b.build().unwrap();
    let s = Session::new(&model)?;
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    Ok(s.run(&feeds)?.into_iter().map(|(_, t)| t).collect())
}

pub fn run(
    op: OperatorType,
    args: Vec<Arg>,
    params: Vec<(&str, ParamValue)>,
) -> Result<Tensor, RuntimeError> {
    Ok(run_n(op, args, params, 1)?.remove(0))
}

#[track_caller]
pub fn close(t: &Tensor, shape: &[usize], want: &[f32], tol: f32) {
    assert_eq!(t.shape, shape, "shape");
    let got = t.as_f32().expect("f32 output");
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w} (all: {got:?})");
    }
}
