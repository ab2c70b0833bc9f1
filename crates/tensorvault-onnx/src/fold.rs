//! Constant folding: a node whose inputs are all constants is evaluated at import time
//! (shape subgraphs such as Shape -> Gather -> Unsqueeze -> Concat -> Reshape, weight
//! transposes, casts of initializers). Every result is bounded by the tensor limit before
//! it is allocated.

use std::rc::Rc;

use crate::ctx::{Ctx, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::ops_tensor::{
    axes_arg, flatten_shape, perm, reshape_spec, squeeze_shape, unsqueeze_shape,
};
use crate::shape::{axis, broadcast, product};
use crate::slicing::{self, SlicePlan};
use crate::tensor::{check_elements, Const, Data};

/// Ops this module can evaluate.
pub const FOLDABLE: &[&str] = &[
    "Identity",
    "Cast",
    "CastLike",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Neg",
    "Sqrt",
    "Reciprocal",
    "Relu",
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Concat",
    "Reshape",
    "Flatten",
    "Transpose",
    "Slice",
];

fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Copy elements: output flat index -> input flat index given by `map`.
fn gather_by<F: Fn(usize) -> usize>(d: &Data, n: usize, map: F) -> Data {
    match d {
        Data::F32(v) => Data::F32((0..n).map(|i| v[map(i)]).collect()),
        Data::I64(v) => Data::I64((0..n).map(|i| v[map(i)]).collect()),
    }
}

fn with_shape(c: &Const, shape: Vec<u64>) -> Const {
    Const {
        shape,
        data: c.data.clone(),
        dtype: c.dtype,
    }
}

fn elementwise(n: &Node, a: &Const, b: &Const) -> Result<Const, OnnxError> {
    let Some(shape) = broadcast(&a.shape, &b.shape) else {
        return Err(n.shape_err(format!("{:?} and {:?} do not broadcast", a.shape, b.shape)));
    };
    let total = product(&shape);
    check_elements(&n.name(), total)?;
    let r = shape.len();
    let pad = |s: &[u64]| -> Vec<u64> {
        std::iter::repeat_n(1, r - s.len())
            .chain(s.iter().copied())
            .collect()
    };
    let (pa, pb) = (pad(&a.shape), pad(&b.shape));
    let (sa, sb, so) = (strides(&pa), strides(&pb), strides(&shape));
    let index = |i: usize, p: &[u64], s: &[usize]| -> usize {
        (0..r)
            .map(|k| {
                if p[k] == 1 {
                    0
                } else {
                    (i / so[k]) % shape[k] as usize * s[k]
                }
            })
            .sum()
    };
    let op = n.op();
    // Mod: fmod 0 (integers only) takes the divisor's sign (Python's %), fmod 1 the
    // dividend's (C fmod); ONNX requires fmod 1 for floats.
    let fmod = op == "Mod" && n.int_or("fmod", 0)? != 0;
    let floats = !matches!((&a.data, &b.data), (Data::I64(_), Data::I64(_)));
    if op == "Mod" && floats && !fmod {
        return Err(n.unsupported("fmod", 0, "floating-point Mod needs fmod = 1"));
    }
    let data = match (&a.data, &b.data) {
        (Data::I64(x), Data::I64(y)) => {
            let mut out = Vec::with_capacity(total as usize);
            for i in 0..total as usize {
                let (p, q) = (x[index(i, &pa, &sa)], y[index(i, &pb, &sb)]);
                out.push(match op {
                    "Add" => p.wrapping_add(q),
                    "Sub" => p.wrapping_sub(q),
                    "Mul" => p.wrapping_mul(q),
                    "Mod" if q == 0 => {
                        return Err(n.shape_err("integer Mod by zero in a constant".into()))
                    }
                    "Mod" => {
                        let r = p.wrapping_rem(q);
                        if !fmod && r != 0 && (r < 0) != (q < 0) {
                            r + q
                        } else {
                            r
                        }
                    }
                    _ => p.checked_div(q).ok_or_else(|| {
                        n.shape_err("integer division by zero in a constant".into())
                    })?,
                });
            }
            Data::I64(out)
        }
        _ => {
            let (x, y) = (a.to_f32(), b.to_f32());
            Data::F32(
                (0..total as usize)
                    .map(|i| {
                        let (p, q) = (x[index(i, &pa, &sa)], y[index(i, &pb, &sb)]);
                        match op {
                            "Add" => p + q,
                            "Sub" => p - q,
                            "Mul" => p * q,
                            "Mod" => p % q,
                            _ => p / q,
                        }
                    })
                    .collect(),
            )
        }
    };
    Ok(Const {
        shape,
        data,
        dtype: a.dtype,
    })
}

fn cast(n: &Node, c: &Const) -> Result<Const, OnnxError> {
    let to = n.int("to")?.ok_or_else(|| n.missing("to"))?;
    cast_const(n, c, to)
}

/// A constant cast to ONNX element type `to` ([`Const::cast`]).
///
/// # Errors
/// [`OnnxError::UnsupportedAttribute`] for a non-numeric target.
pub(crate) fn cast_const(n: &Node, c: &Const, to: i64) -> Result<Const, OnnxError> {
    i32::try_from(to)
        .ok()
        .and_then(|code| c.cast(code))
        .ok_or_else(|| n.unsupported("to", to, "constants are numbers"))
}

fn gather(n: &Node, data: &Const, idx: &Const) -> Result<Const, OnnxError> {
    let r = data.shape.len();
    let a = axis(n, "axis", n.int_or("axis", 0)?, r)?;
    let dim = data.shape[a] as i64;
    let mut ids = Vec::with_capacity(idx.len());
    for i in idx.to_i64() {
        let j = if i < 0 { i + dim } else { i };
        if j < 0 || j >= dim {
            return Err(n.shape_err(format!("index {i} out of range for axis {a} of size {dim}")));
        }
        ids.push(j as usize);
    }
    let shape: Vec<u64> = data.shape[..a]
        .iter()
        .chain(&idx.shape)
        .chain(&data.shape[a + 1..])
        .copied()
        .collect();
    let total = product(&shape);
    check_elements(&n.name(), total)?;
    let inner = product(&data.shape[a + 1..]) as usize;
    let (k, d) = (ids.len(), data.shape[a] as usize);
    let out = gather_by(&data.data, total as usize, |o| {
        let (outer, rest) = (o / (k * inner), o % (k * inner));
        let (which, within) = (rest / inner.max(1), rest % inner.max(1));
        (outer * d + ids[which]) * inner + within
    });
    Ok(Const {
        shape,
        data: out,
        dtype: data.dtype,
    })
}

fn transpose(n: &Node, c: &Const) -> Result<Const, OnnxError> {
    let p = perm(n, c.shape.len())?;
    let shape: Vec<u64> = p.iter().map(|&a| c.shape[a]).collect();
    let (si, so) = (strides(&c.shape), strides(&shape));
    let out = gather_by(&c.data, c.len(), |o| {
        p.iter()
            .enumerate()
            .map(|(k, &a)| (o / so[k]) % shape[k] as usize * si[a])
            .sum()
    });
    Ok(Const {
        shape,
        data: out,
        dtype: c.dtype,
    })
}

fn concat(n: &Node, parts: &[Rc<Const>]) -> Result<Const, OnnxError> {
    let first = &parts[0];
    let r = first.shape.len();
    let a = axis(
        n,
        "axis",
        n.int("axis")?.ok_or_else(|| n.missing("axis"))?,
        r,
    )?;
    let mut shape = first.shape.clone();
    shape[a] = parts
        .iter()
        .map(|p| p.shape.get(a).copied().unwrap_or(0))
        .sum();
    for p in parts {
        if p.shape.len() != r
            || p.shape
                .iter()
                .zip(&first.shape)
                .enumerate()
                .any(|(i, (x, y))| i != a && x != y)
        {
            return Err(n.shape_err(format!(
                "inputs {:?} and {:?} differ off axis {a}",
                first.shape, p.shape
            )));
        }
    }
    let outer = product(&shape[..a]) as usize;
    let float = parts.iter().any(|p| matches!(p.data, Data::F32(_)));
    check_elements(&n.name(), product(&shape))?;
    let fs: Vec<Vec<f32>> = if float {
        parts.iter().map(|p| p.to_f32()).collect()
    } else {
        Vec::new()
    };
    let is: Vec<Vec<i64>> = if float {
        Vec::new()
    } else {
        parts.iter().map(|p| p.to_i64()).collect()
    };
    let mut f = Vec::new();
    let mut i = Vec::new();
    for o in 0..outer {
        for (k, p) in parts.iter().enumerate() {
            let chunk = product(&p.shape[a..]) as usize;
            let range = o * chunk..(o + 1) * chunk;
            if float {
                f.extend_from_slice(&fs[k][range]);
            } else {
                i.extend_from_slice(&is[k][range]);
            }
        }
    }
    let data = if float { Data::F32(f) } else { Data::I64(i) };
    Ok(Const {
        shape,
        data,
        dtype: first.dtype,
    })
}

fn slice(ctx: &Ctx, n: &Node, c: &Const) -> Result<Const, OnnxError> {
    let r = c.shape.len();
    let a = slicing::args(ctx, n)?;
    let SlicePlan { begin, step, shape } = slicing::plan(n, &c.shape, &a)?;
    let (si, so) = (strides(&c.shape), strides(&shape));
    let total = product(&shape) as usize;
    let out = gather_by(&c.data, total, |o| {
        (0..r)
            .map(|k| {
                let idx = (o / so[k]) % shape[k] as usize;
                (begin[k] + idx as i64 * step[k]) as usize * si[k]
            })
            .sum()
    });
    Ok(Const {
        shape,
        data: out,
        dtype: c.dtype,
    })
}

fn unary(n: &Node, c: &Const) -> Const {
    let v = c.to_f32();
    let f: fn(f32) -> f32 = match n.op() {
        "Neg" => |x| -x,
        "Sqrt" => f32::sqrt,
        "Reciprocal" => |x| 1.0 / x,
        _ => |x| x.max(0.0),
    };
    match (&c.data, n.op()) {
        (Data::I64(i), "Neg") => Const {
            shape: c.shape.clone(),
            data: Data::I64(i.iter().map(|x| x.wrapping_neg()).collect()),
            dtype: c.dtype,
        },
        (Data::I64(i), "Relu") => Const {
            shape: c.shape.clone(),
            data: Data::I64(i.iter().map(|&x| x.max(0)).collect()),
            dtype: c.dtype,
        },
        _ => Const {
            shape: c.shape.clone(),
            data: Data::F32(v.into_iter().map(f).collect()),
            dtype: c.dtype,
        },
    }
}

/// Evaluate `n` if every input is a constant and the op is foldable; returns whether it
/// did.
///
/// # Errors
/// The op's shape and attribute errors, [`OnnxError::TensorTooLarge`].
pub(crate) fn try_fold(ctx: &mut Ctx, n: &Node) -> Result<bool, OnnxError> {
    let foldable = FOLDABLE.contains(&n.op()) || crate::fold_logic::OPS.contains(&n.op());
    if n.proto.input.is_empty() || !foldable || n.output(0).is_none() {
        return Ok(false);
    }
    let mut ins = Vec::new();
    for (i, name) in n.proto.input.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        match ctx.const_in(n, i) {
            Some(c) => ins.push(c),
            None => return Ok(false),
        }
    }
    let x = &ins[0];
    let out = match n.op() {
        "Identity" => (**x).clone(),
        "Cast" => cast(n, x)?,
        "CastLike" if ins.len() == 2 => cast_const(n, x, i64::from(ins[1].dtype))?,
        "Add" | "Sub" | "Mul" | "Div" | "Mod" if ins.len() == 2 => elementwise(n, x, &ins[1])?,
        "Neg" | "Sqrt" | "Reciprocal" | "Relu" => unary(n, x),
        "Gather" if ins.len() == 2 => gather(n, x, &ins[1])?,
        "Unsqueeze" => with_shape(x, unsqueeze_shape(n, &x.shape, axes_arg(ctx, n)?)?),
        "Squeeze" => with_shape(x, squeeze_shape(n, &x.shape, axes_arg(ctx, n)?)?),
        "Concat" => concat(n, &ins)?,
        "Reshape" => with_shape(x, reshape_spec(ctx, n, &x.shape)?),
        "Flatten" => with_shape(x, flatten_shape(n, &x.shape)?),
        "Transpose" => transpose(n, x)?,
        "Slice" => slice(ctx, n, x)?,
        op if crate::fold_logic::OPS.contains(&op) => {
            let refs: Vec<&Const> = ins.iter().map(|c| &**c).collect();
            crate::fold_logic::fold(n, &refs)?
        }
        _ => return Ok(false),
    };
    ctx.set(n.output(0).unwrap_or_default(), Val::Const(Rc::new(out)));
    ctx.stats.folded_constant += 1;
    Ok(true)
}
