//! Tensor shapes with checked element counts.

use std::fmt;

use crate::CoreError;

/// The dimensions of a tensor, outermost first (row-major).
///
/// A shape is only constructed through [`Shape::new`], which checks that the element
/// count fits in `usize`, so [`Shape::numel`] can never overflow afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: Vec<usize>,
    numel: usize,
}

impl Shape {
    /// Build a shape, checking that the element count fits in `usize`.
    ///
    /// # Errors
    /// [`CoreError::ShapeOverflow`] if the product of `dims` overflows, or a dimension
    /// does not fit in `usize`.
    pub fn new<D: Into<u64> + Copy>(dims: &[D]) -> Result<Self, CoreError> {
        let overflow = || CoreError::ShapeOverflow {
            dims: dims.iter().map(|&d| d.into()).collect(),
        };
        let mut out = Vec::with_capacity(dims.len());
        let mut numel: usize = 1;
        for &d in dims {
            let d = usize::try_from(d.into()).map_err(|_| overflow())?;
            numel = numel.checked_mul(d).ok_or_else(overflow)?;
            out.push(d);
        }
        Ok(Shape { dims: out, numel })
    }

    /// A two-dimensional `[rows, cols]` shape.
    ///
    /// # Errors
    /// [`CoreError::ShapeOverflow`] if `rows * cols` overflows.
    pub fn matrix(rows: usize, cols: usize) -> Result<Self, CoreError> {
        Shape::new(&[rows as u64, cols as u64])
    }

    /// The dimensions.
    #[must_use]
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of dimensions.
    #[must_use]
    pub fn ndim(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements (1 for a scalar shape `[]`).
    #[must_use]
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// Size in bytes for elements of `elem_size` bytes.
    ///
    /// # Errors
    /// [`CoreError::ShapeOverflow`] if the byte size overflows `usize`.
    pub fn byte_len(&self, elem_size: usize) -> Result<usize, CoreError> {
        self.numel
            .checked_mul(elem_size)
            .ok_or_else(|| CoreError::ShapeOverflow {
                dims: self.dims.iter().map(|&d| d as u64).collect(),
            })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numel_and_display() {
        let s = Shape::new(&[2u64, 3, 4]).unwrap();
        assert_eq!(s.numel(), 24);
        assert_eq!(s.ndim(), 3);
        assert_eq!(s.to_string(), "[2, 3, 4]");
        assert_eq!(Shape::new::<u64>(&[]).unwrap().numel(), 1);
    }

    #[test]
    fn overflow_is_an_error() {
        let err = Shape::new(&[u64::MAX, 2]).unwrap_err();
        assert!(matches!(err, CoreError::ShapeOverflow { .. }));
        let s = Shape::new(&[usize::MAX as u64]).unwrap();
        assert!(s.byte_len(4).is_err());
    }
}
