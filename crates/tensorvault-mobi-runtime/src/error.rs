//! The runtime's error enum.

use tensorvault_formats::mobi::MobiError;

/// Why a model cannot be prepared or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The model is not valid (operator table, constants).
    #[error("mobi run: invalid model: {0}")]
    Model(#[from] MobiError),
    /// An operator input that no graph input, constant or earlier operator defines.
    #[error("mobi run: operator {index} ({op}): input value {value} is not defined before it")]
    UndefinedValue {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The value id.
        value: u32,
    },
    /// A graph output no operator produces.
    #[error("mobi run: graph output {name:?} (value {value}) is produced by no operator")]
    UnproducedOutput {
        /// Output name.
        name: String,
        /// Its value id.
        value: u32,
    },
    /// A tensor whose data length does not match its shape.
    #[error("mobi run: {len} values for shape {shape:?}")]
    DataLength {
        /// The shape.
        shape: Vec<usize>,
        /// The data length.
        len: usize,
    },
    /// A graph input not supplied.
    #[error("mobi run: missing input {name:?}")]
    MissingInput {
        /// The input name.
        name: String,
    },
    /// A supplied name that is no graph input.
    #[error("mobi run: unknown input {name:?} (the model's inputs: {known:?})")]
    UnknownInput {
        /// The name given.
        name: String,
        /// The model's input names.
        known: Vec<String>,
    },
    /// The same input supplied twice.
    #[error("mobi run: input {name:?} given twice")]
    DuplicateInput {
        /// The name.
        name: String,
    },
    /// An input of the wrong element type.
    #[error("mobi run: input {name:?} is {found}, the model expects {expected}")]
    InputDType {
        /// The name.
        name: String,
        /// What the model declares.
        expected: &'static str,
        /// What was given.
        found: &'static str,
    },
    /// An input of the wrong shape (the first dimension, the batch, and symbolic
    /// dimensions may differ).
    #[error("mobi run: input {name:?} has shape {found:?}, the model expects [{}] (any size on axis 0)", expected.join(", "))]
    InputShape {
        /// The name.
        name: String,
        /// The declared shape (symbolic dimensions by name, `?` when unnamed).
        expected: Vec<String>,
        /// The given shape.
        found: Vec<usize>,
    },
    /// An operator input whose shape breaks the operator's rule.
    #[error("mobi run: operator {index} ({op}): input value {value} with shape {shape:?}: {rule}")]
    Shape {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The offending value id.
        value: u32,
        /// Its shape.
        shape: Vec<usize>,
        /// The rule broken.
        rule: &'static str,
    },
    /// An operator input of the wrong element type (f32 where integers are needed or
    /// the reverse).
    #[error(
        "mobi run: operator {index} ({op}): input value {value} is {found}, expected {expected}"
    )]
    DType {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The value id.
        value: u32,
        /// Expected element type.
        expected: &'static str,
        /// Found element type.
        found: &'static str,
    },
    /// A parameter (or integer input value) that does not fit the actual shapes (an
    /// axis out of range, a shape whose size differs, ...).
    #[error("mobi run: operator {index} ({op}): {key} = {value}: {rule}")]
    Param {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The parameter (or input) name.
        key: &'static str,
        /// The offending value.
        value: i64,
        /// The rule broken.
        rule: &'static str,
    },
    /// A value (or scratch buffer) larger than the session's element limit.
    #[error("mobi run: operator {index} ({op}): output value {value} would have {elements} elements, over the limit {limit}")]
    TooLarge {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The value id (the first output).
        value: u32,
        /// Elements requested (saturated at u64::MAX).
        elements: u64,
        /// The limit ([`crate::Limits::max_elements`]).
        limit: u64,
    },
    /// An operator code newer than this runtime.
    #[error("mobi run: operator {index} ({op}) is not implemented by this runtime version")]
    Unsupported {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
    },
}
