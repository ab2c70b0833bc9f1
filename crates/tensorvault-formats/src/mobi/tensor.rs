//! Constant tensors and their quantization parameters; [`ConstantTensor::to_f32`] and
//! [`ConstantTensor::dequantizer`] (`dequant.rs`, range by range) are the single
//! dequantization path.

use tensorvault_quant::affine::Affine;
use tensorvault_quant::per_axis::PerAxis;

use super::error::MobiError;
use super::payload::Payload;
use super::types::DataType;

/// Quantization parameters of an affine-quantized tensor (`x = (q - zero_point) * scale`).
#[derive(Debug, Clone, PartialEq)]
pub enum Quantization {
    /// One scale and zero point for the whole tensor.
    PerTensor {
        /// Scale (finite, > 0).
        scale: f32,
        /// Zero point (a valid code of the type).
        zero_point: i32,
    },
    /// One scale and zero point per slice along `axis` (v2; TFLite's
    /// `quantized_dimension`): `scales.len() == zero_points.len() == shape[axis]`.
    PerAxis {
        /// The quantized dimension (< rank).
        axis: u8,
        /// Scales, one per slice (finite, > 0).
        scales: Vec<f32>,
        /// Zero points, one per slice (valid codes of the type).
        zero_points: Vec<i32>,
    },
}

impl Quantization {
    /// `"per-tensor"` or `"per-axis"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Quantization::PerTensor { .. } => "per-tensor",
            Quantization::PerAxis { .. } => "per-axis",
        }
    }

    /// Smallest and largest scale.
    pub fn scale_range(&self) -> (f32, f32) {
        match self {
            Quantization::PerTensor { scale, .. } => (*scale, *scale),
            Quantization::PerAxis { scales, .. } => scales
                .iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &s| {
                    (lo.min(s), hi.max(s))
                }),
        }
    }
}

/// A constant tensor (weights). `data` holds the decoded (inflated) little-endian
/// payload, owned or shared with the file's memory map ([`Payload`]); `gzip` says
/// whether it is stored compressed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantTensor {
    /// Value id (unique among all values of the graph).
    pub id: u32,
    /// Element type.
    pub dtype: DataType,
    /// Shape.
    pub shape: Vec<u64>,
    /// Quantization parameters: `Some` exactly when [`DataType::is_affine`].
    pub quant: Option<Quantization>,
    /// Store the payload gzip-compressed.
    pub gzip: bool,
    /// The payload: `dtype.size() * product(shape)` little-endian bytes (a cheap-clone
    /// handle: `Vec<u8>` converts with `.into()`).
    pub data: Payload,
}

/// `product(shape)`, `None` on overflow.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// `(channels, inner)` of a per-axis view of `shape` along `axis`, `None` if the axis is
/// out of range or the view is empty.
pub(crate) fn axis_split(shape: &[u64], axis: u8) -> Option<(u64, u64)> {
    let a = usize::from(axis);
    let channels = *shape.get(a)?;
    let inner = element_count(shape.get(a + 1..)?)?;
    (channels > 0 && inner > 0).then_some((channels, inner))
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

    /// An int8 tensor quantized per channel from f32 `values`: symmetric (zero point
    /// 0, `scale = max|x| / 127` per slice) along `axis` (0 for OIHW conv and
    /// `[out, in]` fully-connected weights).
    ///
    /// # Errors
    /// [`MobiError::InvalidModel`] for a length that does not match `shape`, an axis
    /// outside the rank or an empty tensor; [`MobiError::Codec`] for NaN/Inf values.
    pub fn from_f32_per_channel_i8(
        id: u32,
        shape: &[u64],
        values: &[f32],
        axis: u8,
    ) -> Result<Self, MobiError> {
        let f = Self::from_f32(id, shape, values)?;
        let Some((channels, inner)) = axis_split(shape, axis) else {
            return Err(MobiError::InvalidModel {
                what: format!("tensor {id}"),
                reason: format!("per-channel axis {axis} of shape {shape:?} (outside, or empty)"),
            });
        };
        let codec = |source| MobiError::Codec {
            tensor_id: id,
            source,
        };
        let (channels, inner) = (channels as usize, inner as usize);
        let pa = PerAxis::<i8>::fit_symmetric(values, channels, inner).map_err(codec)?;
        let mut q = vec![0i8; values.len()];
        pa.quantize(values, &mut q).map_err(codec)?;
        Ok(ConstantTensor {
            dtype: DataType::I8,
            quant: Some(Quantization::PerAxis {
                axis,
                scales: pa.channels().iter().map(Affine::scale).collect(),
                zero_points: vec![0; channels],
            }),
            data: q.into_iter().map(|v| v as u8).collect(),
            ..f
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

    /// `"none"`, `"per-tensor"` or `"per-axis"`.
    pub fn quant_kind(&self) -> &'static str {
        self.quant.as_ref().map_or("none", Quantization::kind)
    }

    /// The payload as `&[f32]` without copying, for an f32 tensor whose bytes are
    /// 4-byte aligned in memory (v2 files put every f32 payload at a multiple of 4 in
    /// the file, and a map starts page-aligned; v1 payloads may be anywhere: checked,
    /// never assumed) on a little-endian host. `None` otherwise.
    pub fn f32_view(&self) -> Option<&[f32]> {
        if self.dtype != DataType::F32 || cfg!(target_endian = "big") {
            return None;
        }
        bytemuck::try_cast_slice(&self.data).ok()
    }

    /// The values as f32, dequantizing int8/uint8/int16 (per tensor or per axis) and
    /// fp16 and widening i32/i64/bool.
    ///
    /// # Errors
    /// [`MobiError::DataSizeMismatch`] if `data` does not match dtype x shape,
    /// [`MobiError::Codec`] for unusable quantization parameters.
    pub fn to_f32(&self) -> Result<Vec<f32>, MobiError> {
        let d = self.dequantizer()?;
        let mut out = vec![0f32; d.len()];
        d.fill(0, &mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mobi::dequant::per_axis;
    use tensorvault_quant::affine::Affine;

    /// The in-place lane loop gives exactly what `tensorvault-quant` computes.
    #[test]
    fn fast_dequantization_is_bit_identical_to_the_quant_crate() {
        let shape = [3u64, 2, 5];
        let codes: Vec<u8> = (0..30u32).map(|i| (i * 37 % 256) as u8).collect();
        let scales = vec![0.013f32, 2.5, 1e-3];
        let zero_points = vec![-7i32, 0, 100];
        let t = ConstantTensor {
            id: 2,
            dtype: DataType::I8,
            shape: shape.to_vec(),
            quant: Some(Quantization::PerAxis {
                axis: 0,
                scales: scales.clone(),
                zero_points: zero_points.clone(),
            }),
            gzip: false,
            data: codes.clone().into(),
        };
        let i8s: Vec<i8> = codes.iter().map(|&b| b as i8).collect();
        let mut want = vec![0f32; 30];
        per_axis::<i8>(&scales, &zero_points, 10)
            .unwrap()
            .dequantize(&i8s, &mut want)
            .unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&t.to_f32().unwrap()), bits(&want));
        // Axis 1 (channels repeat every `inner` elements along the outer axis).
        let t1 = ConstantTensor {
            quant: Some(Quantization::PerAxis {
                axis: 1,
                scales: vec![0.5, 0.25],
                zero_points: vec![1, -1],
            }),
            ..t.clone()
        };
        let mut want1 = vec![0f32; 30];
        per_axis::<i8>(&[0.5, 0.25], &[1, -1], 5)
            .unwrap()
            .dequantize(&i8s, &mut want1)
            .unwrap();
        assert_eq!(bits(&t1.to_f32().unwrap()), bits(&want1));
        // Per tensor, uint8 and int16.
        let u = ConstantTensor {
            dtype: DataType::U8,
            quant: Some(Quantization::PerTensor {
                scale: 0.1,
                zero_point: 128,
            }),
            ..t.clone()
        };
        let mut want_u = vec![0f32; 30];
        Affine::<u8>::new(0.1, 128)
            .unwrap()
            .dequantize(&codes, &mut want_u)
            .unwrap();
        assert_eq!(bits(&u.to_f32().unwrap()), bits(&want_u));
        let i16s: Vec<i16> = codes
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        let w = ConstantTensor {
            dtype: DataType::I16,
            shape: vec![15],
            quant: Some(Quantization::PerTensor {
                scale: 3e-4,
                zero_point: -5,
            }),
            ..t.clone()
        };
        let mut want_w = vec![0f32; 15];
        Affine::<i16>::new(3e-4, -5)
            .unwrap()
            .dequantize(&i16s, &mut want_w)
            .unwrap();
        assert_eq!(bits(&w.to_f32().unwrap()), bits(&want_w));
        // Bad parameters are still codec errors, not panics.
        let bad = ConstantTensor {
            quant: Some(Quantization::PerTensor {
                scale: f32::NAN,
                zero_point: 0,
            }),
            ..t
        };
        assert!(matches!(bad.to_f32(), Err(MobiError::Codec { .. })));
    }
}
