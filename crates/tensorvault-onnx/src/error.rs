//! The crate's one error enum. Every variant names what was wrong and where: the ONNX op
//! type and node name for graph problems, the tensor and field for data problems, the
//! protobuf field path (as prost reports it) for framing problems.

use tensorvault_formats::mobi::MobiError;

/// Why an ONNX model cannot be imported (nothing is written when this is returned).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// Reading the model file failed.
    #[error("onnx: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than the configured limit (checked before it is read).
    #[error("onnx: model is {size} bytes, above the limit of {limit} bytes (ImportOptions::max_model_bytes)")]
    TooLarge {
        /// Size of the model in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The protobuf framing is broken (truncated message, length past the end, bad
    /// varint, wrong wire type). `detail` is prost's description, which names the
    /// message and field path (`ModelProto.graph: ...`).
    #[error("onnx: invalid protobuf: {detail}")]
    Decode {
        /// prost's description of the failure, with the field path.
        detail: String,
    },
    /// The model has no graph.
    #[error("onnx: ModelProto.graph is missing")]
    NoGraph,
    /// The default (`ai.onnx`) domain's opset is missing from `opset_import` or outside
    /// the supported range.
    #[error("onnx: opset_import: default-domain opset {version} is not supported (supported: {min}..={max})")]
    UnsupportedOpset {
        /// The version found (0 when the default domain is not imported).
        version: i64,
        /// Lowest supported version.
        min: i64,
        /// Highest supported version.
        max: i64,
    },
    /// A tensor keeps its data in a file beside the model (`data_location = EXTERNAL`).
    #[error("onnx: tensor {tensor:?} stores its data externally (data_location=EXTERNAL); save the model with its weights inside (onnx.save_model(..., save_as_external_data=False))")]
    ExternalData {
        /// The tensor (initializer or Constant value) name.
        tensor: String,
    },
    /// A tensor or value of an element type the importer cannot carry.
    #[error("onnx: {what} {name:?} has element type {dtype} ({dtype_name}), not supported")]
    UnsupportedDtype {
        /// `"tensor"` or `"graph input"` / `"graph output"`.
        what: &'static str,
        /// Its name.
        name: String,
        /// The ONNX `TensorProto.DataType` code.
        dtype: i32,
        /// The code's name.
        dtype_name: &'static str,
    },
    /// A dimension of a tensor is negative, or the dims overflow or exceed a limit.
    #[error("onnx: tensor {tensor:?}: {field} {value} at index {index} is invalid ({why})")]
    BadDims {
        /// The tensor.
        tensor: String,
        /// The field (`dims`, `shape`).
        field: &'static str,
        /// Index in the field.
        index: usize,
        /// The value.
        value: i64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A tensor's stored data does not match its dims and data type.
    #[error(
        "onnx: tensor {tensor:?}: {field} holds {found} {unit}, dims x data type need {expected}"
    )]
    TensorSize {
        /// The tensor.
        tensor: String,
        /// The field the data is in (`raw_data`, `float_data`, ...).
        field: &'static str,
        /// What the dims and type need.
        expected: u64,
        /// What the field holds.
        found: u64,
        /// `"bytes"` or `"elements"`.
        unit: &'static str,
    },
    /// A tensor (stored, or the result of folding) is larger than the importer's limit.
    #[error("onnx: tensor {tensor:?} would have {elements} elements, above the limit of {limit}")]
    TensorTooLarge {
        /// The tensor.
        tensor: String,
        /// Elements it would have.
        elements: u64,
        /// The limit.
        limit: u64,
    },
    /// A graph input's or output's type or shape is missing.
    #[error("onnx: {what} {name:?} has no tensor type with a shape")]
    MissingType {
        /// `"graph input"` or `"graph output"`.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// A graph input has a symbolic or unknown dimension where one is not allowed.
    #[error("onnx: graph input {input:?} dimension {index} is symbolic ({symbol:?}); pin it with ImportOptions::pin_symbolic_dims (CLI --batch N)")]
    SymbolicDim {
        /// The graph input.
        input: String,
        /// Index of the dimension.
        index: usize,
        /// The `dim_param` (empty when the dimension is simply unknown).
        symbol: String,
    },
    /// With symbolic input dimensions kept, something other than an I/O dim or one
    /// Reshape entry depends on them (a constant computed from the batch size, a second
    /// symbolic Reshape entry, ...).
    #[error("onnx: {op} {index}: its {what} depends on a symbolic input dimension in a way MOBI cannot express; pin the dimensions with ImportOptions::pin_symbolic_dims (CLI --batch N)")]
    SymbolicShape {
        /// Index of the operator (or tensor / I/O spec).
        index: usize,
        /// The MOBI operator type or structure.
        op: &'static str,
        /// What depends on the symbolic dimension.
        what: &'static str,
    },
    /// A name is defined twice (two initializers, two node outputs, an input and an
    /// output, ...): ONNX graphs are single-assignment.
    #[error("onnx: value {name:?} is defined twice (second time by {by})")]
    DuplicateValue {
        /// The value name.
        name: String,
        /// What defines it the second time.
        by: String,
    },
    /// A node reads a value no graph input, initializer or node defines.
    #[error("onnx: {op} node {node:?} reads {input:?}, which nothing defines")]
    DanglingValue {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// The missing input.
        input: String,
    },
    /// The nodes form a cycle (no topological order exists).
    #[error("onnx: the graph has a cycle through {op} node {node:?}")]
    Cycle {
        /// The op type of a node on the cycle.
        op: String,
        /// Its name.
        node: String,
    },
    /// A graph output names a value nothing defines.
    #[error("onnx: graph output {name:?} is not produced by any node, input or initializer")]
    DanglingOutput {
        /// The output name.
        name: String,
    },
    /// An op type (or domain) with no mapping to MOBI.
    #[error("onnx: {op} node {node:?} (domain {domain:?}): {why}")]
    UnsupportedOp {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// The node's domain (empty = ai.onnx).
        domain: String,
        /// Why it is not supported.
        why: &'static str,
    },
    /// An attribute value (or the combination of inputs) MOBI cannot express.
    #[error("onnx: {op} node {node:?}: {attribute} = {value} is not supported: {why}")]
    UnsupportedAttribute {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// The attribute (or input) name.
        attribute: &'static str,
        /// Its value, printed.
        value: String,
        /// Why.
        why: &'static str,
    },
    /// An attribute has the wrong type, or a required one is missing.
    #[error("onnx: {op} node {node:?}: attribute {attribute:?} {why}")]
    BadAttribute {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// The attribute.
        attribute: String,
        /// What is wrong (`"is missing"`, `"must be INTS"`...).
        why: &'static str,
    },
    /// A node has too few or too many inputs or outputs.
    #[error("onnx: {op} node {node:?} has {found} {what}, expected {expected}")]
    Arity {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// `"inputs"` or `"outputs"`.
        what: &'static str,
        /// What the op takes (e.g. `"2..=3"`).
        expected: &'static str,
        /// What the node has.
        found: usize,
    },
    /// An input that MOBI needs as a constant (weights, shapes, axes) is computed at run
    /// time.
    #[error("onnx: {op} node {node:?}: input {index} ({input:?}) must be a constant (an initializer or foldable), but is computed at run time")]
    NotConstant {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// Input index.
        index: usize,
        /// Input name.
        input: String,
    },
    /// Input shapes or element types that do not fit the op.
    #[error("onnx: {op} node {node:?}: {detail}")]
    Shape {
        /// The op type.
        op: String,
        /// The node name.
        node: String,
        /// Shapes involved and the rule broken.
        detail: String,
    },
    /// Writing the MOBI file failed (nothing is left at the destination).
    #[error("onnx: writing {path}: {source}")]
    Save {
        /// The destination.
        path: String,
        /// The cause.
        #[source]
        source: tensorvault_formats::FormatError,
    },
    /// The MOBI model could not be built or encoded.
    #[error("onnx: building the MOBI model: {0}")]
    Mobi(#[from] MobiError),
}
