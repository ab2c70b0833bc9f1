//! Ops whose result is a constant because the importer's shapes are static:
//! ConstantOfShape (a constant shape input filled with `value`) and Size (the element
//! count of any value). Both need their inputs at import time; a run-time shape input is
//! `NotConstant`.

use std::rc::Rc;

use crate::ctx::{Ctx, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::tensor::{checked_shape, Const, Data};

/// ConstantOfShape (opset 9+): a tensor of the shape given by the (constant, 1-D) input,
/// every element `value` (a one-element tensor attribute; float 0 when absent).
pub(crate) fn constant_of_shape(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let s = ctx.need_const(n, 0)?;
    if s.shape.len() != 1 {
        return Err(n.shape_err(format!(
            "the shape input has shape {:?}, expected a 1-D tensor",
            s.shape
        )));
    }
    let name = n.output(0).unwrap_or_default();
    let shape = checked_shape(name, "shape", &s.to_i64())?;
    let count: usize = shape.iter().map(|&d| d as usize).product();
    let value = match n.tensor("value")? {
        Some(t) => Const::from_proto(t, name)?,
        None => Const::floats(vec![1], vec![0.0]),
    };
    if value.len() != 1 {
        return Err(n.unsupported(
            "value",
            format!("{} elements", value.len()),
            "a one-element tensor",
        ));
    }
    let data = match &value.data {
        Data::F32(v) => Data::F32(vec![v[0]; count]),
        Data::I64(v) => Data::I64(vec![v[0]; count]),
    };
    let c = Const {
        shape,
        data,
        dtype: value.dtype,
    };
    ctx.set(name, Val::Const(Rc::new(c)));
    ctx.stats.folded_constant += 1;
    Ok(())
}

/// Size: the number of elements of the input, an INT64 scalar.
pub(crate) fn size(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let dims = match n.input(0).and_then(|name| ctx.val(name)) {
        Some(Val::Dyn(d)) => d.shape.clone(),
        Some(Val::Const(c)) => c.shape.clone(),
        None => return Err(ctx.dyn_in(n, 0).err().unwrap_or_else(|| n.missing("data"))),
    };
    let count = dims
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(i64::try_from(d).ok()?));
    let Some(count) = count else {
        return Err(n.shape_err(format!("the element count of {dims:?} overflows i64")));
    };
    ctx.set(
        n.output(0).unwrap_or_default(),
        Val::Const(Rc::new(Const::ints(vec![], vec![count]))),
    );
    ctx.stats.folded_shape += 1;
    Ok(())
}
