//! The runtime's tensor: a shape and row-major f32 or i64 data; f32 weights may be used
//! in place from the model's payload ([`SharedF32`]), e.g. from the file's memory map.

use std::fmt;

use tensorvault_formats::mobi::Payload;

use crate::error::RuntimeError;

/// f32 values read in place from a constant tensor's [`Payload`] (little-endian bytes,
/// 4-byte aligned in memory, checked when made), sharing its memory: a weight tensor
/// of a model opened from a file stays in the file's memory map. Cloning is cheap.
#[derive(Clone)]
pub struct SharedF32 {
    // Invariant (checked by `new`, the payload is immutable): the bytes are 4-byte
    // aligned, a multiple of 4 long, and the host is little-endian.
    payload: Payload,
}

impl SharedF32 {
    /// A view of `payload` as f32 values, if its bytes are 4-byte aligned in memory and
    /// a multiple of 4 long on a little-endian host; `None` otherwise (the caller
    /// converts instead).
    pub fn new(payload: Payload) -> Option<Self> {
        if cfg!(target_endian = "big") {
            return None;
        }
        bytemuck::try_cast_slice::<u8, f32>(&payload).ok()?;
        Some(SharedF32 { payload })
    }

    /// The values.
    pub fn as_slice(&self) -> &[f32] {
        // `new` checked alignment and length of these (immutable) bytes, so the cast
        // cannot fail; the fallback is unreachable.
        bytemuck::try_cast_slice(&self.payload).unwrap_or_default()
    }

    /// Give back the resident pages of mapped values ([`Payload::release_pages`]; the
    /// values stay readable, from the file); returns the bytes released.
    pub fn release_pages(&self) -> usize {
        self.payload.release_pages()
    }

    /// Whether the values live in a file's memory map ([`Payload::is_mapped`]).
    pub fn is_mapped(&self) -> bool {
        self.payload.is_mapped()
    }
}

impl fmt::Debug for SharedF32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedF32")
            .field("len", &self.as_slice().len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// Element data of a [`Tensor`].
#[derive(Debug, Clone)]
pub enum Data {
    /// f32 values (activations, converted weights).
    F32(Vec<f32>),
    /// i64 values (indices, shapes).
    I64(Vec<i64>),
    /// f32 weights used in place from the model's payload (no copy).
    SharedF32(SharedF32),
    /// `len` f32 weights held only in the packed copy of the operators that read them
    /// (a session's dequantized Conv2D / FullyConnected weights, decoded straight into
    /// their panels; [`crate::ConstantMemory::dropped_bytes`]). Their values are not
    /// readable here: [`Data::as_f32`] gives an empty slice. Only a constant whose every
    /// reader is such an operator, and that is no graph output, is held this way, so
    /// no run reads it and no run returns it.
    Packed(usize),
}

impl Data {
    /// The f32 values (owned or shared), if this is f32 data (empty for
    /// [`Data::Packed`], whose values live only in a packed copy).
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Data::F32(v) => Some(v),
            Data::SharedF32(s) => Some(s.as_slice()),
            Data::Packed(_) => Some(&[]),
            Data::I64(_) => None,
        }
    }
}

/// Equal when the element types and values are equal (owned and shared f32 alike).
impl PartialEq for Data {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Data::I64(a), Data::I64(b)) => a == b,
            (Data::Packed(a), Data::Packed(b)) => a == b,
            (Data::Packed(_), _) | (_, Data::Packed(_)) => false,
            (a, b) => a.as_f32().is_some() && a.as_f32() == b.as_f32(),
        }
    }
}

/// A dense row-major tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Dimensions (empty for a scalar).
    pub shape: Vec<usize>,
    /// `product(shape)` elements.
    pub data: Data,
}

/// `product(shape)`, `None` on overflow.
pub fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

impl Tensor {
    /// An f32 tensor.
    ///
    /// # Errors
    /// [`RuntimeError::DataLength`] if `data.len()` is not the shape's element count.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, RuntimeError> {
        check_len(&shape, data.len())?;
        Ok(Tensor {
            shape,
            data: Data::F32(data),
        })
    }

    /// An i64 tensor.
    ///
    /// # Errors
    /// [`RuntimeError::DataLength`] if `data.len()` is not the shape's element count.
    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Result<Self, RuntimeError> {
        check_len(&shape, data.len())?;
        Ok(Tensor {
            shape,
            data: Data::I64(data),
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::SharedF32(s) => s.as_slice().len(),
            Data::Packed(n) => *n,
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The f32 values, if this is an f32 tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        self.data.as_f32()
    }

    /// The i64 values, if this is an i64 tensor.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            Data::I64(v) => Some(v),
            Data::F32(_) | Data::SharedF32(_) | Data::Packed(_) => None,
        }
    }

    /// `"f32"` or `"i64"`.
    pub fn dtype_name(&self) -> &'static str {
        match &self.data {
            Data::F32(_) | Data::SharedF32(_) | Data::Packed(_) => "f32",
            Data::I64(_) => "i64",
        }
    }

    /// Whether the values are weights used in place from a file's memory map.
    pub fn is_mapped(&self) -> bool {
        matches!(&self.data, Data::SharedF32(s) if s.is_mapped())
    }

    pub(crate) fn with_shape(&self, shape: Vec<usize>) -> Tensor {
        Tensor {
            shape,
            data: self.data.clone(),
        }
    }
}

fn check_len(shape: &[usize], len: usize) -> Result<(), RuntimeError> {
    if numel(shape) != Some(len) {
        return Err(RuntimeError::DataLength {
            shape: shape.to_vec(),
            len,
        });
    }
    Ok(())
}
