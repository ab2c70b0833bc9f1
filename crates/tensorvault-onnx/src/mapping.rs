//! The op mapping: which ONNX op type is handled by which lowering. Adding a MOBI
//! operator is a row here plus its lowering (parameter keys in `params.rs`). The table is
//! documented in docs/onnx-import.md.

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::ops_const as konst;
use crate::ops_conv_transpose as convt;
use crate::ops_ext as ext;
use crate::ops_linear as lin;
use crate::ops_logic as logic;
use crate::ops_nn as nn;
use crate::ops_resize as rs;
use crate::ops_shape as sh;
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
    ("GlobalAveragePool", nn::global_pool),
    ("GlobalMaxPool", nn::global_pool),
    ("LayerNormalization", ext::layer_norm),
    ("Softmax", t::softmax),
    ("LogSoftmax", t::softmax),
    ("Add", t::binary),
    ("Sub", t::binary),
    ("Mul", t::binary),
    ("Div", t::binary),
    ("Pow", ext::pow_prelu),
    ("PRelu", ext::pow_prelu),
    ("Sum", ext::variadic),
    ("Mean", ext::variadic),
    ("Max", ext::variadic),
    ("Min", ext::variadic),
    ("Clip", ext::clip),
    ("Concat", t::concat),
    ("Reshape", t::reshape),
    ("Flatten", t::flatten),
    ("Transpose", t::transpose),
    ("Squeeze", t::squeeze),
    ("Unsqueeze", t::unsqueeze),
    ("Pad", sh::pad),
    ("Slice", sh::slice),
    ("Split", sh::split),
    ("Gather", sh::gather),
    ("Expand", sh::expand),
    ("Tile", sh::tile),
    ("Identity", t::identity),
    ("Dropout", t::dropout),
    ("Cast", t::cast),
    ("CastLike", t::cast_like),
    ("Constant", t::constant),
    ("Shape", t::shape),
    ("Size", konst::size),
    ("ConstantOfShape", konst::constant_of_shape),
    ("ArgMax", logic::arg_extreme),
    ("ArgMin", logic::arg_extreme),
    ("Equal", logic::binary),
    ("Less", logic::binary),
    ("Greater", logic::binary),
    ("LessOrEqual", logic::binary),
    ("GreaterOrEqual", logic::binary),
    ("And", logic::binary),
    ("Or", logic::binary),
    ("Xor", logic::binary),
    ("Not", logic::not),
    ("Where", logic::where_),
    ("Resize", rs::resize),
    ("Upsample", rs::resize),
    ("ConvTranspose", convt::conv_transpose),
];

/// ONNX ops whose MOBI lowering runs on integer (and boolean) run-time values as well
/// as f32: data movement, the comparisons and logic ops, ArgMax/ArgMin, Where, Cast. The
/// others compute in f32 only, so an integer run-time input is refused at import
/// (`UnsupportedDtype`) rather than at run time.
const INTEGER_OK: &[&str] = &[
    "Reshape",
    "Flatten",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Expand",
    "Tile",
    "Pad",
    "Identity",
    "Dropout",
    "Cast",
    "CastLike",
    "Shape",
    "Size",
    "ConstantOfShape",
    "ArgMax",
    "ArgMin",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Where",
];

/// Whether op type `op` takes integer run-time inputs.
pub(crate) fn takes_integers(op: &str) -> bool {
    INTEGER_OK.contains(&op)
}

/// The lowering of an op type, if there is one.
pub(crate) fn lowering(op: &str) -> Option<Lowering> {
    if ext::UNARY.contains(&op) {
        return Some(ext::unary);
    }
    if ext::reduce_ops().any(|r| r == op) {
        return Some(ext::reduce);
    }
    TABLE.iter().find(|(name, _)| *name == op).map(|(_, f)| *f)
}

/// Every ONNX op type the importer lowers (for docs and `--help`).
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = TABLE.iter().map(|(name, _)| *name).collect();
    v.extend(ext::UNARY);
    v.extend(ext::reduce_ops());
    v.sort_unstable();
    v
}
