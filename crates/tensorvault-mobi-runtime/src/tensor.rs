//! The runtime's tensor: a shape and row-major f32 or i64 data.

use crate::error::RuntimeError;

/// Element data of a [`Tensor`].
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// f32 values (activations, dequantized weights).
    F32(Vec<f32>),
    /// i64 values (indices, shapes).
    I64(Vec<i64>),
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
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The f32 values, if this is an f32 tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            Data::I64(_) => None,
        }
    }

    /// The i64 values, if this is an i64 tensor.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            Data::I64(v) => Some(v),
            Data::F32(_) => None,
        }
    }

    /// `"f32"` or `"i64"`.
    pub fn dtype_name(&self) -> &'static str {
        match &self.data {
            Data::F32(_) => "f32",
            Data::I64(_) => "i64",
        }
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
