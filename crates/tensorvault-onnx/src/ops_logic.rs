//! Lowerings of ArgMax / ArgMin, the comparisons (Equal, Less, Greater, LessOrEqual,
//! GreaterOrEqual), the logic ops (Not, And, Or, Xor), Where and Cast. MOBI has no boolean
//! values at run time: ONNX BOOL outputs are i64 0/1 (any non-zero value is true), so a
//! comparison's output is an i64 value and a BOOL graph output is declared i64.

use tensorvault_formats::mobi::{DataType, OperatorType as Op};

use crate::ctx::{Ctx, Dyn, Val};
use crate::error::OnnxError;
use crate::limits::dtype as dt;
use crate::node::Node;
use crate::params::{int, string};
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

/// Cast of a run-time value to ONNX type `to` (a same-type Cast was already removed):
/// MOBI Cast with `to` the MOBI name; FLOAT and DOUBLE become `f32`, FLOAT16 `f16`
/// (values rounded to f16 and carried as f32), the integer types and BOOL their own
/// width (carried as i64). BFLOAT16, the 8/4-bit floats and strings are refused.
pub(crate) fn cast_to(ctx: &mut Ctx, n: &Node, x: Dyn, to: i64) -> Result<(), OnnxError> {
    let name = match i32::try_from(to).unwrap_or(-1) {
        dt::FLOAT | dt::DOUBLE => "f32",
        dt::FLOAT16 => "f16",
        dt::INT64 | dt::UINT64 => "i64",
        dt::INT32 => "i32",
        dt::UINT32 => "u32",
        dt::INT16 => "i16",
        dt::UINT16 => "u16",
        dt::INT8 => "i8",
        dt::UINT8 => "u8",
        dt::BOOL => "bool",
        _ => {
            return Err(n.unsupported(
                "to",
                to,
                "MOBI casts to float, float16, double and the integer and bool types only",
            ))
        }
    };
    let dtype = if matches!(name, "f32" | "f16") {
        DataType::F32
    } else {
        DataType::I64
    };
    let d = ctx.emit_tmp(Op::Cast, &[x.v], vec![string("to", name)], x.shape.clone());
    define(ctx, n, d, dtype);
    Ok(())
}
