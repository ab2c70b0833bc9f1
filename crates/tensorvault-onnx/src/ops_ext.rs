//! Lowerings onto MOBI's extended operator table (docs/formats/mobi.md, "Operator
//! semantics"): elementwise unary ops with their ONNX attributes, Pow and PRelu, the
//! variadic Sum / Mean / Max / Min, the Reduce family, LayerNormalization.

use tensorvault_formats::mobi::{OperatorType as Op, ParamValue};

use crate::ctx::{Ctx, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{float, int, ints, string};
use crate::shape::{axis, broadcast};

/// A float ONNX attribute copied to a MOBI parameter of the same name, with the ONNX
/// default.
type FloatAttr = (&'static str, f32);

/// ONNX elementwise unary op type -> MOBI op and its float attributes.
fn unary_op(op: &str) -> Option<(Op, &'static [FloatAttr])> {
    Some(match op {
        "Relu" => (Op::Relu, &[]),
        "Sigmoid" => (Op::Sigmoid, &[]),
        "Tanh" => (Op::Tanh, &[]),
        "LeakyRelu" => (Op::LeakyRelu, &[("alpha", 0.01)]),
        "HardSigmoid" => (Op::HardSigmoid, &[("alpha", 0.2), ("beta", 0.5)]),
        "HardSwish" => (Op::HardSwish, &[]),
        "Elu" => (Op::Elu, &[("alpha", 1.0)]),
        "Selu" => (Op::Selu, &[("alpha", 1.673_263_2), ("gamma", 1.050_701)]),
        "Celu" => (Op::Celu, &[("alpha", 1.0)]),
        "ThresholdedRelu" => (Op::ThresholdedRelu, &[("alpha", 1.0)]),
        "Shrink" => (Op::Shrink, &[("bias", 0.0), ("lambd", 0.5)]),
        "Gelu" => (Op::Gelu, &[]),
        "Erf" => (Op::Erf, &[]),
        "Exp" => (Op::Exp, &[]),
        "Log" => (Op::Log, &[]),
        "Sqrt" => (Op::Sqrt, &[]),
        "Reciprocal" => (Op::Reciprocal, &[]),
        "Neg" => (Op::Neg, &[]),
        "Abs" => (Op::Abs, &[]),
        "Floor" => (Op::Floor, &[]),
        "Ceil" => (Op::Ceil, &[]),
        "Sin" => (Op::Sin, &[]),
        "Cos" => (Op::Cos, &[]),
        "Tan" => (Op::Tan, &[]),
        "Asin" => (Op::Asin, &[]),
        "Acos" => (Op::Acos, &[]),
        "Atan" => (Op::Atan, &[]),
        "Sinh" => (Op::Sinh, &[]),
        "Cosh" => (Op::Cosh, &[]),
        "Asinh" => (Op::Asinh, &[]),
        "Acosh" => (Op::Acosh, &[]),
        "Atanh" => (Op::Atanh, &[]),
        "Sign" => (Op::Sign, &[]),
        "Round" => (Op::Round, &[]),
        "Softsign" => (Op::Softsign, &[]),
        "Softplus" => (Op::Softplus, &[]),
        "Mish" => (Op::Mish, &[]),
        _ => return None,
    })
}

/// The ONNX op types [`unary`] lowers.
pub(crate) const UNARY: &[&str] = &[
    "Relu",
    "Sigmoid",
    "Tanh",
    "LeakyRelu",
    "HardSigmoid",
    "HardSwish",
    "Elu",
    "Selu",
    "Celu",
    "ThresholdedRelu",
    "Shrink",
    "Gelu",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Neg",
    "Abs",
    "Floor",
    "Ceil",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Sign",
    "Round",
    "Softsign",
    "Softplus",
    "Mish",
];

/// Elementwise unary ops: the same MOBI op, its float attributes as parameters (ONNX
/// defaults written out), Gelu's `approximate`.
pub(crate) fn unary(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let Some((op, attrs)) = unary_op(n.op()) else {
        return Err(OnnxError::UnsupportedOp {
            op: n.op().into(),
            node: n.name(),
            domain: String::new(),
            why: "not an elementwise unary op",
        });
    };
    let mut params = Vec::new();
    for &(name, default) in attrs {
        params.push(float(name, f64::from(n.float_or(name, default)?)));
    }
    if op == Op::Gelu {
        let a = n.string("approximate")?.unwrap_or_else(|| "none".into());
        if a != "none" && a != "tanh" {
            return Err(n.unsupported("approximate", a, "expected \"none\" or \"tanh\""));
        }
        params.push(string("approximate", &a));
    }
    let x = ctx.dyn_in(n, 0)?;
    ctx.emit(op, &[x.v], params, n.output(0).unwrap_or_default(), x.shape);
    Ok(())
}

/// Pow (numpy broadcasting) and PRelu (slope broadcast to X).
pub(crate) fn pow_prelu(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let a = ctx.dyn_in(n, 0)?;
    let b = ctx.dyn_in(n, 1)?;
    let (op, shape) = if n.op() == "PRelu" {
        let ok = broadcast(&a.shape, &b.shape).is_some_and(|s| s == a.shape);
        (Op::PRelu, ok.then(|| a.shape.clone()))
    } else {
        (Op::Pow, broadcast(&a.shape, &b.shape))
    };
    let Some(shape) = shape else {
        return Err(n.shape_err(format!("{:?} and {:?} do not broadcast", a.shape, b.shape)));
    };
    ctx.emit(
        op,
        &[a.v, b.v],
        vec![],
        n.output(0).unwrap_or_default(),
        shape,
    );
    Ok(())
}

/// Sum / Mean / Max / Min of one or more inputs with broadcasting.
pub(crate) fn variadic(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, usize::from(u16::MAX), "1 or more")?;
    let op = match n.op() {
        "Sum" => Op::Sum,
        "Mean" => Op::Mean,
        "Max" => Op::Max,
        _ => Op::Min,
    };
    let mut vals = Vec::new();
    let mut shape: Vec<u64> = Vec::new();
    for i in 0..n.proto.input.len() {
        let d = ctx.dyn_in(n, i)?;
        shape = broadcast(&shape, &d.shape)
            .ok_or_else(|| n.shape_err(format!("{shape:?} and {:?} do not broadcast", d.shape)))?;
        vals.push(d.v);
    }
    ctx.emit(op, &vals, vec![], n.output(0).unwrap_or_default(), shape);
    Ok(())
}

/// The reduce ops and the opset from which their `axes` is an input, not an attribute.
const REDUCE: &[(&str, Op, i64)] = &[
    ("ReduceMean", Op::ReduceMean, 18),
    ("ReduceSum", Op::ReduceSum, 13),
    ("ReduceMax", Op::ReduceMax, 18),
    ("ReduceMin", Op::ReduceMin, 18),
    ("ReduceProd", Op::ReduceProd, 18),
    ("ReduceL1", Op::ReduceL1, 18),
    ("ReduceL2", Op::ReduceL2, 18),
    ("ReduceSumSquare", Op::ReduceSumSquare, 18),
    ("ReduceLogSum", Op::ReduceLogSum, 18),
    ("ReduceLogSumExp", Op::ReduceLogSumExp, 18),
];

/// The ONNX op types [`reduce`] lowers.
pub(crate) fn reduce_ops() -> impl Iterator<Item = &'static str> {
    REDUCE.iter().map(|(name, _, _)| *name)
}

/// ReduceX: axes from the attribute (before the op's input opset) or the constant input,
/// normalized; `keepdims` and `noop_with_empty_axes` written out.
pub(crate) fn reduce(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 2, "1..=2")?;
    let Some(&(_, op, input_since)) = REDUCE.iter().find(|(name, _, _)| *name == n.op()) else {
        return Err(n.missing("axes"));
    };
    let x = ctx.dyn_in(n, 0)?;
    let rank = x.shape.len();
    let raw = if ctx.opset >= input_since {
        match ctx.has_input(n, 1) {
            true => Some(ctx.need_const(n, 1)?.to_i64()),
            false => None,
        }
    } else {
        n.ints("axes")?
    };
    let keep = n.int_or("keepdims", 1)? != 0;
    let noop = n.int_or("noop_with_empty_axes", 0)? != 0;
    let mut axes = Vec::new();
    for a in raw.unwrap_or_default() {
        let a = axis(n, "axes", a, rank)?;
        if axes.contains(&a) {
            return Err(n.unsupported("axes", a, "repeated axis"));
        }
        axes.push(a);
    }
    axes.sort_unstable();
    let out = n.output(0).unwrap_or_default();
    if axes.is_empty() && noop {
        ctx.set(out, Val::Dyn(x));
        ctx.stats.removed += 1;
        return Ok(());
    }
    let all = axes.is_empty();
    let shape: Vec<u64> = (0..rank)
        .filter_map(|i| match all || axes.contains(&i) {
            true if keep => Some(1),
            true => None,
            false => Some(x.shape[i]),
        })
        .collect();
    let axes_u: Vec<u64> = if all {
        (0..rank as u64).collect()
    } else {
        axes.iter().map(|&a| a as u64).collect()
    };
    let params = vec![ints("axes", &axes_u), int("keepdims", i64::from(keep))];
    ctx.emit(op, &[x.v], params, out, shape);
    Ok(())
}

/// LayerNormalization (opset 17) -> LayerNorm; only the Y output.
pub(crate) fn layer_norm(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 3, "2..=3")?;
    if n.output(1).is_some_and(|o| ctx.uses(o) > 0) || n.output(2).is_some_and(|o| ctx.uses(o) > 0)
    {
        return Err(n.unsupported(
            "Mean/InvStdDev",
            "outputs 1-2",
            "MOBI LayerNorm computes Y only",
        ));
    }
    let x = ctx.dyn_in(n, 0)?;
    let a = axis(n, "axis", n.int_or("axis", -1)?, x.shape.len())?;
    let mut vals = vec![x.v, ctx.dyn_in(n, 1)?.v];
    if ctx.has_input(n, 2) {
        vals.push(ctx.dyn_in(n, 2)?.v);
    }
    let params = vec![
        int("axis", a as i64),
        float("epsilon", f64::from(n.float_or("epsilon", 1e-5)?)),
    ];
    ctx.emit(
        Op::LayerNorm,
        &vals,
        params,
        n.output(0).unwrap_or_default(),
        x.shape,
    );
    Ok(())
}

/// Clip with constant bounds (attributes before opset 11, inputs after): min 0 and no max
/// is Relu, anything else Clip with `min` / `max`.
pub(crate) fn clip(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 3, "1..=3")?;
    let (min, max) = if ctx.opset < 11 {
        (n.float("min")?, n.float("max")?)
    } else {
        let get = |i| -> Result<Option<f32>, OnnxError> {
            if !ctx.has_input(n, i) {
                return Ok(None);
            }
            let c = ctx.need_const(n, i)?;
            match c.to_f32().as_slice() {
                [v] => Ok(Some(*v)),
                _ => Err(n.shape_err(format!(
                    "bound {i} has shape {:?}, Clip takes scalars",
                    c.shape
                ))),
            }
        };
        (get(1)?, get(2)?)
    };
    let x = ctx.dyn_in(n, 0)?;
    let out = n.output(0).unwrap_or_default();
    if min == Some(0.0) && max.is_none_or(|m| m == f32::INFINITY) {
        ctx.emit(Op::Relu, &[x.v], vec![], out, x.shape);
        return Ok(());
    }
    let lo = min.map_or(f64::NEG_INFINITY, f64::from);
    let hi = max.map_or(f64::INFINITY, f64::from);
    if lo.is_nan() || hi.is_nan() {
        return Err(n.unsupported("min/max", format!("{lo}/{hi}"), "NaN bounds"));
    }
    let params: Vec<(String, ParamValue)> = vec![float("min", lo), float("max", hi)];
    ctx.emit(Op::Clip, &[x.v], params, out, x.shape);
    Ok(())
}
