//! The fusion plan: decided once per session, which operators run inside the one before
//! them. Two kinds:
//! - an activation (Relu, Clip/ReLU6) applied by the Conv2D, DepthwiseConv2D or
//!   FullyConnected that produces its input, as it stores each tile ([`Act`]);
//! - a 2x2 / stride 2 MaxPool2D (no pads, no dilation, floor mode) after a Conv2D (and its
//!   fused activation): the convolution pools each image's output while it is still in
//!   cache, so the full-size tensor is never written out and read back (the separate pool
//!   read it from memory: 7-12% of the CIFAR-shaped CNN's run at batch 64).
//!
//! An operator fuses into the previous one only when it is that operator's only reader
//! and has one input and one output.

use std::collections::HashMap;

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Operator, OperatorType as Op};

use super::act::Act;

/// What runs inside one operator.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Fusion {
    /// The activation of the next operator.
    pub act: Option<Act>,
    /// The operator after it (after the activation, if any) is a 2x2 / stride 2 max pool
    /// that this Conv2D may compute ([`Fusion::ops`] says how many operators are skipped).
    pub pool: bool,
}

impl Fusion {
    /// Operators after this one that its run replaces: the activation, and the pool when
    /// `pooled` (the convolution took it; it may decline at run time).
    pub fn skipped(&self, pooled: bool) -> usize {
        usize::from(self.act.is_some()) + usize::from(pooled && self.pool)
    }
}

/// Whether operator `op` can take a fused activation.
fn produces_fusable(op: &Operator) -> bool {
    matches!(op.op, Op::Conv2D | Op::DepthwiseConv2D | Op::FullyConnected) && op.outputs.len() == 1
}

/// Whether `next` is a one-input, one-output operator reading `value`, its only reader
/// (`last_use` maps a value to the index of its last reader; graph outputs map to
/// `usize::MAX`, so they never fuse).
fn only_reader(next: &Operator, at: usize, value: u32, last_use: &HashMap<u32, usize>) -> bool {
    next.inputs.len() == 1
        && next.outputs.len() == 1
        && next.inputs[0] == value
        && last_use.get(&value) == Some(&at)
}

/// Whether `op` is a MaxPool2D with a 2x2 kernel, stride 2, no pads, dilation 1 and
/// floor mode (every window inside its input).
fn is_max_2x2(op: &Operator) -> bool {
    let p = Params::new(op);
    let is = |key: &str, want: &[i64]| p.ints(key).is_some_and(|v| v == want);
    let absent_or = |key: &str, want: &[i64]| p.ints(key).is_none_or(|v| v == want);
    op.op == Op::MaxPool2D
        && is("kernel", &[2, 2])
        && is("stride", &[2, 2])
        && absent_or("padding", &[0, 0, 0, 0])
        && absent_or("dilation", &[1, 1])
        && p.int("ceil_mode").unwrap_or(0) == 0
}

/// For each operator, what is fused into it. Operator `i` takes the activation of
/// operator `i + 1` when it is a Conv2D/DepthwiseConv2D/FullyConnected whose single output
/// only that Relu or Clip reads; a Conv2D then also takes the 2x2 / stride 2 max pool that
/// is the only reader of its (activated) output. The session runs operator `i` with the
/// fusion, stores its result under the last fused operator's output and skips the fused
/// operators.
pub(crate) fn fusion_plan(operators: &[Operator], last_use: &HashMap<u32, usize>) -> Vec<Fusion> {
    let mut plan = vec![Fusion::default(); operators.len()];
    let mut i = 0;
    while i < operators.len() {
        let op = &operators[i];
        if !produces_fusable(op) {
            i += 1;
            continue;
        }
        let mut f = Fusion::default();
        let mut value = op.outputs[0];
        let mut at = i + 1;
        if let Some(next) = operators.get(at) {
            if only_reader(next, at, value, last_use) {
                if let Some(a) = Act::of(next) {
                    f.act = Some(a);
                    value = next.outputs[0];
                    at += 1;
                }
            }
        }
        if op.op == Op::Conv2D {
            if let Some(next) = operators.get(at) {
                if only_reader(next, at, value, last_use) && is_max_2x2(next) {
                    f.pool = true;
                    at += 1;
                }
            }
        }
        plan[i] = f;
        i = at;
    }
    plan
}

#[cfg(test)]
mod tests {
    use tensorvault_formats::mobi::{DataType, ModelBuilder, ParamValue as P};

    use super::*;

    /// The plan of `Conv2D -> [Relu] -> MaxPool(kernel, stride, ceil)`, with the pre-pool
    /// value also a graph output when `keep`.
    fn plan(relu: bool, pool: (i64, i64, i64), keep: bool) -> Vec<Fusion> {
        let mut b = ModelBuilder::new("plan");
        let x = b.input("x", DataType::F32, &[1, 2, 8, 8]);
        let w = b.constant_f32(&[4, 2, 3, 3], &[0.5; 72]).unwrap();
        let mut y = b.op(Op::Conv2D, &[x, w], vec![]);
        if relu {
            y = b.op(Op::Relu, &[y], vec![]);
        }
        let (k, s, ceil) = pool;
        let z = b.op(
            Op::MaxPool2D,
            &[y],
            vec![
                ("kernel".into(), P::Ints(vec![k, k])),
                ("stride".into(), P::Ints(vec![s, s])),
                ("ceil_mode".into(), P::Int(ceil)),
            ],
        );
        b.output("z", DataType::F32, &[], z);
        if keep {
            b.output("y", DataType::F32, &[], y);
        }
        let model = b.build().unwrap();
        let mut last_use = HashMap::new();
        for (i, op) in model.operators.iter().enumerate() {
            for &id in &op.inputs {
                last_use.insert(id, i);
            }
        }
        for j in 0..model.outputs.len() {
            last_use.insert(model.output_id(j), usize::MAX);
        }
        fusion_plan(&model.operators, &last_use)
    }

    #[test]
    fn conv_takes_its_activation_and_a_2x2_pool_only() {
        let both = Fusion {
            act: Some(Act::Relu),
            pool: true,
        };
        assert_eq!(plan(true, (2, 2, 0), false)[0], both);
        assert_eq!(both.skipped(true), 2);
        assert_eq!(both.skipped(false), 1, "a declined pool runs after");
        let pool_only = plan(false, (2, 2, 0), false);
        assert_eq!(
            pool_only[0],
            Fusion {
                act: None,
                pool: true
            }
        );
        // A 3x3 window, stride 1, ceil mode, or a pre-pool (activated) value the caller
        // reads: no pool.
        for (p, keep) in [
            ((3, 2, 0), false),
            ((2, 1, 0), false),
            ((2, 2, 1), false),
            ((2, 2, 0), true),
        ] {
            let f = plan(true, p, keep);
            assert!(!f[0].pool, "{p:?} keep {keep}");
            assert_eq!(f[0].act, Some(Act::Relu), "the activation still fuses");
        }
    }
}
