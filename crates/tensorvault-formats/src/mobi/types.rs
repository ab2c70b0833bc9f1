//! The model types: data and operator types, metadata, I/O specs, constant tensors,
//! operators and the [`Model`] that holds them.

use tensorvault_quant::affine::Affine;
use tensorvault_quant::float::f16_bits_to_f32;

use super::error::MobiError;

/// Element type of a tensor or I/O spec (the low byte of the on-disk DataType u16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// IEEE f32.
    F32 = 1,
    /// IEEE f16 (constant tensors carry scale/zero point fixed at 1.0/0 in v1).
    F16 = 2,
    /// Per-tensor affine int8 (scale + zero point).
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

    /// Whether constant tensors of this type carry scale f32 + zero_point i32.
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

/// A graph input or output: name, element type, shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoSpec {
    /// Name.
    pub name: String,
    /// Element type (no gzip bit, no quantization parameters).
    pub dtype: DataType,
    /// Shape.
    pub shape: Vec<u64>,
}

/// Per-tensor quantization parameters (`x = (q - zero_point) * scale`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantization {
    /// Scale (finite, > 0; 1.0 for fp16).
    pub scale: f32,
    /// Zero point (a valid code; 0 for fp16).
    pub zero_point: i32,
}

/// A constant tensor (weights). `data` holds the decoded (inflated) little-endian
/// payload; `gzip` says whether it is stored compressed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantTensor {
    /// Value id (unique among all values of the graph).
    pub id: u32,
    /// Element type.
    pub dtype: DataType,
    /// Shape.
    pub shape: Vec<u64>,
    /// Quantization parameters: `Some` exactly when [`DataType::has_quant_params`].
    pub quant: Option<Quantization>,
    /// Store the payload gzip-compressed.
    pub gzip: bool,
    /// The payload: `dtype.size() * product(shape)` little-endian bytes.
    pub data: Vec<u8>,
}

/// `product(shape)`, `None` on overflow.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

impl ConstantTensor {
    /// An f32 tensor from values (little-endian on disk).
    ///
    /// # Errors
    /// [`MobiError::InvalidModel`] if `values.len()` is not the shape's element count.
    pub fn from_f32(id: u32, shape: &[u64], values: &[f32]) -> Result<Self, MobiError> {
        let n = element_count(shape);
        if n != Some(values.len() as u64) {
            return Err(MobiError::InvalidModel {
                what: format!("tensor {id}"),
                reason: format!("{} values for shape {shape:?}", values.len()),
            });
        }
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(ConstantTensor {
            id,
            dtype: DataType::F32,
            shape: shape.to_vec(),
            quant: None,
            gzip: false,
            data,
        })
    }

    /// Number of elements (saturating on absurd shapes; decoded tensors never overflow).
    pub fn len(&self) -> u64 {
        element_count(&self.shape).unwrap_or(u64::MAX)
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as f32, dequantizing int8/uint8/int16/fp16 and widening i32/i64/bool.
    ///
    /// # Errors
    /// [`MobiError::DataSizeMismatch`] if `data` does not match dtype x shape,
    /// [`MobiError::Codec`] for unusable quantization parameters.
    pub fn to_f32(&self) -> Result<Vec<f32>, MobiError> {
        let esize = self.dtype.size();
        let n = self.len();
        if n.checked_mul(esize) != Some(self.data.len() as u64) {
            return Err(MobiError::DataSizeMismatch {
                tensor_id: self.id,
                offset: 0,
                expected: n.saturating_mul(esize),
                found: self.data.len() as u64,
            });
        }
        let q = self.quant.unwrap_or(Quantization {
            scale: 1.0,
            zero_point: 0,
        });
        let codec = |source| MobiError::Codec {
            tensor_id: self.id,
            source,
        };
        let d = &self.data;
        let mut out = vec![0f32; d.len() / esize as usize];
        match self.dtype {
            DataType::F32 => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            DataType::F16 => {
                let bits: Vec<u16> = d
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                f16_bits_to_f32(&bits, &mut out).map_err(codec)?;
            }
            DataType::I8 => {
                let codes: Vec<i8> = d.iter().map(|&b| b as i8).collect();
                Affine::<i8>::new(q.scale, q.zero_point)
                    .and_then(|a| a.dequantize(&codes, &mut out))
                    .map_err(codec)?;
            }
            DataType::U8 => Affine::<u8>::new(q.scale, q.zero_point)
                .and_then(|a| a.dequantize(d, &mut out))
                .map_err(codec)?,
            DataType::I16 => {
                let codes: Vec<i16> = d
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect();
                Affine::<i16>::new(q.scale, q.zero_point)
                    .and_then(|a| a.dequantize(&codes, &mut out))
                    .map_err(codec)?;
            }
            DataType::I32 => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(4)) {
                    *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32;
                }
            }
            DataType::I64 => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(8)) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    *o = i64::from_le_bytes(b) as f32;
                }
            }
            DataType::Bool => {
                for (o, &b) in out.iter_mut().zip(d) {
                    *o = f32::from(b);
                }
            }
        }
        Ok(out)
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
