//! Activations fused into the output loop of the operator that produces their input
//! (Conv2D, DepthwiseConv2D, FullyConnected + Relu or Clip/ReLU6); the plan that decides
//! which operators fuse is [`super::fusion`].

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Operator, OperatorType as Op};

/// An elementwise activation applied in place (same results as the standalone
/// operator: NaN passes through, -0 stays -0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    /// `x < 0 ? 0 : x`.
    Relu,
    /// `x < lo ? lo : (x > hi ? hi : x)` (ReLU6 is lo 0, hi 6).
    Clip {
        /// The lower bound.
        lo: f32,
        /// The upper bound.
        hi: f32,
    },
}

impl Act {
    /// The activation `op` computes, if it is one that fuses.
    pub fn of(op: &Operator) -> Option<Act> {
        match op.op {
            Op::Relu => Some(Act::Relu),
            Op::Clip => {
                let p = Params::new(op);
                let lo = p.float("min").unwrap_or(f64::NEG_INFINITY) as f32;
                let hi = p.float("max").unwrap_or(f64::INFINITY) as f32;
                Some(Act::Clip { lo, hi })
            }
            _ => None,
        }
    }

    /// `self` on every element of `v`, in place.
    #[inline]
    pub fn apply(self, v: &mut [f32]) {
        match self {
            Act::Relu => v.iter_mut().for_each(|x| *x = relu(*x)),
            Act::Clip { lo, hi } => v.iter_mut().for_each(|x| *x = clip(*x, lo, hi)),
        }
    }

    /// `x + b` then `self` on every element of `v`.
    #[inline]
    pub fn apply_bias(self, v: &mut [f32], b: f32) {
        match self {
            Act::Relu => v.iter_mut().for_each(|x| *x = relu(*x + b)),
            Act::Clip { lo, hi } => v.iter_mut().for_each(|x| *x = clip(*x + b, lo, hi)),
        }
    }
}

#[inline(always)]
pub(crate) fn relu(x: f32) -> f32 {
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

#[inline(always)]
pub(crate) fn clip(x: f32, lo: f32, hi: f32) -> f32 {
    // min(max(x, lo), hi) as the spec says: with lo > hi every number becomes hi (ONNX);
    // NaN compares false both times and stays NaN.
    let v = if x < lo { lo } else { x };
    if v > hi {
        hi
    } else {
        v
    }
}

/// Add a per-channel bias and apply an optional activation to `out`, laid out as
/// channels of `plane` elements each (`bias.len()` channels when a bias is given).
pub(crate) fn epilogue(out: &mut [f32], plane: usize, bias: Option<&[f32]>, act: Option<Act>) {
    if plane == 0 {
        return;
    }
    match (bias, act) {
        (None, None) => {}
        (None, Some(a)) => a.apply(out),
        (Some(b), None) => {
            for (row, &b) in out.chunks_exact_mut(plane).zip(b) {
                row.iter_mut().for_each(|v| *v += b);
            }
        }
        (Some(b), Some(a)) => {
            for (row, &b) in out.chunks_exact_mut(plane).zip(b) {
                a.apply_bias(row, b);
            }
        }
    }
}
