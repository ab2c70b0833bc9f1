//! Operator semantics: for every [`OperatorType`], a static [`OpSpec`] (input and output
//! arity, which inputs must be constants, every parameter key with its type, default,
//! allowed values and the op version that introduced it) and [`check_operator`], which
//! validates one operator of a model against it.
//!
//! The table is the single source of truth for the "Operator semantics" section of
//! `docs/formats/mobi.md` (a test checks the document names every operator and key).
//! Op versions follow TFLite: an operator starts at version 1 with the keys the seed's
//! models used; a parameter added later carries the version that introduced it and
//! defaults to the old behaviour, so an operator needs the highest version among the
//! parameters it sets ([`required_version`]).

mod shapes;
mod table;

use std::fmt;

use super::error::MobiError;
use super::types::{ConstantTensor, DataType, Model, Operator, OperatorType, ParamValue};

pub use table::spec;

/// The type of a parameter value (the on-disk tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamKind {
    /// i64 (tag 1).
    Int,
    /// f64 (tag 2).
    Float,
    /// UTF-8 string (tag 3).
    Str,
    /// i64 array (tag 4).
    Ints,
    /// f64 array (tag 5).
    Floats,
}

impl ParamKind {
    /// The kind of a value.
    pub fn of(v: &ParamValue) -> Self {
        match v {
            ParamValue::Int(_) => ParamKind::Int,
            ParamValue::Float(_) => ParamKind::Float,
            ParamValue::Str(_) => ParamKind::Str,
            ParamValue::Ints(_) => ParamKind::Ints,
            ParamValue::Floats(_) => ParamKind::Floats,
        }
    }

    /// Name as used in the spec (`int`, `float`, `string`, `ints`, `floats`).
    pub fn name(self) -> &'static str {
        match self {
            ParamKind::Int => "int",
            ParamKind::Float => "float",
            ParamKind::Str => "string",
            ParamKind::Ints => "ints",
            ParamKind::Floats => "floats",
        }
    }
}

/// The value a parameter takes when an operator does not set it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamDefault {
    /// The parameter must be present.
    Required,
    /// The default depends on the inputs (e.g. "all axes"); the text says how.
    Derived(&'static str),
    /// An i64.
    Int(i64),
    /// An f64.
    Float(f64),
    /// A string.
    Str(&'static str),
    /// An i64 array.
    Ints(&'static [i64]),
}

impl fmt::Display for ParamDefault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamDefault::Required => write!(f, "required"),
            ParamDefault::Derived(s) => write!(f, "{s}"),
            ParamDefault::Int(v) => write!(f, "{v}"),
            ParamDefault::Float(v) => write!(f, "{v}"),
            ParamDefault::Str(v) => write!(f, "{v:?}"),
            ParamDefault::Ints(v) => write!(f, "{v:?}"),
        }
    }
}

/// The values a parameter may take.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Allowed {
    /// Any value of the kind (floats: not NaN).
    Any,
    /// An int in `lo..=hi`.
    IntRange(i64, i64),
    /// A float in `lo..=hi` (not NaN).
    FloatRange(f64, f64),
    /// One of these strings.
    Strs(&'static [&'static str]),
    /// An int array whose every element is `>= min`, of exactly `len` elements when given.
    Ints {
        /// Exact length, if fixed.
        len: Option<usize>,
        /// Smallest element.
        min: i64,
    },
    /// A float array whose every element is finite and > 0 (scale factors).
    PositiveFloats,
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allowed::Any => write!(f, "any (floats not NaN)"),
            Allowed::IntRange(lo, hi) if *hi == i64::MAX => write!(f, ">= {lo}"),
            Allowed::IntRange(lo, hi) => write!(f, "{lo}..={hi}"),
            Allowed::FloatRange(lo, hi) => write!(f, "{lo}..={hi}"),
            Allowed::Strs(s) => write!(f, "one of {s:?}"),
            Allowed::Ints { len: Some(n), min } if *min == i64::MIN => {
                write!(f, "{n} ints")
            }
            Allowed::Ints { len: Some(n), min } => write!(f, "{n} ints, each >= {min}"),
            Allowed::Ints { len: None, min } if *min == i64::MIN => write!(f, "any ints"),
            Allowed::Ints { len: None, min } => write!(f, "ints, each >= {min}"),
            Allowed::PositiveFloats => write!(f, "floats, each finite and > 0"),
        }
    }
}

impl Allowed {
    /// Whether `v` (already of the right kind) is allowed.
    pub fn admits(&self, v: &ParamValue) -> bool {
        match (self, v) {
            (_, ParamValue::Float(x)) if x.is_nan() => false,
            (_, ParamValue::Floats(x)) if x.iter().any(|x| x.is_nan()) => false,
            (Allowed::Any, _) => true,
            (Allowed::IntRange(lo, hi), ParamValue::Int(x)) => (lo..=hi).contains(&x),
            (Allowed::FloatRange(lo, hi), ParamValue::Float(x)) => (lo..=hi).contains(&x),
            (Allowed::Strs(s), ParamValue::Str(x)) => s.contains(&x.as_str()),
            (Allowed::Ints { len, min }, ParamValue::Ints(x)) => {
                len.is_none_or(|n| n == x.len()) && x.iter().all(|v| v >= min)
            }
            (Allowed::PositiveFloats, ParamValue::Floats(x)) => {
                x.iter().all(|v| v.is_finite() && *v > 0.0)
            }
            _ => false,
        }
    }
}

/// One parameter of an operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    /// The key.
    pub key: &'static str,
    /// Its type.
    pub kind: ParamKind,
    /// Its default.
    pub default: ParamDefault,
    /// Its allowed values.
    pub allowed: Allowed,
    /// The op version that introduced it.
    pub since: u16,
    /// What it means (one line, for the spec).
    pub doc: &'static str,
}

/// What an operator input may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputKind {
    /// An f32 value: a graph input, an operator output or a constant of any float or
    /// quantized type (dequantized to f32).
    Tensor,
    /// A constant tensor (weights), dequantized to f32.
    Constant,
    /// An integer tensor (i64 or i32): a constant or an i64 graph input/value.
    Integer,
    /// An f32 or integer value (comparisons, logic, `Where`'s branches): a constant of
    /// any type or a graph input/value; booleans are integers 0/1, any non-zero value
    /// counts as true.
    Numeric,
}

/// One input position of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputSpec {
    /// The input's name in the spec.
    pub name: &'static str,
    /// What it may be.
    pub kind: InputKind,
}

/// The static specification of one operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpSpec {
    /// The operator.
    pub op: OperatorType,
    /// Its current version (the highest `since` of its parameters, or higher when the
    /// semantics of existing inputs were extended).
    pub version: u16,
    /// The inputs in order; an operator with more inputs than listed repeats the last
    /// (variadic operators).
    pub inputs: &'static [InputSpec],
    /// Fewest inputs.
    pub min_inputs: u16,
    /// Most inputs.
    pub max_inputs: u16,
    /// Fewest outputs.
    pub min_outputs: u16,
    /// Most outputs.
    pub max_outputs: u16,
    /// Every parameter key.
    pub params: &'static [ParamSpec],
    /// The semantics in one paragraph (the ONNX operator and opset it follows, layouts,
    /// broadcasting).
    pub semantics: &'static str,
}

impl OpSpec {
    /// The spec of input position `i` (the last one repeats for variadic operators).
    pub fn input(&self, i: usize) -> Option<&'static InputSpec> {
        self.inputs.get(i).or(self.inputs.last())
    }

    /// The spec of parameter `key`.
    pub fn param(&self, key: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.key == key)
    }
}

/// What to do with parameter keys the table does not define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownKeys {
    /// An error ([`MobiError::UnknownParam`]): producers ([`check_model`]) and files of
    /// format version [`STRICT_KEYS_FROM_VERSION`] and later.
    Reject,
    /// Kept and ignored: files of format versions 1 and 2, whose writers let keys be
    /// free annotations (both golden fixtures carry some, and must decode forever).
    Ignore,
}

/// The first file format version whose reader refuses parameter keys the table does not
/// define. Versions 1 and 2 were specified with free annotation keys.
pub const STRICT_KEYS_FROM_VERSION: u16 = 3;

/// The op version an operator needs: the highest `since` among the parameters it sets
/// (1 when it sets none).
pub fn required_version(op: &Operator) -> u16 {
    let s = spec(op.op);
    op.params
        .iter()
        .filter_map(|(k, _)| s.param(k))
        .map(|p| p.since)
        .fold(1, u16::max)
}

/// Check operator `index` of a model against its [`OpSpec`]: input and output arity,
/// constant-only inputs, every parameter's key, type and value, and the shapes of
/// constant weights where they are static (Conv2D weights rank 4 and bias length equal
/// to the output channels, ...). `constant` looks a value id up among the model's
/// constant tensors; `offset` is the operator's byte offset in the file (0 when not read
/// from a file).
///
/// # Errors
/// [`MobiError::OperatorArity`], [`MobiError::NonConstantInput`],
/// [`MobiError::InputDataType`], [`MobiError::UnknownParam`], [`MobiError::MissingParam`],
/// [`MobiError::ParamType`], [`MobiError::ParamValue`], [`MobiError::ConstantRank`] or
/// [`MobiError::ConstantDim`], naming the operator index, its type and the offset.
pub fn check_operator<'m>(
    index: usize,
    op: &Operator,
    constant: impl Fn(u32) -> Option<&'m ConstantTensor>,
    offset: u64,
    unknown: UnknownKeys,
) -> Result<(), MobiError> {
    let s = spec(op.op);
    let index = index as u32;
    let name = op.op.name();
    for (what, n, min, max) in [
        ("inputs", op.inputs.len(), s.min_inputs, s.max_inputs),
        ("outputs", op.outputs.len(), s.min_outputs, s.max_outputs),
    ] {
        if n < usize::from(min) || n > usize::from(max) {
            return Err(MobiError::OperatorArity {
                index,
                op: name,
                what,
                count: n as u64,
                min,
                max,
                offset,
            });
        }
    }
    for (pos, &id) in op.inputs.iter().enumerate() {
        let Some(is) = s.input(pos) else { continue };
        let c = constant(id);
        if is.kind == InputKind::Constant && c.is_none() {
            return Err(MobiError::NonConstantInput {
                index,
                op: name,
                input: is.name,
                id,
                offset,
            });
        }
        if let Some(t) = c {
            let ok = match is.kind {
                InputKind::Integer => matches!(t.dtype, DataType::I64 | DataType::I32),
                InputKind::Numeric => true,
                _ => !matches!(t.dtype, DataType::I32 | DataType::I64 | DataType::Bool),
            };
            if !ok {
                return Err(MobiError::InputDataType {
                    index,
                    op: name,
                    input: is.name,
                    id,
                    dtype: t.dtype.name(),
                    offset,
                });
            }
        }
    }
    for (key, v) in &op.params {
        let Some(ps) = s.param(key) else {
            if unknown == UnknownKeys::Reject {
                return Err(MobiError::UnknownParam {
                    index,
                    op: name,
                    key: key.clone(),
                    offset,
                });
            }
            continue;
        };
        let kind = ParamKind::of(v);
        if kind != ps.kind {
            return Err(MobiError::ParamType {
                index,
                op: name,
                key: ps.key,
                expected: ps.kind.name(),
                found: kind.name(),
                offset,
            });
        }
        if !ps.allowed.admits(v) {
            return Err(MobiError::ParamValue {
                index,
                op: name,
                key: ps.key,
                value: v.to_string(),
                allowed: ps.allowed,
                offset,
            });
        }
    }
    if let Some(ps) = s
        .params
        .iter()
        .find(|p| p.default == ParamDefault::Required && op.param(p.key).is_none())
    {
        return Err(MobiError::MissingParam {
            index,
            op: name,
            key: ps.key,
            offset,
        });
    }
    shapes::check(index, op, &constant, offset)
}

/// Check every operator of `model` ([`check_operator`]), pushing each problem to `p`.
/// `offsets[i]` is operator `i`'s byte offset (0 where missing); `format_version` picks
/// the [`UnknownKeys`] policy (below [`STRICT_KEYS_FROM_VERSION`]: ignore, else reject).
pub fn check_operators(
    model: &Model,
    offsets: &[u64],
    format_version: u16,
    p: &mut Vec<MobiError>,
) {
    let constants: std::collections::HashMap<u32, &ConstantTensor> =
        model.tensors.iter().map(|t| (t.id, t)).collect();
    let unknown = if format_version < STRICT_KEYS_FROM_VERSION {
        UnknownKeys::Ignore
    } else {
        UnknownKeys::Reject
    };
    for (i, op) in model.operators.iter().enumerate() {
        let at = offsets.get(i).copied().unwrap_or(0);
        if let Err(e) = check_operator(i, op, |id| constants.get(&id).copied(), at, unknown) {
            p.push(e);
        }
    }
}

/// Check every operator of an in-memory model with the strict policy (unknown keys
/// rejected), for producers such as importers before they write.
///
/// # Errors
/// The first problem [`check_operator`] finds.
pub fn check_model(model: &Model) -> Result<(), MobiError> {
    let mut p = Vec::new();
    check_operators(model, &[], u16::MAX, &mut p);
    p.into_iter().next().map_or(Ok(()), Err)
}

/// Typed access to an operator's parameters, falling back to the table's defaults.
/// Meant for operators that passed [`check_operator`] (a value of the wrong kind reads
/// as absent).
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    op: &'a Operator,
    spec: &'static OpSpec,
}

impl<'a> Params<'a> {
    /// The parameters of `op`.
    pub fn new(op: &'a Operator) -> Self {
        Params {
            op,
            spec: spec(op.op),
        }
    }

    fn default(&self, key: &str) -> ParamDefault {
        self.spec
            .param(key)
            .map_or(ParamDefault::Required, |p| p.default)
    }

    /// An int parameter or its default.
    pub fn int(&self, key: &str) -> Option<i64> {
        match (self.op.param(key), self.default(key)) {
            (Some(ParamValue::Int(v)), _) => Some(*v),
            (None, ParamDefault::Int(v)) => Some(v),
            _ => None,
        }
    }

    /// A float parameter or its default.
    pub fn float(&self, key: &str) -> Option<f64> {
        match (self.op.param(key), self.default(key)) {
            (Some(ParamValue::Float(v)), _) => Some(*v),
            (None, ParamDefault::Float(v)) => Some(v),
            _ => None,
        }
    }

    /// A string parameter or its default.
    pub fn str(&self, key: &str) -> Option<&'a str> {
        match (self.op.param(key), self.default(key)) {
            (Some(ParamValue::Str(v)), _) => Some(v.as_str()),
            (None, ParamDefault::Str(v)) => Some(v),
            _ => None,
        }
    }

    /// A float-array parameter (`None` when absent: no float-array key has a fixed
    /// default).
    pub fn floats(&self, key: &str) -> Option<&'a [f64]> {
        match self.op.param(key) {
            Some(ParamValue::Floats(v)) => Some(v.as_slice()),
            _ => None,
        }
    }

    /// An int-array parameter or its default (`None` when absent with a derived default).
    pub fn ints(&self, key: &str) -> Option<&'a [i64]> {
        match (self.op.param(key), self.default(key)) {
            (Some(ParamValue::Ints(v)), _) => Some(v.as_slice()),
            (None, ParamDefault::Ints(v)) => Some(v),
            _ => None,
        }
    }
}
