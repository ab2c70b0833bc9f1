//! Constant tensors: ONNX `TensorProto` decoded into f32 or i64 values, with every size
//! checked against the bytes present before anything is allocated.

use crate::error::OnnxError;
use crate::limits::{dtype as dt, DATA_LOCATION_EXTERNAL, MAX_RANK, MAX_TENSOR_ELEMENTS};
use crate::proto::TensorProto;

/// The values of a constant: floating types widen to f32, integer and bool types to i64.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data {
    /// FLOAT, DOUBLE, FLOAT16, BFLOAT16.
    F32(Vec<f32>),
    /// INT8..INT64, UINT8..UINT64, BOOL.
    I64(Vec<i64>),
}

/// A constant tensor known at import time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Const {
    /// Dimensions.
    pub shape: Vec<u64>,
    /// Values, row-major.
    pub data: Data,
    /// The ONNX element type it has in the graph (for Cast and output types).
    pub dtype: i32,
}

/// Name of an ONNX element type code.
pub(crate) fn dtype_name(code: i32) -> &'static str {
    match code {
        dt::FLOAT => "FLOAT",
        dt::UINT8 => "UINT8",
        dt::INT8 => "INT8",
        dt::UINT16 => "UINT16",
        dt::INT16 => "INT16",
        dt::INT32 => "INT32",
        dt::INT64 => "INT64",
        dt::STRING => "STRING",
        dt::BOOL => "BOOL",
        dt::FLOAT16 => "FLOAT16",
        dt::DOUBLE => "DOUBLE",
        dt::UINT32 => "UINT32",
        dt::UINT64 => "UINT64",
        dt::BFLOAT16 => "BFLOAT16",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        _ => "unknown or 8/4-bit float",
    }
}

/// Whether values of this type are carried as f32.
pub(crate) fn is_float(code: i32) -> bool {
    matches!(code, dt::FLOAT | dt::DOUBLE | dt::FLOAT16 | dt::BFLOAT16)
}

/// Whether values of this type are carried as i64.
pub(crate) fn is_int(code: i32) -> bool {
    matches!(
        code,
        dt::UINT8
            | dt::INT8
            | dt::UINT16
            | dt::INT16
            | dt::INT32
            | dt::INT64
            | dt::BOOL
            | dt::UINT32
            | dt::UINT64
    )
}

fn byte_width(code: i32) -> u64 {
    match code {
        dt::UINT8 | dt::INT8 | dt::BOOL => 1,
        dt::UINT16 | dt::INT16 | dt::FLOAT16 | dt::BFLOAT16 => 2,
        dt::FLOAT | dt::INT32 | dt::UINT32 => 4,
        _ => 8,
    }
}

/// Check dims (non-negative, rank <= 8, element count <= the limit) and return them.
///
/// # Errors
/// [`OnnxError::BadDims`], [`OnnxError::TensorTooLarge`].
pub(crate) fn checked_shape(
    name: &str,
    field: &'static str,
    dims: &[i64],
) -> Result<Vec<u64>, OnnxError> {
    let bad = |index: usize, value: i64, why: &'static str| OnnxError::BadDims {
        tensor: name.to_string(),
        field,
        index,
        value,
        why,
    };
    if dims.len() > MAX_RANK {
        return Err(bad(
            MAX_RANK,
            dims.len() as i64,
            "rank above MOBI's limit of 8",
        ));
    }
    let mut n: u64 = 1;
    let mut shape = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        let d = u64::try_from(d).map_err(|_| bad(i, d, "negative"))?;
        n = n.saturating_mul(d);
        shape.push(d);
    }
    check_elements(name, n)?;
    Ok(shape)
}

/// Refuse element counts above [`MAX_TENSOR_ELEMENTS`].
///
/// # Errors
/// [`OnnxError::TensorTooLarge`].
pub(crate) fn check_elements(name: &str, n: u64) -> Result<(), OnnxError> {
    if n > MAX_TENSOR_ELEMENTS {
        return Err(OnnxError::TensorTooLarge {
            tensor: name.to_string(),
            elements: n,
            limit: MAX_TENSOR_ELEMENTS,
        });
    }
    Ok(())
}

fn count_check(
    name: &str,
    field: &'static str,
    expected: u64,
    found: usize,
    unit: &'static str,
) -> Result<(), OnnxError> {
    if expected != found as u64 {
        return Err(OnnxError::TensorSize {
            tensor: name.to_string(),
            field,
            expected,
            found: found as u64,
            unit,
        });
    }
    Ok(())
}

fn f16(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

fn bf16(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

fn from_raw(name: &str, code: i32, raw: &[u8], n: u64) -> Result<Data, OnnxError> {
    let w = byte_width(code);
    // n <= MAX_TENSOR_ELEMENTS, so n * 8 cannot overflow.
    count_check(name, "raw_data", n * w, raw.len(), "bytes")?;
    let le2 = |c: &[u8]| u16::from_le_bytes([c[0], c[1]]);
    let le4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    let le8 = |c: &[u8]| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        b
    };
    Ok(match code {
        dt::FLOAT => Data::F32(
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes(le4(c)))
                .collect(),
        ),
        dt::DOUBLE => Data::F32(
            raw.chunks_exact(8)
                .map(|c| f64::from_le_bytes(le8(c)) as f32)
                .collect(),
        ),
        dt::FLOAT16 => Data::F32(raw.chunks_exact(2).map(|c| f16(le2(c))).collect()),
        dt::BFLOAT16 => Data::F32(raw.chunks_exact(2).map(|c| bf16(le2(c))).collect()),
        dt::UINT8 | dt::BOOL => Data::I64(raw.iter().map(|&b| i64::from(b)).collect()),
        dt::INT8 => Data::I64(raw.iter().map(|&b| i64::from(b as i8)).collect()),
        dt::UINT16 => Data::I64(raw.chunks_exact(2).map(|c| i64::from(le2(c))).collect()),
        dt::INT16 => Data::I64(
            raw.chunks_exact(2)
                .map(|c| i64::from(le2(c) as i16))
                .collect(),
        ),
        dt::INT32 => Data::I64(
            raw.chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(le4(c))))
                .collect(),
        ),
        dt::UINT32 => Data::I64(
            raw.chunks_exact(4)
                .map(|c| i64::from(u32::from_le_bytes(le4(c))))
                .collect(),
        ),
        dt::INT64 => Data::I64(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes(le8(c)))
                .collect(),
        ),
        // UINT64: values above i64::MAX wrap; they only appear in index-like tensors,
        // where such a value is out of range anyway and refused by the op using it.
        _ => Data::I64(
            raw.chunks_exact(8)
                .map(|c| u64::from_le_bytes(le8(c)) as i64)
                .collect(),
        ),
    })
}

fn from_fields(name: &str, code: i32, t: &TensorProto, n: u64) -> Result<Data, OnnxError> {
    Ok(match code {
        dt::FLOAT => {
            count_check(name, "float_data", n, t.float_data.len(), "elements")?;
            Data::F32(t.float_data.clone())
        }
        dt::DOUBLE => {
            count_check(name, "double_data", n, t.double_data.len(), "elements")?;
            Data::F32(t.double_data.iter().map(|&v| v as f32).collect())
        }
        dt::FLOAT16 | dt::BFLOAT16 => {
            count_check(name, "int32_data", n, t.int32_data.len(), "elements")?;
            let conv = if code == dt::FLOAT16 { f16 } else { bf16 };
            Data::F32(t.int32_data.iter().map(|&v| conv(v as u16)).collect())
        }
        dt::INT64 => {
            count_check(name, "int64_data", n, t.int64_data.len(), "elements")?;
            Data::I64(t.int64_data.clone())
        }
        dt::UINT32 | dt::UINT64 => {
            count_check(name, "uint64_data", n, t.uint64_data.len(), "elements")?;
            Data::I64(t.uint64_data.iter().map(|&v| v as i64).collect())
        }
        _ => {
            count_check(name, "int32_data", n, t.int32_data.len(), "elements")?;
            Data::I64(t.int32_data.iter().map(|&v| i64::from(v)).collect())
        }
    })
}

impl Const {
    /// Decode an ONNX tensor (initializer, Constant value or attribute tensor).
    ///
    /// # Errors
    /// [`OnnxError::ExternalData`], [`OnnxError::UnsupportedDtype`], [`OnnxError::BadDims`],
    /// [`OnnxError::TensorTooLarge`], [`OnnxError::TensorSize`].
    pub(crate) fn from_proto(t: &TensorProto, name: &str) -> Result<Const, OnnxError> {
        if t.data_location == Some(DATA_LOCATION_EXTERNAL) || !t.external_data.is_empty() {
            return Err(OnnxError::ExternalData {
                tensor: name.to_string(),
            });
        }
        let code = t.data_type.unwrap_or(0);
        if !is_float(code) && !is_int(code) {
            return Err(OnnxError::UnsupportedDtype {
                what: "tensor",
                name: name.to_string(),
                dtype: code,
                dtype_name: dtype_name(code),
            });
        }
        let shape = checked_shape(name, "dims", &t.dims)?;
        let n: u64 = shape.iter().product();
        let data = match &t.raw_data {
            Some(raw) if !raw.is_empty() || n == 0 => from_raw(name, code, raw, n)?,
            _ => from_fields(name, code, t, n)?,
        };
        Ok(Const {
            shape,
            data,
            dtype: code,
        })
    }

    /// A scalar or vector of i64 values.
    pub(crate) fn ints(shape: Vec<u64>, v: Vec<i64>) -> Const {
        Const {
            shape,
            data: Data::I64(v),
            dtype: dt::INT64,
        }
    }

    /// An f32 tensor.
    pub(crate) fn floats(shape: Vec<u64>, v: Vec<f32>) -> Const {
        Const {
            shape,
            data: Data::F32(v),
            dtype: dt::FLOAT,
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    /// The values as f32 (integers converted).
    pub(crate) fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// This constant cast to ONNX element type `code` (Cast's `to`, CastLike's second
    /// input's type): floats stay f32 (FLOAT16 rounded to the nearest f16), BOOL is
    /// x != 0, the integer types truncate toward zero and wrap to their width as the
    /// run-time Cast does; `None` for a non-numeric type.
    pub(crate) fn cast(&self, code: i32) -> Option<Const> {
        let wrap = |v: i64| -> i64 {
            match code {
                dt::INT8 => i64::from(v as i8),
                dt::UINT8 => i64::from(v as u8),
                dt::INT16 => i64::from(v as i16),
                dt::UINT16 => i64::from(v as u16),
                dt::INT32 => i64::from(v as i32),
                dt::UINT32 => i64::from(v as u32),
                _ => v,
            }
        };
        let data = if code == dt::FLOAT16 {
            Data::F32(
                self.to_f32()
                    .iter()
                    .map(|&x| half::f16::from_f32(x).to_f32())
                    .collect(),
            )
        } else if is_float(code) {
            Data::F32(self.to_f32())
        } else if code == dt::BOOL {
            Data::I64(self.to_f32().iter().map(|&x| i64::from(x != 0.0)).collect())
        } else if is_int(code) {
            Data::I64(self.to_i64().into_iter().map(wrap).collect())
        } else {
            return None;
        };
        Some(Const {
            shape: self.shape.clone(),
            data,
            dtype: code,
        })
    }

    /// The values as i64 (floats truncated toward zero, as ONNX Cast does).
    pub(crate) fn to_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
        }
    }
}
