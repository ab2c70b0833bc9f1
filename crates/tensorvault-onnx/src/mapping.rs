//! The op mapping: which ONNX op type is handled by which lowering, and the MOBI
//! parameter keys the lowerings write. Adding a MOBI operator is a row here plus its
//! lowering. The table is documented in docs/onnx-import.md.

use tensorvault_formats::mobi::ParamValue;

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::{ops_linear as lin, ops_nn as nn, ops_tensor as t};

/// MOBI parameter keys (as the existing MOBI models write them; docs/formats/mobi.md).
pub(crate) mod keys {
    /// Window / convolution strides `[h, w]`.
    pub const STRIDE: &str = "stride";
    /// Explicit pads `[top, left, bottom, right]`.
    pub const PADDING: &str = "padding";
    /// Convolution dilations `[h, w]`.
    pub const DILATION: &str = "dilation";
    /// Tensor layout (`"NCHW"`).
    pub const LAYOUT: &str = "layout";
    /// Pooling window `[h, w]`.
    pub const KERNEL: &str = "kernel";
    /// Pooling: round the output size up (0/1).
    pub const CEIL_MODE: &str = "ceil_mode";
    /// Average pooling: count padded cells in the divisor (0/1).
    pub const COUNT_INCLUDE_PAD: &str = "count_include_pad";
    /// Axis of Softmax / Concat / Flatten.
    pub const AXIS: &str = "axis";
    /// Softmax temperature factor.
    pub const BETA: &str = "beta";
    /// BatchNorm epsilon.
    pub const EPSILON: &str = "epsilon";
    /// Reshape's target shape (fully resolved: no 0 or -1).
    pub const SHAPE: &str = "shape";
    /// Transpose permutation.
    pub const PERM: &str = "perm";
}

/// A lowering: reads the node's inputs from the context and defines its outputs.
pub(crate) type Lowering = fn(&mut Ctx, &Node) -> Result<(), OnnxError>;

/// ONNX op type -> lowering (default domain only).
const TABLE: &[(&str, Lowering)] = &[
    ("Conv", nn::conv),
    ("BatchNormalization", nn::batch_norm),
    ("Gemm", lin::gemm),
    ("MatMul", lin::matmul),
    ("MaxPool", nn::max_pool),
    ("AveragePool", nn::avg_pool),
    ("GlobalAveragePool", nn::global_avg_pool),
    ("GlobalMaxPool", nn::global_max_pool),
    ("ReduceMean", nn::reduce_mean),
    ("Relu", t::unary),
    ("Sigmoid", t::unary),
    ("Tanh", t::unary),
    ("Softmax", t::softmax),
    ("Add", t::binary),
    ("Sub", t::binary),
    ("Mul", t::binary),
    ("Div", t::binary),
    ("Sum", t::sum),
    ("Concat", t::concat),
    ("Reshape", t::reshape),
    ("Flatten", t::flatten),
    ("Transpose", t::transpose),
    ("Squeeze", t::squeeze),
    ("Unsqueeze", t::unsqueeze),
    ("Identity", t::identity),
    ("Dropout", t::dropout),
    ("Cast", t::cast),
    ("Constant", t::constant),
    ("Shape", t::shape),
    ("Clip", t::clip),
];

/// The lowering of an op type, if there is one.
pub(crate) fn lowering(op: &str) -> Option<Lowering> {
    TABLE.iter().find(|(name, _)| *name == op).map(|(_, f)| *f)
}

/// Every ONNX op type the importer lowers (for docs and `--help`).
pub fn supported_ops() -> Vec<&'static str> {
    TABLE.iter().map(|(name, _)| *name).collect()
}

/// `key = Ints(v)`.
pub(crate) fn ints(key: &str, v: &[u64]) -> (String, ParamValue) {
    (
        key.to_string(),
        ParamValue::Ints(v.iter().map(|&x| x as i64).collect()),
    )
}

/// `key = Int(v)`.
pub(crate) fn int(key: &str, v: i64) -> (String, ParamValue) {
    (key.to_string(), ParamValue::Int(v))
}

/// `key = Float(v)`.
pub(crate) fn float(key: &str, v: f64) -> (String, ParamValue) {
    (key.to_string(), ParamValue::Float(v))
}

/// `key = Str(v)`.
pub(crate) fn string(key: &str, v: &str) -> (String, ParamValue) {
    (key.to_string(), ParamValue::Str(v.to_string()))
}
