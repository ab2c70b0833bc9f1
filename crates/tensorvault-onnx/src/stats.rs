//! The counters of what an import did.

/// What the import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// The default-domain opset of the model.
    pub opset: i64,
    /// ONNX nodes in the graph.
    pub nodes_in: usize,
    /// MOBI operators written.
    pub ops_out: usize,
    /// Initializers in the graph.
    pub initializers: usize,
    /// Constant nodes turned into constants.
    pub constants: usize,
    /// BatchNormalization nodes folded into the preceding Conv.
    pub folded_batchnorm: usize,
    /// Gemm nodes turned into FullyConnected.
    pub folded_gemm: usize,
    /// MatMul + Add pairs turned into one FullyConnected.
    pub folded_matmul_add: usize,
    /// Nodes evaluated at import time because all their inputs were constants.
    pub folded_constant: usize,
    /// Shape nodes of static shapes turned into constants.
    pub folded_shape: usize,
    /// Identity, Dropout, same-type Cast and one-input Sum nodes removed.
    pub removed: usize,
    /// Pre-opset-13 Softmax nodes lowered to Reshape + Softmax + Reshape.
    pub coerced_softmax: usize,
    /// Constant tensors stored quantized or as fp16.
    pub tensors_quantized: usize,
}
