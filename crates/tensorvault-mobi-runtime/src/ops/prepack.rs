//! Weights packed once per session into the gemm's panel layout ([`super::gemm`]), so a
//! run packs only activations: per group, a Conv2D's `[M/group, C/group * kh * kw]`
//! weight matrix as a [`PackedA`], and a FullyConnected's `W^T` (`[K, M]`) as a
//! [`PackedB`]. Only constant f32 weights whose shapes fit the operator are packed; any
//! other case (a weight computed at run time, a shape the kernel will refuse) is left to
//! the run-time path, which packs per call and reports the shape errors.

use std::collections::HashMap;

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Operator, OperatorType as Op};

use super::gemm::{PackedA, PackedB, MR, NR};
use crate::tensor::Tensor;

/// An operator's weights, packed.
#[derive(Debug, Clone)]
pub(crate) enum Prepacked {
    /// Conv2D: one `[M/group, C/group * kh * kw]` left operand per group.
    Conv(Vec<PackedA>),
    /// FullyConnected: `W^T` as the right operand (`[K, M]`).
    Dense(PackedB),
}

impl Prepacked {
    /// Bytes of packed values.
    pub fn bytes(&self) -> usize {
        match self {
            Prepacked::Conv(v) => v.iter().map(PackedA::bytes).sum(),
            Prepacked::Dense(b) => b.bytes(),
        }
    }
}

/// The packed weights of `op`, when it is a Conv2D (not depthwise: more than one input
/// channel per group) or a FullyConnected whose weights are a constant of a usable shape,
/// and the packed copy (zero-padded to whole panels) is at most `limit` elements and at
/// most twice the weights plus one panel row: a thin matrix (fewer rows than a panel)
/// is left to the run-time path rather than padded many times over.
pub(crate) fn prepack(
    op: &Operator,
    constants: &HashMap<u32, Tensor>,
    limit: u64,
) -> Option<Prepacked> {
    let w = constants.get(op.inputs.get(1)?)?;
    let data = w.as_f32()?;
    let fits = |rows: usize, panel: usize, depth: usize, groups: usize| {
        let padded = rows
            .div_ceil(panel)
            .checked_mul(panel)
            .and_then(|r| r.checked_mul(depth))
            .and_then(|v| v.checked_mul(groups));
        padded.is_some_and(|p| {
            p as u64 <= limit && p <= data.len().saturating_mul(2).saturating_add(panel * depth)
        })
    };
    match (op.op, w.shape.as_slice()) {
        (Op::Conv2D, &[m, cg, kh, kw]) if cg > 1 => {
            let group = usize::try_from(Params::new(op).int("group").unwrap_or(1)).ok()?;
            let kdim = cg.checked_mul(kh)?.checked_mul(kw)?;
            if group == 0 || m % group != 0 || m.checked_mul(kdim)? != data.len() {
                return None;
            }
            let mg = m / group;
            if !fits(mg, MR, kdim, group) {
                return None;
            }
            let packed = (0..group)
                .map(|g| PackedA::new(mg, kdim, &data[g * mg * kdim..][..mg * kdim], (kdim, 1)))
                .collect();
            Some(Prepacked::Conv(packed))
        }
        (Op::FullyConnected, &[m, k]) if m.checked_mul(k)? == data.len() && fits(m, NR, k, 1) => {
            Some(Prepacked::Dense(PackedB::new(k, m, data, (1, k))))
        }
        _ => None,
    }
}
