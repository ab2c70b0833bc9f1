//! The importer's constants and limits, in one place.

/// Lowest default-domain opset the importer accepts (opset 7 dropped the legacy
/// `broadcast`/`consumed_inputs` attributes).
pub const MIN_OPSET: i64 = 7;
/// Highest default-domain opset the importer knows the semantics of (onnx 1.23).
pub const MAX_OPSET: i64 = 28;
/// Default limit on the size of a model file (protobuf caps messages at 2 GiB).
pub const DEFAULT_MAX_MODEL_BYTES: u64 = 1 << 30;
/// Most elements one tensor may have, stored or computed by folding (256 Mi f32 = 1 GiB).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 28;
/// Highest rank a tensor may have (MOBI's limit).
pub const MAX_RANK: usize = 8;
/// Nodes between two progress callbacks.
pub const PROGRESS_EVERY: usize = 64;

/// ONNX `TensorProto.DataType` codes the importer reads.
pub mod dtype {
    /// FLOAT.
    pub const FLOAT: i32 = 1;
    /// UINT8.
    pub const UINT8: i32 = 2;
    /// INT8.
    pub const INT8: i32 = 3;
    /// UINT16.
    pub const UINT16: i32 = 4;
    /// INT16.
    pub const INT16: i32 = 5;
    /// INT32.
    pub const INT32: i32 = 6;
    /// INT64.
    pub const INT64: i32 = 7;
    /// STRING.
    pub const STRING: i32 = 8;
    /// BOOL.
    pub const BOOL: i32 = 9;
    /// FLOAT16.
    pub const FLOAT16: i32 = 10;
    /// DOUBLE.
    pub const DOUBLE: i32 = 11;
    /// UINT32.
    pub const UINT32: i32 = 12;
    /// UINT64.
    pub const UINT64: i32 = 13;
    /// BFLOAT16.
    pub const BFLOAT16: i32 = 16;
}

/// `TensorProto.DataLocation::EXTERNAL`.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;
