//! Weights packed once per session into the gemm's panel layout ([`super::gemm`]), so a
//! run packs only activations: per group, a Conv2D's `[M/group, C/group * kh * kw]`
//! weight matrix as a [`PackedA`], and a FullyConnected's `W^T` (`[K, M]`) as a
//! [`PackedB`], built row by row from the weights' values ([`Weights`]): f32 in memory,
//! or decoded from a quantized / fp16 payload one panel's rows at a time, so packing
//! needs no whole f32 copy. Only constant weights whose shapes fit the operator are
//! packed; any other case (a weight computed at run time, a shape the kernel will refuse) is left to
//! the run-time path, which packs per call and reports the shape errors.

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Dequantizer, Operator, OperatorType as Op};

use super::gemm::{PackedA, PackedB, MR, NR};

/// The f32 values of a weight tensor while it is packed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Weights<'a> {
    /// Values in memory (in place from the payload, or converted).
    Values(&'a [f32]),
    /// Decoded row by row from the stored payload (fp16, int8 / uint8 / int16): the
    /// packing holds one panel's rows, never a whole f32 copy of the tensor.
    Decoded(&'a Dequantizer<'a>),
}

impl Weights<'_> {
    fn len(&self) -> usize {
        match self {
            Weights::Values(v) => v.len(),
            Weights::Decoded(d) => d.len(),
        }
    }

    /// Values `start..start + out.len()` (the caller checked the range).
    fn read(&self, start: usize, out: &mut [f32]) {
        match self {
            Weights::Values(v) => out.copy_from_slice(&v[start..][..out.len()]),
            Weights::Decoded(d) => {
                d.fill(start, out);
            }
        }
    }
}

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
/// is left to the run-time path rather than padded many times over. `shape` is the
/// weights' shape, `data` their values.
pub(crate) fn prepack(
    op: &Operator,
    shape: &[usize],
    data: Weights<'_>,
    limit: u64,
) -> Option<Prepacked> {
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
    match (op.op, shape) {
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
            // Row i of group g's matrix: output channel g * mg + i, kdim values.
            let packed = (0..group)
                .map(|g| PackedA::from_rows(mg, kdim, |i, row| data.read((g * mg + i) * kdim, row)))
                .collect();
            Some(Prepacked::Conv(packed))
        }
        (Op::FullyConnected, &[m, k]) if m.checked_mul(k)? == data.len() && fits(m, NR, k, 1) => {
            // Column j of W^T is row j of W.
            Some(Prepacked::Dense(PackedB::from_cols(k, m, |j, col| {
                data.read(j * k, col)
            })))
        }
        _ => None,
    }
}
