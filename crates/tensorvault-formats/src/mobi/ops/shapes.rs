//! Static checks that need more than one parameter or a constant's shape: weight ranks
//! and channel counts, parameter lengths that must agree, permutations.

use super::Params;
use crate::mobi::error::MobiError;
use crate::mobi::types::{ConstantTensor, Operator, OperatorType as Op};

struct Ctx<'a, F> {
    index: u32,
    op: &'a Operator,
    constant: &'a F,
    offset: u64,
}

impl<'a, 'm, F: Fn(u32) -> Option<&'m ConstantTensor>> Ctx<'a, F> {
    fn weight(&self, pos: usize) -> Option<&'m ConstantTensor> {
        self.op.inputs.get(pos).and_then(|&id| (self.constant)(id))
    }

    fn rank(
        &self,
        pos: usize,
        name: &'static str,
        t: &ConstantTensor,
        rank: usize,
    ) -> Result<(), MobiError> {
        if t.shape.len() == rank {
            return Ok(());
        }
        Err(MobiError::ConstantRank {
            index: self.index,
            op: self.op.op.name(),
            input: name,
            id: self.op.inputs.get(pos).copied().unwrap_or(0),
            rank: t.shape.len() as u64,
            expected: rank as u64,
            offset: self.offset,
        })
    }

    #[allow(clippy::too_many_arguments, reason = "one error's fields")]
    fn dim(
        &self,
        pos: usize,
        name: &'static str,
        axis: usize,
        found: u64,
        expected: u64,
        rule: &'static str,
    ) -> Result<(), MobiError> {
        if found == expected {
            return Ok(());
        }
        Err(MobiError::ConstantDim {
            index: self.index,
            op: self.op.op.name(),
            input: name,
            id: self.op.inputs.get(pos).copied().unwrap_or(0),
            axis: axis as u64,
            found,
            expected,
            rule,
            offset: self.offset,
        })
    }

    fn conflict(&self, key: &'static str, rule: &'static str) -> MobiError {
        MobiError::ParamConflict {
            index: self.index,
            op: self.op.op.name(),
            key,
            rule,
            offset: self.offset,
        }
    }

    /// Conv-like weights: rank 4, bias [W.shape[0]].
    fn conv_weights(&self, depthwise: bool) -> Result<(), MobiError> {
        let Some(w) = self.weight(1) else {
            return Ok(());
        };
        self.rank(1, "W", w, 4)?;
        if depthwise {
            self.dim(
                1,
                "W",
                1,
                w.shape[1],
                1,
                "depthwise weights are [C*m, 1, kh, kw]",
            )?;
        } else {
            let group = Params::new(self.op).int("group").unwrap_or(1).max(1) as u64;
            if w.shape[0] % group != 0 {
                return Err(self.conflict(
                    "group",
                    "the output channels W.shape[0] must be divisible by group",
                ));
            }
        }
        self.bias(w.shape[0])
    }

    fn bias(&self, out: u64) -> Result<(), MobiError> {
        if let Some(b) = self.weight(2) {
            self.rank(2, "B", b, 1)?;
            self.dim(
                2,
                "B",
                0,
                b.shape[0],
                out,
                "bias length = output channels (Conv2D: W.shape[0]; ConvTranspose2D: W.shape[1] * group)",
            )?;
        }
        Ok(())
    }

    /// Exactly one of parameter `key` and input 1.
    fn param_or_input(&self, key: &'static str) -> Result<(), MobiError> {
        let has_param = self.op.param(key).is_some();
        let has_input = self.op.inputs.len() > 1;
        if has_param == has_input {
            return Err(self.conflict(key, "give the parameter or the second input, exactly one"));
        }
        if let Some(s) = self.weight(1) {
            self.rank(1, key, s, 1)?;
        }
        Ok(())
    }

    fn unique(&self, key: &'static str, v: &[i64]) -> Result<(), MobiError> {
        let mut s = v.to_vec();
        s.sort_unstable();
        s.dedup();
        if s.len() != v.len() {
            return Err(self.conflict(key, "values must be unique"));
        }
        Ok(())
    }
}

/// The static shape and consistency checks of one operator.
pub(super) fn check<'m, F: Fn(u32) -> Option<&'m ConstantTensor>>(
    index: u32,
    op: &Operator,
    constant: &F,
    offset: u64,
) -> Result<(), MobiError> {
    let cx = Ctx {
        index,
        op,
        constant,
        offset,
    };
    let ps = Params::new(op);
    match op.op {
        Op::Conv2D => cx.conv_weights(false),
        Op::DepthwiseConv2D => cx.conv_weights(true),
        Op::ConvTranspose2D => {
            let Some(w) = cx.weight(1) else { return Ok(()) };
            cx.rank(1, "W", w, 4)?;
            let group = ps.int("group").unwrap_or(1).max(1) as u64;
            if w.shape[0] % group != 0 {
                return Err(cx.conflict(
                    "group",
                    "the input channels W.shape[0] must be divisible by group",
                ));
            }
            cx.bias(w.shape[1].saturating_mul(group))
        }
        Op::FullyConnected => {
            let Some(w) = cx.weight(1) else { return Ok(()) };
            cx.rank(1, "W", w, 2)?;
            cx.bias(w.shape[0])
        }
        Op::BatchNorm => {
            let mut len = None;
            for (pos, name) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
                if let Some(t) = cx.weight(pos) {
                    cx.rank(pos, name, t, 1)?;
                    let l = *len.get_or_insert(t.shape[0]);
                    cx.dim(
                        pos,
                        name,
                        0,
                        t.shape[0],
                        l,
                        "scale, B, mean and var have one length",
                    )?;
                }
            }
            Ok(())
        }
        Op::Reshape => {
            cx.param_or_input("shape")?;
            if ps
                .ints("shape")
                .is_some_and(|s| s.iter().filter(|&&d| d == -1).count() > 1)
            {
                return Err(cx.conflict("shape", "at most one -1"));
            }
            Ok(())
        }
        Op::Expand => cx.param_or_input("shape"),
        Op::Tile => cx.param_or_input("repeats"),
        Op::Transpose => match ps.ints("perm") {
            Some(perm) => {
                let mut s = perm.to_vec();
                s.sort_unstable();
                if s.iter().enumerate().any(|(i, &v)| v != i as i64) {
                    return Err(cx.conflict("perm", "a permutation of 0..rank"));
                }
                Ok(())
            }
            None => Ok(()),
        },
        Op::Slice => {
            let n = ps.ints("starts").map_or(0, <[i64]>::len);
            if ps.ints("ends").map_or(0, <[i64]>::len) != n {
                return Err(cx.conflict("ends", "as many as starts"));
            }
            if let Some(axes) = ps.ints("axes") {
                if axes.len() != n {
                    return Err(cx.conflict("axes", "as many as starts"));
                }
                cx.unique("axes", axes)?;
            }
            if let Some(steps) = ps.ints("steps") {
                if steps.len() != n {
                    return Err(cx.conflict("steps", "as many as starts"));
                }
                if steps.contains(&0) {
                    return Err(cx.conflict("steps", "non-zero"));
                }
            }
            Ok(())
        }
        Op::Pad => {
            let pads = ps.ints("pads").unwrap_or(&[]);
            if !pads.len().is_multiple_of(2) {
                return Err(cx.conflict("pads", "an even count: begins then ends"));
            }
            if let Some(axes) = ps.ints("axes") {
                if pads.len() != 2 * axes.len() {
                    return Err(cx.conflict("pads", "two per axis in `axes`"));
                }
                cx.unique("axes", axes)?;
            }
            Ok(())
        }
        Op::Resize => resize(&cx, &ps),
        Op::Split => match ps.ints("split") {
            Some(s) if s.len() != op.outputs.len() => {
                Err(cx.conflict("split", "one size per output"))
            }
            _ => Ok(()),
        },
        Op::Squeeze
        | Op::Unsqueeze
        | Op::ReduceMean
        | Op::ReduceSum
        | Op::ReduceMax
        | Op::ReduceMin
        | Op::ReduceProd
        | Op::ReduceL1
        | Op::ReduceL2
        | Op::ReduceSumSquare
        | Op::ReduceLogSum
        | Op::ReduceLogSumExp => match ps.ints("axes") {
            Some(a) => cx.unique("axes", a),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Resize: `scales`, `sizes` or both, of one length; `roi` two values per axis; no
/// antialiasing in nearest mode.
fn resize<'m, F: Fn(u32) -> Option<&'m ConstantTensor>>(
    cx: &Ctx<'_, F>,
    ps: &Params<'_>,
) -> Result<(), MobiError> {
    let scales = ps.floats("scales").map(<[f64]>::len);
    let sizes = ps.ints("sizes").map(<[i64]>::len);
    let rank = match (scales, sizes) {
        (None, None) => return Err(cx.conflict("scales", "give `scales`, `sizes` or both")),
        (Some(a), Some(b)) if a != b => {
            return Err(cx.conflict("sizes", "as many as `scales` (one per axis)"))
        }
        (Some(r), _) | (None, Some(r)) => r,
    };
    if ps.floats("roi").is_some_and(|r| r.len() != 2 * rank) {
        return Err(cx.conflict("roi", "two values (start, end) per axis"));
    }
    if ps.str("mode") == Some("nearest") && ps.int("antialias") == Some(1) {
        return Err(cx.conflict("antialias", "modes linear and cubic only"));
    }
    Ok(())
}
