//! MOBI's own error enum, wrapped by [`crate::FormatError::Mobi`].
//!
//! Every variant names the field or structure and the byte offset from the start of the
//! file (for writer-side errors, the tensor or operator involved).

use tensorvault_quant::QuantError;

/// A MOBI file (or model to be written) that cannot be decoded, encoded or trusted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MobiError {
    /// The first four bytes are not "MOBI".
    #[error("mobi: invalid magic at offset 0: expected \"MOBI\", found {found:02x?}")]
    InvalidMagic {
        /// What was there.
        found: [u8; 4],
    },
    /// A version this reader does not know (0, or above its own).
    #[error("mobi: unsupported version {version} at offset {offset} (this reader supports 1..={supported})")]
    UnsupportedVersion {
        /// The version found.
        version: u16,
        /// Offset of the version field.
        offset: u64,
        /// The highest version supported.
        supported: u16,
    },
    /// A reserved field or reserved bits are not zero.
    #[error("mobi: reserved bits {value:#x} set in {field} at offset {offset}")]
    ReservedBits {
        /// The field.
        field: &'static str,
        /// The offending bits.
        value: u64,
        /// Offset of the field.
        offset: u64,
    },
    /// The bytes end before a structure that must be there.
    #[error("mobi: truncated: {what} at offset {offset} needs {needed} bytes, {available} remain")]
    Truncated {
        /// The structure that does not fit.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes available from `offset` to the end of its section.
        available: u64,
    },
    /// A stored checksum does not match the bytes.
    #[error("mobi: {what} checksum mismatch at offset {offset}: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// `"header"` or `"file"`.
        what: &'static str,
        /// Offset of the stored checksum.
        offset: u64,
        /// Stored value.
        stored: u32,
        /// Computed value.
        computed: u32,
    },
    /// A header field disagrees with the file (total size) or the layout rules (section
    /// offsets out of order or out of range).
    #[error("mobi: invalid {field} {value} at offset {offset}: {reason}")]
    InvalidHeaderField {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// Offset of the field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A section does not end exactly where the next one starts.
    #[error("mobi: {section} section ends at offset {found} but the header says {expected}")]
    SectionBoundary {
        /// The section.
        section: &'static str,
        /// Where the next section starts according to the header.
        expected: u64,
        /// Where the parsed section ended.
        found: u64,
    },
    /// A count that cannot fit in the bytes present.
    #[error("mobi: {field} {count} at offset {offset} is impossible: at most {max} fit in the remaining bytes")]
    CountTooLarge {
        /// The count field.
        field: &'static str,
        /// The stored count.
        count: u64,
        /// Offset of the field.
        offset: u64,
        /// How many could fit.
        max: u64,
    },
    /// A name or string is not UTF-8.
    #[error("mobi: {field} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
        /// Offset of the bytes.
        offset: u64,
    },
    /// A rank above [`super::layout::MAX_RANK`].
    #[error("mobi: rank {rank} at offset {offset} exceeds the limit {max}")]
    RankTooLarge {
        /// The rank.
        rank: u16,
        /// Offset of the rank field.
        offset: u64,
        /// The limit.
        max: u16,
    },
    /// The product of a shape (times the element size) overflows u64.
    #[error("mobi: shape at offset {offset} overflows: element count or byte size exceeds u64")]
    ShapeOverflow {
        /// Offset of the shape.
        offset: u64,
    },
    /// An element type code this version does not define.
    #[error("mobi: unknown data type {value:#06x} in {field} at offset {offset}")]
    UnknownDataType {
        /// The field.
        field: &'static str,
        /// The whole u16.
        value: u16,
        /// Offset of the field.
        offset: u64,
    },
    /// A stored data size does not match dtype x shape (uncompressed), or the inflated size.
    #[error("mobi: tensor {tensor_id} at offset {offset}: data size {found} but dtype x shape needs {expected}")]
    DataSizeMismatch {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the tensor header (or the payload, for inflated sizes).
        offset: u64,
        /// Bytes dtype x shape require.
        expected: u64,
        /// Bytes stored (or inflated).
        found: u64,
    },
    /// Gzip inflation of the file's tensors together would exceed the per-file budget
    /// ([`super::ReadOptions::max_inflated_bytes`]).
    #[error("mobi: tensor {tensor_id} at offset {offset}: inflating it brings the file's gzip output to {total} bytes, over the {limit}-byte budget")]
    InflateBudget {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the tensor header.
        offset: u64,
        /// Inflated bytes of this and the earlier tensors.
        total: u64,
        /// The budget.
        limit: u64,
    },
    /// A decoded tensor larger than the reader's limit.
    #[error("mobi: tensor {tensor_id} at offset {offset} decodes to {size} bytes, above the limit {limit}")]
    TensorTooLarge {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the tensor header.
        offset: u64,
        /// Its decoded size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A gzip payload that does not inflate, or inflates beyond the declared size.
    #[error("mobi: tensor {tensor_id}: gzip payload at offset {offset}: {reason}")]
    Gzip {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the payload.
        offset: u64,
        /// What went wrong.
        reason: String,
    },
    /// Quantization parameters that are not usable (scale not finite/positive, zero point
    /// outside the code range, fp16 not (1.0, 0)).
    #[error("mobi: tensor {tensor_id}: invalid quantization parameters at offset {offset}: scale {scale}, zero_point {zero_point}: {reason}")]
    InvalidQuantization {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the parameters.
        offset: u64,
        /// Stored scale.
        scale: f32,
        /// Stored zero point.
        zero_point: i32,
        /// What is wrong.
        reason: &'static str,
    },
    /// Two tensors, or an operator output and another value, share an id.
    #[error("mobi: duplicate value id {id} ({what}) at offset {offset}")]
    DuplicateId {
        /// The id.
        id: u32,
        /// What redefined it.
        what: &'static str,
        /// Offset of the redefinition.
        offset: u64,
    },
    /// An operator type code this version does not define.
    #[error("mobi: operator {index} at offset {offset}: unknown operator type {value}")]
    UnknownOperator {
        /// Operator index.
        index: u32,
        /// The code.
        value: u16,
        /// Offset of the descriptor.
        offset: u64,
    },
    /// A parameter type tag this version does not define.
    #[error("mobi: operator {index}: unknown parameter type tag {tag} at offset {offset}")]
    UnknownParamTag {
        /// Operator index.
        index: u32,
        /// The tag.
        tag: u8,
        /// Offset of the tag.
        offset: u64,
    },
    /// An operator lists a parameter key twice.
    #[error("mobi: operator {index}: duplicate parameter {key:?} at offset {offset}")]
    DuplicateParam {
        /// Operator index.
        index: u32,
        /// The key.
        key: String,
        /// Offset of the second occurrence.
        offset: u64,
    },
    /// An operator input that is no graph input, constant or earlier operator output.
    #[error("mobi: operator {index} at offset {offset}: input {id} refers to no graph input, constant or earlier operator output")]
    MissingTensor {
        /// Operator index.
        index: u32,
        /// The id.
        id: u32,
        /// Offset of the descriptor.
        offset: u64,
    },
    /// A graph output no operator produces.
    #[error("mobi: graph output {index} (value id {id}) is produced by no operator")]
    UnproducedOutput {
        /// Output index.
        index: u32,
        /// Its value id.
        id: u32,
    },
    /// An operator with too few or too many inputs or outputs for its spec.
    #[error("mobi: operator {index} ({op}) at offset {offset}: {count} {what}, the spec allows {min}..={max}")]
    OperatorArity {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// `"inputs"` or `"outputs"`.
        what: &'static str,
        /// How many it has.
        count: u64,
        /// Fewest allowed.
        min: u16,
        /// Most allowed.
        max: u16,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// An input the spec requires to be a constant tensor (weights) is not one.
    #[error("mobi: operator {index} ({op}) at offset {offset}: input {input} (value id {id}) must be a constant tensor")]
    NonConstantInput {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The input's name in the spec.
        input: &'static str,
        /// Its value id.
        id: u32,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A constant input of a data type the input does not take (integers where floats
    /// are needed or the reverse).
    #[error("mobi: operator {index} ({op}) at offset {offset}: input {input} (value id {id}) is a {dtype} constant, which that input does not take")]
    InputDataType {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The input's name in the spec.
        input: &'static str,
        /// Its value id.
        id: u32,
        /// The constant's data type.
        dtype: &'static str,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A parameter key the operator's spec does not define (format version 2 and later).
    #[error("mobi: operator {index} ({op}) at offset {offset}: unknown parameter {key:?}")]
    UnknownParam {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The key.
        key: String,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A required parameter is absent.
    #[error(
        "mobi: operator {index} ({op}) at offset {offset}: required parameter {key:?} is missing"
    )]
    MissingParam {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The key.
        key: &'static str,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A parameter of the wrong type.
    #[error("mobi: operator {index} ({op}) at offset {offset}: parameter {key:?} is {found}, the spec says {expected}")]
    ParamType {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The key.
        key: &'static str,
        /// The type the spec gives.
        expected: &'static str,
        /// The type found.
        found: &'static str,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A parameter value outside its allowed values.
    #[error("mobi: operator {index} ({op}) at offset {offset}: parameter {key:?} = {value} is not allowed (allowed: {allowed})")]
    ParamValue {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The key.
        key: &'static str,
        /// The value, printed.
        value: String,
        /// What the spec allows.
        allowed: super::ops::Allowed,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// Parameters (or a parameter and an input) that disagree with each other.
    #[error("mobi: operator {index} ({op}) at offset {offset}: parameter {key:?}: {rule}")]
    ParamConflict {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The key.
        key: &'static str,
        /// The rule broken.
        rule: &'static str,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A constant input (weights) of the wrong rank.
    #[error("mobi: operator {index} ({op}) at offset {offset}: input {input} (tensor {id}) has rank {rank}, the spec needs {expected}")]
    ConstantRank {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The input's name in the spec.
        input: &'static str,
        /// The tensor's value id.
        id: u32,
        /// Its rank.
        rank: u64,
        /// The rank needed.
        expected: u64,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// A constant input (weights) with a dimension that disagrees with another.
    #[error("mobi: operator {index} ({op}) at offset {offset}: input {input} (tensor {id}) has {found} on axis {axis}, expected {expected} ({rule})")]
    ConstantDim {
        /// Operator index.
        index: u32,
        /// Operator type name.
        op: &'static str,
        /// The input's name in the spec.
        input: &'static str,
        /// The tensor's value id.
        id: u32,
        /// The axis.
        axis: u64,
        /// Its size.
        found: u64,
        /// The size needed.
        expected: u64,
        /// The rule.
        rule: &'static str,
        /// Offset of the operator descriptor.
        offset: u64,
    },
    /// The header flags disagree with the tensors.
    #[error("mobi: flag {flag} at offset {offset} is {stored} but the tensors say {actual}")]
    FlagMismatch {
        /// The flag.
        flag: &'static str,
        /// Offset of the flags field.
        offset: u64,
        /// Stored.
        stored: bool,
        /// Derived from the tensors.
        actual: bool,
    },
    /// A v2 varint that runs past 10 bytes, overflows u64 or has a redundant trailing
    /// zero group (every value has exactly one encoding).
    #[error("mobi: invalid varint in {field} at offset {offset}")]
    InvalidVarint {
        /// The field.
        field: &'static str,
        /// Offset of its first byte.
        offset: u64,
    },
    /// A v2 varint above its field's range (a u16/u32 field, the alignment, ...).
    #[error("mobi: {field} {value} at offset {offset} is out of range (at most {max})")]
    ValueOutOfRange {
        /// The field.
        field: &'static str,
        /// The value.
        value: u64,
        /// Offset of the field.
        offset: u64,
        /// The largest allowed value.
        max: u64,
    },
    /// A v2 name longer than [`super::layout::V2_MAX_NAME_BYTES`].
    #[error("mobi: {field} of {len} bytes at offset {offset} is longer than {max}")]
    NameTooLong {
        /// The field.
        field: &'static str,
        /// The stored length.
        len: u64,
        /// Offset of the length.
        offset: u64,
        /// The limit.
        max: u64,
    },
    /// Alignment padding before a v2 tensor payload that is not all zero bytes.
    #[error("mobi: tensor {tensor_id}: alignment padding at offset {offset} is not zero")]
    NonZeroPadding {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the padding.
        offset: u64,
    },
    /// A v2 quantization kind that does not fit the data type (an affine type without
    /// parameters, parameters on f32/fp16/i32/i64/bool).
    #[error(
        "mobi: tensor {tensor_id} at offset {offset}: {dtype} tensors cannot be {kind}-quantized"
    )]
    QuantKindMismatch {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the tensor flags.
        offset: u64,
        /// The data type.
        dtype: &'static str,
        /// The stored kind (`none`, `per-tensor`, `per-axis`, `reserved`).
        kind: &'static str,
    },
    /// Per-axis quantization parameters that are not usable.
    #[error("mobi: tensor {tensor_id}: per-axis {field} at offset {offset} (channel {channel}): {reason}")]
    InvalidPerAxis {
        /// The tensor.
        tensor_id: u32,
        /// Offset of the offending value.
        offset: u64,
        /// `axis`, `scale` or `zero_point`.
        field: &'static str,
        /// The channel (0 for the axis itself).
        channel: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A names-table entry out of order (ids must strictly increase) or naming a value
    /// the graph does not define.
    #[error("mobi: value names table: entry for value id {id} at offset {offset}: {reason}")]
    InvalidValueName {
        /// The value id.
        id: u32,
        /// Offset of the entry.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A model that cannot be written (lengths that do not fit, data that does not match).
    #[error("mobi: cannot write {what}: {reason}")]
    InvalidModel {
        /// The structure.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A codec error while quantizing or dequantizing a tensor.
    #[error("mobi: tensor {tensor_id}: {source}")]
    Codec {
        /// The tensor.
        tensor_id: u32,
        /// The codec's error.
        #[source]
        source: QuantError,
    },
}
