//! The MOBI parameter keys the lowerings write (those of docs/formats/mobi.md) and
//! constructors of `(key, value)` pairs.

use tensorvault_formats::mobi::ParamValue;

/// MOBI parameter keys (as the existing MOBI models write them; docs/formats/mobi.md).
pub(crate) mod keys {
    /// Window / convolution strides `[h, w]`.
    pub const STRIDE: &str = "stride";
    /// Explicit pads `[top, left, bottom, right]`.
    pub const PADDING: &str = "padding";
    /// Conv2D groups (C and M divisible by it).
    pub const GROUP: &str = "group";
    /// Convolution / pooling dilations `[h, w]`.
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

/// `key = Ints(v)`.
pub(crate) fn ints(key: &str, v: &[u64]) -> (String, ParamValue) {
    (
        key.to_string(),
        ParamValue::Ints(v.iter().map(|&x| x as i64).collect()),
    )
}

/// `key = Ints(v)` from signed values.
pub(crate) fn ints_i64(key: &str, v: &[i64]) -> (String, ParamValue) {
    (key.to_string(), ParamValue::Ints(v.to_vec()))
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

/// The parameters of a Reshape to a fully resolved `target`: `shape`, plus `allowzero =
/// 1` when a dimension is 0 (MOBI's default reads a 0 as "copy the input dimension",
/// ONNX's opset-14 `allowzero` semantics are needed for an empty target dimension).
pub(crate) fn reshape_to(target: &[u64]) -> Vec<(String, ParamValue)> {
    let mut p = vec![ints(keys::SHAPE, target)];
    if target.contains(&0) {
        p.push(int("allowzero", 1));
    }
    p
}
