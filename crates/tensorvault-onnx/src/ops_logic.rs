//! Lowerings of ArgMax / ArgMin, the comparisons (Equal, Less, Greater, LessOrEqual,
//! GreaterOrEqual), the logic ops (Not, And, Or, Xor) and Where. MOBI has no boolean
//! values at run time: ONNX BOOL outputs are i64 0/1 (any non-zero value is true), so a
//! comparison's output is an i64 value and a BOOL graph output is declared i64.

use tensorvault_formats::mobi::{DataType, OperatorType as Op};

use crate::ctx::{Ctx, Dyn, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::int;
use crate::shape::{axis, broadcast};

fn out<'a>(n: &Node<'a>) -> &'a str {
    n.output(0).unwrap_or_default()
}

/// Define the node's output as `d` with element type `dtype`.
fn define(ctx: &mut Ctx, n: &Node, mut d: Dyn, dtype: DataType) {
    d.dtype = dtype;
    ctx.set(out(n), Val::Dyn(d));
}

fn is_int(d: &Dyn) -> bool {
    matches!(d.dtype, DataType::I64 | DataType::I32 | DataType::Bool)
}

/// ArgMax / ArgMin: `axis` (default 0, negative from opset 11), `keepdims` (default 1),
/// `select_last_index` (opset 12+, default 0); i64 output.
pub(crate) fn arg_extreme(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let op = if n.op() == "ArgMax" {
        Op::ArgMax
    } else {
        Op::ArgMin
    };
    let x = ctx.dyn_in(n, 0)?;
    let rank = x.shape.len().max(1);
    let raw = n.int_or("axis", 0)?;
    if raw < 0 && ctx.opset < 11 {
        return Err(n.unsupported("axis", raw, "negative axes need opset 11"));
    }
    let a = axis(n, "axis", raw, rank)?;
    let keep = n.int_or("keepdims", 1)? != 0;
    let last = n.int_or("select_last_index", 0)?;
    if last != 0 && ctx.opset < 12 {
        return Err(n.unsupported("select_last_index", last, "needs opset 12"));
    }
    let dims = if x.shape.is_empty() {
        vec![1]
    } else {
        x.shape.clone()
    };
    if dims[a] == 0 {
        return Err(n.shape_err(format!("axis {a} of {:?} is empty", x.shape)));
    }
    let mut shape = dims;
    if keep {
        shape[a] = 1;
    } else {
        shape.remove(a);
    }
    if x.shape.is_empty() {
        shape.clear();
    }
    let params = vec![
        int("axis", a as i64),
        int("keepdims", i64::from(keep)),
        int("select_last_index", i64::from(last != 0)),
    ];
    let d = ctx.emit_tmp(op, &[x.v], params, shape);
    define(ctx, n, d, DataType::I64);
    Ok(())
}

/// The comparisons and And / Or / Xor: two inputs of one type, broadcasting; i64 0/1.
pub(crate) fn binary(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let op = match n.op() {
        "Equal" => Op::Equal,
        "Less" => Op::Less,
        "Greater" => Op::Greater,
        "LessOrEqual" => Op::LessOrEqual,
        "GreaterOrEqual" => Op::GreaterOrEqual,
        "And" => Op::And,
        "Or" => Op::Or,
        _ => Op::Xor,
    };
    let a = ctx.dyn_in(n, 0)?;
    let b = ctx.dyn_in(n, 1)?;
    if is_int(&a) != is_int(&b) {
        return Err(n.shape_err(format!(
            "operands of different types ({} and {})",
            a.dtype.name(),
            b.dtype.name()
        )));
    }
    let Some(shape) = broadcast(&a.shape, &b.shape) else {
        return Err(n.shape_err(format!("{:?} and {:?} do not broadcast", a.shape, b.shape)));
    };
    let d = ctx.emit_tmp(op, &[a.v, b.v], vec![], shape);
    define(ctx, n, d, DataType::I64);
    Ok(())
}

/// Not: i64 0/1.
pub(crate) fn not(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let x = ctx.dyn_in(n, 0)?;
    let d = ctx.emit_tmp(Op::Not, &[x.v], vec![], x.shape.clone());
    define(ctx, n, d, DataType::I64);
    Ok(())
}

/// Where(condition, X, Y): the three broadcast together; the output has X's type.
pub(crate) fn where_(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(3, 3, "3")?;
    let c = ctx.dyn_in(n, 0)?;
    let x = ctx.dyn_in(n, 1)?;
    let y = ctx.dyn_in(n, 2)?;
    if is_int(&x) != is_int(&y) {
        return Err(n.shape_err(format!(
            "X and Y of different types ({} and {})",
            x.dtype.name(),
            y.dtype.name()
        )));
    }
    let Some(shape) = broadcast(&c.shape, &x.shape).and_then(|s| broadcast(&s, &y.shape)) else {
        return Err(n.shape_err(format!(
            "{:?}, {:?} and {:?} do not broadcast",
            c.shape, x.shape, y.shape
        )));
    };
    let dtype = if is_int(&x) {
        DataType::I64
    } else {
        DataType::F32
    };
    let d = ctx.emit_tmp(Op::Where, &[c.v, x.v, y.v], vec![], shape);
    define(ctx, n, d, dtype);
    Ok(())
}
