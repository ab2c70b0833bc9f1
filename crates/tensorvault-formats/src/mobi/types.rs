//! The model types: data and operator types, metadata, I/O specs, constant tensors,
//! operators and the [`Model`] that holds them.

use std::collections::BTreeMap;

use super::error::MobiError;
pub use super::tensor::{element_count, ConstantTensor, Quantization};

/// Element type of a tensor or I/O spec (the low byte of the on-disk DataType u16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// IEEE f32.
    F32 = 1,
    /// IEEE f16 (v1 constant tensors carry scale/zero point fixed at 1.0/0; v2 none).
    F16 = 2,
    /// Affine int8 (per-tensor or, in v2, per-axis scales and zero points).
    I8 = 3,
    /// Per-tensor affine uint8 (scale + zero point).
    U8 = 4,
    /// Per-tensor affine int16 (scale + zero point).
    I16 = 5,
    /// Plain i32.
    I32 = 6,
    /// Plain i64.
    I64 = 7,
    /// Bool, one byte per element (0 or 1).
    Bool = 8,
}

impl DataType {
    /// Every data type, in code order.
    pub const ALL: [DataType; 8] = [
        DataType::F32,
        DataType::F16,
        DataType::I8,
        DataType::U8,
        DataType::I16,
        DataType::I32,
        DataType::I64,
        DataType::Bool,
    ];

    /// The element-type code (low byte of the on-disk u16).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The type for a code, if v1 defines it.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            DataType::I8 | DataType::U8 | DataType::Bool => 1,
            DataType::F16 | DataType::I16 => 2,
            DataType::F32 | DataType::I32 => 4,
            DataType::I64 => 8,
        }
    }

    /// Whether v1 constant tensors of this type carry scale f32 + zero_point i32 (v2
    /// stores parameters for the affine types only: [`DataType::is_affine`]).
    pub fn has_quant_params(self) -> bool {
        matches!(
            self,
            DataType::F16 | DataType::I8 | DataType::U8 | DataType::I16
        )
    }

    /// Whether this is an affine-quantized integer type (sets header flag bit 0).
    pub fn is_affine(self) -> bool {
        matches!(self, DataType::I8 | DataType::U8 | DataType::I16)
    }

    /// Lower-case name (`f32`, `int8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "f32",
            DataType::F16 => "fp16",
            DataType::I8 => "int8",
            DataType::U8 => "uint8",
            DataType::I16 => "int16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::Bool => "bool",
        }
    }
}

macro_rules! operators {
    ($($name:ident = $code:literal),* $(,)?) => {
        /// Operator types, numbered in the seed's order. New operators get new codes;
        /// old codes never change meaning.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum OperatorType {
            $(
                #[doc = concat!("`", stringify!($name), "` (code ", stringify!($code), ").")]
                $name = $code,
            )*
        }

        impl OperatorType {
            /// Every operator type, in code order.
            pub const ALL: &'static [OperatorType] = &[$(OperatorType::$name),*];

            /// The type for a code, if this version defines it.
            pub fn from_code(code: u16) -> Option<Self> {
                match code {
                    $($code => Some(OperatorType::$name),)*
                    _ => None,
                }
            }

            /// The name, as in the seed (`Conv2D`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $(OperatorType::$name => stringify!($name),)*
                }
            }
        }
    };
}

operators! {
    Conv2D = 0, DepthwiseConv2D = 1, FullyConnected = 2, MaxPool2D = 3, AvgPool2D = 4,
    BatchNorm = 5, Relu = 6, Sigmoid = 7, Tanh = 8, Softmax = 9, Add = 10, Subtract = 11,
    Multiply = 12, Divide = 13, Concat = 14, Reshape = 15, Flatten = 16, Transpose = 17,
    MatMul = 18,
    // Operators added with the operator semantics (`ops.rs`, docs/formats/mobi.md).
    Clip = 19, Pad = 20, Slice = 21, Split = 22, Gather = 23, Squeeze = 24, Unsqueeze = 25,
    GlobalAveragePool = 26, GlobalMaxPool = 27, LeakyRelu = 28, HardSigmoid = 29,
    HardSwish = 30, Sum = 31, Mean = 32, Max = 33, Min = 34, Elu = 35, Selu = 36, Gelu = 37,
    Erf = 38, Exp = 39, Log = 40, Sqrt = 41, Reciprocal = 42, Neg = 43, Abs = 44, Floor = 45,
    Ceil = 46, Pow = 47, Sin = 48, Cos = 49, PRelu = 50, Softplus = 51, ReduceMean = 52,
    ReduceSum = 53, ReduceMax = 54, LayerNorm = 55, Identity = 56, Expand = 57, Tile = 58,
    ReduceMin = 59, ReduceProd = 60, ReduceL1 = 61, ReduceL2 = 62, ReduceSumSquare = 63,
    ReduceLogSum = 64, ReduceLogSumExp = 65, LogSoftmax = 66, Tan = 67, Asin = 68, Acos = 69,
    Atan = 70, Sinh = 71, Cosh = 72, Asinh = 73, Acosh = 74, Atanh = 75, Sign = 76, Round = 77,
    Softsign = 78, Celu = 79, ThresholdedRelu = 80, Mish = 81, Shrink = 82,
    // Index, comparison and logic operators (integer outputs: 0/1 for booleans).
    ArgMax = 83, ArgMin = 84, Equal = 85, Less = 86, Greater = 87, LessOrEqual = 88,
    GreaterOrEqual = 89, Not = 90, And = 91, Or = 92, Xor = 93, Where = 94, Cast = 95,
    // Spatial resampling.
    Resize = 96,
    // Transposed convolution.
    ConvTranspose2D = 97,
}

impl OperatorType {
    /// The on-disk code.
    pub fn code(self) -> u16 {
        self as u16
    }
}

/// A typed operator parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// i64 (tag 1).
    Int(i64),
    /// f64 (tag 2).
    Float(f64),
    /// UTF-8 string (tag 3).
    Str(String),
    /// i64 array (tag 4).
    Ints(Vec<i64>),
    /// f64 array (tag 5).
    Floats(Vec<f64>),
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v:?}"),
            ParamValue::Ints(v) => write!(f, "{v:?}"),
            ParamValue::Floats(v) => write!(f, "{v:?}"),
        }
    }
}

/// Model metadata. The input and output counts are those of [`Model::inputs`] and
/// [`Model::outputs`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    /// Model name.
    pub name: String,
    /// Version of the framework that produced the model.
    pub framework_version: u32,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
}

/// One dimension of a graph input or output: a fixed size, or (v2) a symbolic one
/// named like ONNX's `dim_param` (e.g. batch `"N"`); the empty name is an unnamed
/// dynamic dimension (ONNX's `-1`/missing `dim_value`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Fixed(u64),
    /// A size known only at run time, by name (empty: unnamed).
    Symbolic(String),
}

impl Dim {
    /// The fixed size, `None` for a symbolic dimension.
    pub fn fixed(&self) -> Option<u64> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Symbolic(_) => None,
        }
    }
}

impl PartialEq<u64> for Dim {
    /// A fixed dimension equals its size; a symbolic one equals no size.
    fn eq(&self, other: &u64) -> bool {
        self.fixed() == Some(*other)
    }
}

impl From<u64> for Dim {
    fn from(n: u64) -> Self {
        Dim::Fixed(n)
    }
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbolic(s) if s.is_empty() => write!(f, "?"),
            Dim::Symbolic(s) => write!(f, "{s}"),
        }
    }
}

/// `[1, N, 28]`-style text of a shape (symbolic names as stored; callers printing to a
/// terminal pass the result through [`super::printable`]).
pub fn shape_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A graph input or output: name, element type, shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoSpec {
    /// Name.
    pub name: String,
    /// Element type (no gzip bit, no quantization parameters).
    pub dtype: DataType,
    /// Shape; symbolic dimensions need format v2.
    pub shape: Vec<Dim>,
}

impl IoSpec {
    /// A spec with a fully fixed shape.
    pub fn new(name: impl Into<String>, dtype: DataType, shape: &[u64]) -> Self {
        IoSpec {
            name: name.into(),
            dtype,
            shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        }
    }

    /// The shape if every dimension is fixed.
    pub fn fixed_shape(&self) -> Option<Vec<u64>> {
        self.shape.iter().map(Dim::fixed).collect()
    }
}

/// One operator: type, input and output value ids, typed parameters (in file order).
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    /// The operator type.
    pub op: OperatorType,
    /// Input value ids.
    pub inputs: Vec<u32>,
    /// Output value ids.
    pub outputs: Vec<u32>,
    /// Parameters, keys unique.
    pub params: Vec<(String, ParamValue)>,
}

impl Operator {
    /// The parameter named `key`.
    pub fn param(&self, key: &str) -> Option<&ParamValue> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A whole model. Value ids: graph input `i` is id `i`, graph output `j` is id
/// `inputs.len() + j`; constants and intermediate values use any other ids.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Model {
    /// Metadata.
    pub metadata: Metadata,
    /// Graph inputs.
    pub inputs: Vec<IoSpec>,
    /// Graph outputs.
    pub outputs: Vec<IoSpec>,
    /// Constant tensors, in file order.
    pub tensors: Vec<ConstantTensor>,
    /// Operators, in execution (topological) order.
    pub operators: Vec<Operator>,
    /// Header flag bit 2: the graph is optimized (operators fused).
    pub optimized: bool,
    /// Names of values (v2 names table): value id -> name, optional per value, for
    /// intermediates (graph inputs and outputs are named by their specs). Lets a
    /// per-layer diff against another runtime find the same tensor.
    pub value_names: BTreeMap<u32, String>,
}

impl Model {
    /// The constant tensor with value id `id`.
    pub fn tensor(&self, id: u32) -> Option<&ConstantTensor> {
        self.tensors.iter().find(|t| t.id == id)
    }

    /// Total number of constant elements (parameters).
    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().map(ConstantTensor::len).sum()
    }

    /// The value id of graph input `i`.
    pub fn input_id(&self, i: usize) -> u32 {
        i as u32
    }

    /// The value id of graph output `j`.
    pub fn output_id(&self, j: usize) -> u32 {
        (self.inputs.len() + j) as u32
    }

    /// The name of value `id`: its names-table entry, else the graph input or output
    /// spec's name.
    pub fn value_name(&self, id: u32) -> Option<&str> {
        if let Some(n) = self.value_names.get(&id) {
            return Some(n);
        }
        let i = id as usize;
        self.inputs
            .get(i)
            .or_else(|| {
                i.checked_sub(self.inputs.len())
                    .and_then(|j| self.outputs.get(j))
            })
            .map(|s| s.name.as_str())
    }

    /// Convert every constant tensor to f32 in place (dequantize on request).
    ///
    /// # Errors
    /// As [`ConstantTensor::to_f32`].
    pub fn dequantize(&mut self) -> Result<(), MobiError> {
        for t in &mut self.tensors {
            if t.dtype != DataType::F32 {
                let v = t.to_f32()?;
                *t = ConstantTensor {
                    gzip: t.gzip,
                    ..ConstantTensor::from_f32(t.id, &t.shape, &v)?
                };
            }
        }
        Ok(())
    }
}
