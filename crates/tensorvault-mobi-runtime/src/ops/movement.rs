//! Data movement (f32 or i64 alike): reshapes, index maps (Transpose, Slice, Pad, Expand,
//! Tile), Concat, Split, Gather.

use tensorvault_formats::mobi::OperatorType as Op;

use super::{axis, broadcast, to_usize, Ctx, OpError, OpResult};
use crate::tensor::{numel, Data, Tensor};

/// Output element `i` is `src[idx[i]]`, or `fill` where `idx[i]` is `None`.
fn take(src: &Data, idx: &[Option<usize>], fill: f32) -> Data {
    match src {
        Data::I64(v) => Data::I64(
            idx.iter()
                .map(|i| i.map_or(fill as i64, |i| v[i]))
                .collect(),
        ),
        Data::F32(_) | Data::SharedF32(_) | Data::Packed(_) => {
            let v = src.as_f32().unwrap_or(&[]);
            Data::F32(idx.iter().map(|i| i.map_or(fill, |i| v[i])).collect())
        }
    }
}

/// An integer vector from parameter `key`, or from input 1 when the parameter is absent.
fn param_or_input<'a>(cx: &Ctx<'a>, key: &'static str) -> OpResult<&'a [i64]> {
    match cx.params().ints(key) {
        Some(v) => Ok(v),
        None => cx.ints(1),
    }
}

/// Reshape, Flatten, Squeeze, Unsqueeze, Identity: same data, new shape.
pub(crate) fn reshape_like(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let shape = reshape_shape(cx)?;
    Ok(cx.input(0)?.with_shape(shape))
}

/// The output shape of a Reshape, Flatten, Squeeze, Unsqueeze or Identity of input 0
/// (checked: same element count). The session moves an input that has no other reader
/// to this shape instead of copying it.
pub(crate) fn reshape_shape(cx: &Ctx<'_>) -> OpResult<Vec<usize>> {
    let x = cx.input(0)?;
    let s = &x.shape;
    let r = s.len();
    let shape = match cx.op.op {
        Op::Reshape => {
            let target = param_or_input(cx, "shape")?;
            let allowzero = cx.int("allowzero") == 1;
            let mut out = Vec::with_capacity(target.len());
            let mut infer = None;
            for (i, &d) in target.iter().enumerate() {
                out.push(match d {
                    -1 if infer.is_none() => {
                        infer = Some(i);
                        1
                    }
                    0 if !allowzero => *s.get(i).ok_or(OpError::Param {
                        key: "shape",
                        value: 0,
                        rule: "0 copies an input dimension that does not exist",
                    })?,
                    d => to_usize("shape", d)?,
                });
            }
            let known = numel(&out).ok_or(OpError::TooLarge { elements: u64::MAX })?;
            if let Some(i) = infer {
                if known == 0 || x.len() % known != 0 {
                    return Err(OpError::Param {
                        key: "shape",
                        value: -1,
                        rule: "cannot infer -1: the element count does not divide",
                    });
                }
                out[i] = x.len() / known;
            }
            out
        }
        Op::Flatten => {
            let a = cx.int("axis");
            if a < -(r as i64) || a > r as i64 {
                return Err(OpError::Param {
                    key: "axis",
                    value: a,
                    rule: "must be in -rank..=rank",
                });
            }
            let a = if a < 0 { a + r as i64 } else { a } as usize;
            vec![s[..a].iter().product(), s[a..].iter().product()]
        }
        Op::Squeeze => match cx.params().ints("axes") {
            Some(axes) => {
                let mut drop = vec![false; r];
                for &v in axes {
                    let a = axis("axes", v, r)?;
                    if s[a] != 1 {
                        return Err(OpError::Param {
                            key: "axes",
                            value: v,
                            rule: "squeezed axes must have size 1",
                        });
                    }
                    drop[a] = true;
                }
                s.iter()
                    .zip(drop)
                    .filter(|(_, d)| !d)
                    .map(|(&v, _)| v)
                    .collect()
            }
            None => s.iter().copied().filter(|&d| d != 1).collect(),
        },
        Op::Unsqueeze => {
            let axes = cx.params().ints("axes").unwrap_or(&[]);
            let out_r = r + axes.len();
            let mut ins = vec![false; out_r];
            for &v in axes {
                let a = axis("axes", v, out_r)?;
                if std::mem::replace(&mut ins[a], true) {
                    return Err(OpError::Param {
                        key: "axes",
                        value: v,
                        rule: "repeated axis",
                    });
                }
            }
            let mut it = s.iter();
            ins.iter()
                .map(|&i| {
                    if i {
                        1
                    } else {
                        it.next().copied().unwrap_or(1)
                    }
                })
                .collect()
        }
        _ => s.clone(),
    };
    if numel(&shape) != Some(x.len()) {
        return Err(OpError::Shape {
            input: 0,
            rule: "the element count differs from the target shape's",
        });
    }
    Ok(shape)
}

/// Transpose, Slice, Pad, Expand, Tile: each output axis maps its coordinates to input
/// coordinates (or to the pad value).
pub(crate) fn index_map(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let x = cx.input(0)?;
    let s = &x.shape;
    let r = s.len();
    let st = broadcast::strides(s);
    let p = cx.params();
    // Per-axis maps are built before the output size is known: bound every axis first
    // (an empty tensor may still claim a huge dimension).
    for &d in s {
        cx.scratch(Some(d))?;
    }
    let mut fill = 0f32;
    // maps[d][i]: input coordinate (along in_axis[d]) of output coordinate i on axis d.
    let (maps, in_axis): (Vec<Vec<Option<usize>>>, Vec<usize>) = match cx.op.op {
        Op::Transpose => {
            let rev: Vec<i64> = (0..r as i64).rev().collect();
            let perm = p.ints("perm").unwrap_or(&rev);
            if perm.len() != r {
                return Err(OpError::Param {
                    key: "perm",
                    value: perm.len() as i64,
                    rule: "needs one entry per input axis",
                });
            }
            let in_axis: Vec<usize> = perm.iter().map(|&v| v as usize).collect();
            (
                in_axis
                    .iter()
                    .map(|&a| (0..s[a]).map(Some).collect())
                    .collect(),
                in_axis,
            )
        }
        Op::Slice => {
            let starts = p.ints("starts").unwrap_or(&[]);
            let ends = p.ints("ends").unwrap_or(&[]);
            let mut maps: Vec<Vec<Option<usize>>> =
                s.iter().map(|&d| (0..d).map(Some).collect()).collect();
            for (j, (&b, &e)) in starts.iter().zip(ends).enumerate() {
                let a = axis("axes", p.ints("axes").map_or(j as i64, |v| v[j]), r)?;
                let step = p.ints("steps").map_or(1, |v| v[j]);
                maps[a] = slice_axis(s[a] as i64, b, e, step)
                    .into_iter()
                    .map(Some)
                    .collect();
            }
            (maps, (0..r).collect())
        }
        Op::Pad => {
            let pads = p.ints("pads").unwrap_or(&[]);
            let all: Vec<i64> = (0..r as i64).collect();
            let axes = p.ints("axes").unwrap_or(&all);
            if pads.len() != 2 * axes.len() {
                return Err(OpError::Param {
                    key: "pads",
                    value: pads.len() as i64,
                    rule: "needs two per padded axis",
                });
            }
            fill = p.float("value").unwrap_or(0.0) as f32;
            let mode = p.str("mode").unwrap_or("constant");
            let mut maps: Vec<Vec<Option<usize>>> =
                s.iter().map(|&d| (0..d).map(Some).collect()).collect();
            for (j, &v) in axes.iter().enumerate() {
                let a = axis("axes", v, r)?;
                maps[a] = pad_axis(cx, s[a], pads[j], pads[j + axes.len()], mode)?;
            }
            (maps, (0..r).collect())
        }
        Op::Expand => {
            let target: Vec<usize> = param_or_input(cx, "shape")?
                .iter()
                .map(|&d| to_usize("shape", d))
                .collect::<OpResult<_>>()?;
            for &d in &target {
                cx.scratch(Some(d))?;
            }
            let out = broadcast::shape2(s, &target).ok_or(OpError::Shape {
                input: 0,
                rule: "does not broadcast to the target shape",
            })?;
            let off = out.len() - r;
            let maps = (0..out.len())
                .map(|d| match d.checked_sub(off) {
                    Some(i) if s[i] != 1 => (0..out[d]).map(Some).collect(),
                    Some(_) => vec![Some(0); out[d]],
                    None => vec![Some(0); out[d]],
                })
                .collect();
            // Leading new axes read input axis 0 with stride 0 (coordinate 0).
            let in_axis = (0..out.len()).map(|d| d.saturating_sub(off)).collect();
            (maps, in_axis)
        }
        _ => {
            let reps = param_or_input(cx, "repeats")?;
            if reps.len() != r {
                return Err(OpError::Param {
                    key: "repeats",
                    value: reps.len() as i64,
                    rule: "needs one entry per input axis",
                });
            }
            let mut maps = Vec::with_capacity(r);
            for (d, &k) in reps.iter().enumerate() {
                let k = to_usize("repeats", k)?;
                let len = cx.scratch(s[d].checked_mul(k))?;
                maps.push((0..len).map(|i| Some(i % s[d].max(1))).collect());
            }
            (maps, (0..r).collect())
        }
    };
    let shape: Vec<usize> = maps.iter().map(Vec::len).collect();
    let n = cx.alloc(&shape)?;
    let mut idx = Vec::with_capacity(n);
    if n > 0 {
        let strides: Vec<usize> = in_axis
            .iter()
            .map(|&a| st.get(a).copied().unwrap_or(0))
            .collect();
        let mut coord = vec![0usize; shape.len()];
        for _ in 0..n {
            let mut off = Some(0usize);
            for (d, &c) in coord.iter().enumerate() {
                off = match (off, maps[d][c]) {
                    (Some(o), Some(i)) => Some(o + i * strides[d]),
                    _ => None,
                };
            }
            idx.push(off);
            for d in (0..shape.len()).rev() {
                coord[d] += 1;
                if coord[d] < shape[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
    }
    Ok(Tensor {
        shape,
        data: take(&x.data, &idx, fill),
    })
}

/// The input coordinates an ONNX Slice visits along an axis of size `dim`.
fn slice_axis(dim: i64, start: i64, end: i64, step: i64) -> Vec<usize> {
    let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
    let (b, e) = (norm(start), norm(end));
    let mut out = Vec::new();
    if step > 0 {
        let (b, e) = (b.clamp(0, dim), e.clamp(0, dim));
        let mut i = b;
        while i < e {
            out.push(i as usize);
            i = i.saturating_add(step);
        }
    } else {
        let (b, e) = (b.clamp(-1, dim - 1), e.clamp(-1, dim - 1));
        let mut i = b;
        while i > e {
            out.push(i as usize);
            i = i.saturating_add(step);
        }
    }
    out
}

/// The input coordinate (or `None`: the constant) of each output position of one padded axis.
fn pad_axis(
    cx: &Ctx<'_>,
    dim: usize,
    begin: i64,
    end: i64,
    mode: &str,
) -> OpResult<Vec<Option<usize>>> {
    let d = dim as i64;
    let len = d
        .checked_add(begin)
        .and_then(|v| v.checked_add(end))
        .filter(|&v| v >= 0)
        .ok_or(OpError::Param {
            key: "pads",
            value: begin.min(end),
            rule: "crops more than the axis holds",
        })?;
    cx.scratch(usize::try_from(len).ok())?;
    if dim == 0 && mode != "constant" && len > 0 {
        return Err(OpError::Shape {
            input: 0,
            rule: "reflect/edge/wrap padding of an empty axis",
        });
    }
    Ok((0..len)
        .map(|o| {
            let i = o - begin;
            if (0..d).contains(&i) {
                return Some(i as usize);
            }
            match mode {
                "edge" => Some(i.clamp(0, d - 1) as usize),
                "wrap" => Some(i.rem_euclid(d) as usize),
                "reflect" if d == 1 => Some(0),
                "reflect" => {
                    let period = 2 * (d - 1);
                    let m = i.rem_euclid(period);
                    Some(if m < d { m } else { period - m } as usize)
                }
                _ => None,
            }
        })
        .collect())
}

/// Concat along `axis`.
pub(crate) fn concat(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let first = cx.input(0)?;
    let r = first.shape.len();
    let a = axis("axis", cx.int("axis"), r)?;
    let mut shape = first.shape.clone();
    shape[a] = 0;
    for (i, t) in cx.inputs.iter().enumerate() {
        let same = t.shape.len() == r
            && t.shape
                .iter()
                .enumerate()
                .all(|(d, &v)| d == a || v == first.shape[d]);
        if !same {
            return Err(OpError::Shape {
                input: i,
                rule: "concat inputs must agree on every axis but `axis`",
            });
        }
        if t.dtype_name() != first.dtype_name() {
            return Err(OpError::DType {
                input: i,
                expected: first.dtype_name(),
            });
        }
        shape[a] = shape[a]
            .checked_add(t.shape[a])
            .ok_or(OpError::TooLarge { elements: u64::MAX })?;
    }
    let n = cx.alloc(&shape)?;
    let outer: usize = shape[..a].iter().product();
    let inner: usize = shape[a + 1..].iter().product();
    let mut idx: Vec<Option<usize>> = Vec::with_capacity(n);
    // Index into the concatenation of all inputs' data.
    let mut base = Vec::with_capacity(cx.inputs.len());
    let mut acc = 0;
    for t in &cx.inputs {
        base.push(acc);
        acc += t.len();
    }
    for o in 0..outer {
        for (t, &b) in cx.inputs.iter().zip(&base) {
            let block = t.shape[a] * inner;
            idx.extend((0..block).map(|k| Some(b + o * block + k)));
        }
    }
    let all = match &first.data {
        Data::F32(_) | Data::SharedF32(_) | Data::Packed(_) => Data::F32(
            cx.inputs
                .iter()
                .flat_map(|t| t.as_f32().unwrap_or(&[]).iter().copied())
                .collect(),
        ),
        Data::I64(_) => Data::I64(
            cx.inputs
                .iter()
                .flat_map(|t| t.as_i64().unwrap_or(&[]).iter().copied())
                .collect(),
        ),
    };
    Ok(Tensor {
        shape,
        data: take(&all, &idx, 0.0),
    })
}

/// Split along `axis` into the outputs (sizes from `split`, or equal parts).
pub(crate) fn split(cx: &Ctx<'_>) -> OpResult<Vec<Tensor>> {
    let x = cx.input(0)?;
    let s = &x.shape;
    let a = axis("axis", cx.int("axis"), s.len())?;
    let k = cx.op.outputs.len();
    let sizes: Vec<usize> = match cx.params().ints("split") {
        Some(v) => v
            .iter()
            .map(|&d| to_usize("split", d))
            .collect::<OpResult<_>>()?,
        None => {
            let chunk = s[a].div_ceil(k.max(1));
            (0..k)
                .map(|i| chunk.min(s[a].saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().try_fold(0usize, |acc, &v| acc.checked_add(v)) != Some(s[a]) {
        return Err(OpError::Param {
            key: "split",
            value: s[a] as i64,
            rule: "the sizes must sum to the axis length",
        });
    }
    let outer: usize = s[..a].iter().product();
    let inner: usize = s[a + 1..].iter().product();
    let mut start = 0;
    let mut out = Vec::with_capacity(k);
    for &len in &sizes {
        let mut shape = s.clone();
        shape[a] = len;
        let idx: Vec<Option<usize>> = (0..outer)
            .flat_map(|o| (0..len * inner).map(move |j| Some((o * s[a] + start) * inner + j)))
            .collect();
        out.push(Tensor {
            shape,
            data: take(&x.data, &idx, 0.0),
        });
        start += len;
    }
    Ok(out)
}

/// Gather along `axis` with integer indices (negative from the end).
pub(crate) fn gather(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let x = cx.input(0)?;
    let s = &x.shape;
    let a = axis("axis", cx.int("axis"), s.len())?;
    let ind = cx.ints(1)?;
    let mut shape = s[..a].to_vec();
    shape.extend_from_slice(cx.shape(1)?);
    shape.extend_from_slice(&s[a + 1..]);
    let n = cx.alloc(&shape)?;
    let outer: usize = s[..a].iter().product();
    let inner: usize = s[a + 1..].iter().product();
    let dim = s[a] as i64;
    let mut idx = Vec::with_capacity(n);
    for o in 0..outer {
        for &i in ind {
            let j = if i < 0 { i + dim } else { i };
            if !(0..dim).contains(&j) {
                return Err(OpError::Param {
                    key: "indices",
                    value: i,
                    rule: "index out of range for the gathered axis",
                });
            }
            let b = (o * s[a] + j as usize) * inner;
            idx.extend((b..b + inner).map(Some));
        }
    }
    Ok(Tensor {
        shape,
        data: take(&x.data, &idx, 0.0),
    })
}
