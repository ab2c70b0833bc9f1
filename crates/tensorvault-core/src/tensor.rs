//! Owned tensors and borrowed views.

use crate::dtype::Element;
use crate::{AlignedBuf, CoreError, DType, Shape};

/// An owned tensor: a dtype, a shape and a 64-byte-aligned byte buffer holding
/// `shape.numel() * dtype.size()` bytes in row-major, little-endian order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Shape,
    data: AlignedBuf<u8>,
}

impl Tensor {
    /// A zero-filled tensor.
    ///
    /// # Errors
    /// [`CoreError::ShapeOverflow`] if the byte size overflows `usize`.
    pub fn zeros(dtype: DType, shape: Shape) -> Result<Self, CoreError> {
        let bytes = shape.byte_len(dtype.size())?;
        Ok(Tensor {
            dtype,
            shape,
            data: AlignedBuf::zeroed(bytes),
        })
    }

    /// Wrap a typed aligned buffer as a tensor of `shape`.
    ///
    /// # Errors
    /// [`CoreError::LengthMismatch`] if the buffer does not hold exactly `shape.numel()`
    /// elements.
    pub fn from_buf<T: Element>(shape: Shape, buf: AlignedBuf<T>) -> Result<Self, CoreError> {
        if buf.len() != shape.numel() {
            return Err(CoreError::LengthMismatch {
                what: "tensor buffer",
                expected: shape.numel() as u64,
                found: buf.len() as u64,
            });
        }
        let data = buf.cast::<u8>().expect("any Pod buffer is a byte buffer");
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            data,
        })
    }

    /// A tensor copied from a typed slice.
    ///
    /// # Errors
    /// [`CoreError::LengthMismatch`] if `values.len() != shape.numel()`.
    pub fn from_slice<T: Element>(shape: Shape, values: &[T]) -> Result<Self, CoreError> {
        Self::from_buf(shape, AlignedBuf::from_slice(values))
    }

    /// The element type.
    #[must_use]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The raw little-endian bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The raw bytes, mutably.
    #[must_use]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    /// Typed access to the elements.
    ///
    /// # Errors
    /// [`CoreError::DTypeMismatch`] if `T` is not the tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], CoreError> {
        self.view().as_slice()
    }

    /// Typed mutable access to the elements.
    ///
    /// # Errors
    /// [`CoreError::DTypeMismatch`] if `T` is not the tensor's dtype.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], CoreError> {
        check_dtype::<T>(self.dtype)?;
        // The buffer is 64-byte aligned and its length is numel * size_of::<T>().
        Ok(bytemuck::cast_slice_mut(self.data.as_mut_slice()))
    }

    /// A borrowed view of the whole tensor.
    #[must_use]
    pub fn view(&self) -> TensorView<'_> {
        TensorView {
            dtype: self.dtype,
            shape: self.shape.clone(),
            bytes: self.data.as_slice(),
        }
    }

    /// Take the typed buffer back out of the tensor.
    ///
    /// # Errors
    /// [`CoreError::DTypeMismatch`] if `T` is not the tensor's dtype.
    pub fn into_buf<T: Element>(self) -> Result<AlignedBuf<T>, CoreError> {
        check_dtype::<T>(self.dtype)?;
        Ok(self
            .data
            .cast::<T>()
            .expect("length is a multiple of the element size"))
    }
}

/// A borrowed tensor: dtype, shape and a byte slice of exactly the right length.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorView<'a> {
    dtype: DType,
    shape: Shape,
    bytes: &'a [u8],
}

impl<'a> TensorView<'a> {
    /// View `bytes` as a tensor of `dtype` and `shape`.
    ///
    /// # Errors
    /// [`CoreError::LengthMismatch`] if `bytes` is not exactly `numel * dtype.size()` long,
    /// [`CoreError::ShapeOverflow`] if that size overflows.
    pub fn new(dtype: DType, shape: Shape, bytes: &'a [u8]) -> Result<Self, CoreError> {
        let expected = shape.byte_len(dtype.size())?;
        if bytes.len() != expected {
            return Err(CoreError::LengthMismatch {
                what: "tensor view",
                expected: expected as u64,
                found: bytes.len() as u64,
            });
        }
        Ok(TensorView {
            dtype,
            shape,
            bytes,
        })
    }

    /// A view over a typed slice.
    ///
    /// # Errors
    /// [`CoreError::LengthMismatch`] if `values.len() != shape.numel()`.
    pub fn from_slice<T: Element>(shape: Shape, values: &'a [T]) -> Result<Self, CoreError> {
        Self::new(T::DTYPE, shape, bytemuck::cast_slice(values))
    }

    /// The element type.
    #[must_use]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The raw bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Typed access without copying.
    ///
    /// # Errors
    /// [`CoreError::DTypeMismatch`] if `T` is not the view's dtype,
    /// [`CoreError::Misaligned`] if the bytes are not aligned for `T`.
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T], CoreError> {
        check_dtype::<T>(self.dtype)?;
        bytemuck::try_cast_slice(self.bytes).map_err(|_| CoreError::Misaligned {
            dtype: self.dtype,
            align: std::mem::align_of::<T>(),
        })
    }

    /// Copy into an owned, aligned tensor.
    #[must_use]
    pub fn to_owned(&self) -> Tensor {
        Tensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data: AlignedBuf::from_slice(self.bytes),
        }
    }
}

fn check_dtype<T: Element>(actual: DType) -> Result<(), CoreError> {
    if T::DTYPE == actual {
        Ok(())
    } else {
        Err(CoreError::DTypeMismatch {
            actual,
            requested: T::DTYPE,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_view_agree() {
        let shape = Shape::matrix(2, 3).unwrap();
        let t = Tensor::from_slice(shape.clone(), &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.as_bytes().len(), 24);
        assert_eq!(t.as_slice::<f32>().unwrap()[4], 5.0);
        assert!(matches!(
            t.as_slice::<i32>(),
            Err(CoreError::DTypeMismatch { .. })
        ));
        let v = t.view();
        assert_eq!(v.shape(), &shape);
        assert_eq!(v.to_owned(), t);
        assert_eq!(t.into_buf::<f32>().unwrap().len(), 6);
    }

    #[test]
    fn view_checks_length_and_alignment() {
        let shape = Shape::matrix(1, 2).unwrap();
        let bytes = [0u8; 9];
        assert!(matches!(
            TensorView::new(DType::F32, shape.clone(), &bytes[..7]),
            Err(CoreError::LengthMismatch {
                expected: 8,
                found: 7,
                ..
            })
        ));
        // Find an odd address inside the array so the f32 view is misaligned.
        let start = if (bytes.as_ptr() as usize).is_multiple_of(4) {
            1
        } else {
            0
        };
        let v = TensorView::new(DType::F32, shape, &bytes[start..start + 8]).unwrap();
        assert!(matches!(
            v.as_slice::<f32>(),
            Err(CoreError::Misaligned { .. })
        ));
    }

    #[test]
    fn from_buf_checks_numel() {
        let err = Tensor::from_buf(Shape::matrix(2, 2).unwrap(), AlignedBuf::<f32>::zeroed(3));
        assert!(matches!(err, Err(CoreError::LengthMismatch { .. })));
    }
}
