//! The op mapping: which ONNX op type is handled by which lowering. Adding a MOBI
//! operator is a row here plus its lowering (parameter keys in `params.rs`). The table is
//! documented in docs/onnx-import.md.

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::ops_linear as lin;
use crate::ops_nn as nn;
use crate::ops_tensor as t;

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
