//! Quantization on write: the targets, the one function that decides what each tensor
//! becomes ([`choose_quantization`]), and [`quantize_tensor`] that applies it.

use tensorvault_quant::affine::{to_f16_checked, Affine, AffineCode};

use super::error::MobiError;
use super::payload::Payload;
use super::tensor::{ConstantTensor, Quantization};
use super::types::DataType;

/// Target of quantization on write. Which tensors it applies to, and how, is decided
/// per tensor by [`choose_quantization`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantTarget {
    /// IEEE f16 (values beyond ±65504 are rejected).
    Fp16,
    /// int8: per-output-channel symmetric (axis 0) for weights, small tensors stay f32.
    Int8,
    /// int8 with one affine scale and zero point per tensor (the v1 behaviour; loses
    /// accuracy on weights whose channels differ in range).
    Int8PerTensor,
    /// Per-tensor affine uint8.
    UInt8,
    /// Per-tensor affine int16.
    Int16,
}

impl QuantTarget {
    /// The stored data type.
    pub fn dtype(self) -> DataType {
        match self {
            QuantTarget::Fp16 => DataType::F16,
            QuantTarget::Int8 | QuantTarget::Int8PerTensor => DataType::I8,
            QuantTarget::UInt8 => DataType::U8,
            QuantTarget::Int16 => DataType::I16,
        }
    }
}

/// Writer options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteOptions {
    /// Quantize f32 constant tensors to this target (tensor by tensor, see
    /// [`choose_quantization`]).
    pub quantize: Option<QuantTarget>,
    /// Store every constant tensor payload gzip-compressed.
    pub gzip: bool,
}

/// Integer targets leave tensors with fewer elements than this in f32 (scalars and tiny
/// tables: a few bytes saved, accuracy at stake). The one threshold of both the writer's
/// quantization and the ONNX importer.
pub const SMALL_TENSOR_ELEMENTS: u64 = 32;

/// What [`choose_quantization`] decided for one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorQuant {
    /// Store as it is (not f32, or exempt: small or 1-D under an integer target).
    Keep,
    /// IEEE f16, no parameters.
    Fp16,
    /// One affine scale/zero point for the tensor, to this type.
    PerTensor(DataType),
    /// Symmetric int8, one scale per slice along `axis` (zero points 0).
    PerChannelInt8 {
        /// The quantized axis (0: output channels).
        axis: u8,
    },
}

/// The policy, in one place. For an f32 tensor of `shape` and a `target`:
///
/// * [`QuantTarget::Fp16`]: every f32 tensor becomes fp16 (relative error ~5e-4,
///   fine for biases too, and it keeps the file at half size);
/// * integer targets leave 1-D tensors (biases, norms) and tensors under
///   [`SMALL_TENSOR_ELEMENTS`] elements in f32;
/// * [`QuantTarget::Int8`]: the rest (conv OIHW / depthwise `[C*m,1,kh,kw]` / FC
///   `[out, in]` weights) become per-channel symmetric int8 along axis 0;
/// * `Int8PerTensor`, `UInt8`, `Int16`: the rest get one affine scale per tensor.
///
/// Tensors that are not f32 are kept as they are. This is [`choose_quantization_for`]
/// with every tensor taken as a weight whose output channels are axis 0 (a file carries
/// no roles; the ONNX importer knows them and calls [`choose_quantization_for`]).
pub fn choose_quantization(dtype: DataType, shape: &[u64], target: QuantTarget) -> TensorQuant {
    choose_quantization_for(dtype, shape, target, Some(0))
}

/// [`choose_quantization`] for a caller that knows what the tensor is used as:
/// `channel_axis` is the axis of the output channels of a weight (0 for conv and
/// fully-connected weights, 1 for the `[K, N]` right-hand side of a MatMul), `None` for
/// any other operand, which stays f32 under integer targets (fp16 still halves it).
pub fn choose_quantization_for(
    dtype: DataType,
    shape: &[u64],
    target: QuantTarget,
    channel_axis: Option<u8>,
) -> TensorQuant {
    if dtype != DataType::F32 {
        return TensorQuant::Keep;
    }
    if target == QuantTarget::Fp16 {
        return TensorQuant::Fp16;
    }
    let n = super::tensor::element_count(shape).unwrap_or(0);
    if shape.len() < 2 || n < SMALL_TENSOR_ELEMENTS {
        return TensorQuant::Keep;
    }
    match channel_axis {
        Some(axis) => integer_plan(shape, target, axis),
        None => TensorQuant::Keep,
    }
}

fn integer_plan(shape: &[u64], target: QuantTarget, axis: u8) -> TensorQuant {
    match target {
        QuantTarget::Fp16 => TensorQuant::Fp16,
        QuantTarget::Int8 if super::tensor::axis_split(shape, axis).is_some() => {
            TensorQuant::PerChannelInt8 { axis }
        }
        QuantTarget::Int8 => TensorQuant::PerTensor(DataType::I8),
        other => TensorQuant::PerTensor(other.dtype()),
    }
}

/// Quantize one f32 tensor to `target` without the small-tensor exemption of
/// [`choose_quantization`], for callers that decide by role themselves (the ONNX
/// importer quantizes Conv/FC/MatMul weights of any size): `Int8` is per channel along
/// axis 0 when the tensor has a non-empty axis 0, else per tensor. Tensors that are not
/// f32 are returned unchanged.
///
/// # Errors
/// As [`quantize_tensor`].
pub fn quantize_tensor_always(
    t: &ConstantTensor,
    target: QuantTarget,
) -> Result<ConstantTensor, MobiError> {
    if t.dtype != DataType::F32 {
        return Ok(t.clone());
    }
    quantize_as(t, integer_plan(&t.shape, target, 0))
}

fn affine<T: AffineCode>(
    id: u32,
    x: &[f32],
    enc: impl Fn(T) -> Vec<u8>,
) -> Result<(Quantization, Vec<u8>), MobiError> {
    let codec = |source| MobiError::Codec {
        tensor_id: id,
        source,
    };
    let a = Affine::<T>::fit(x).map_err(codec)?;
    let mut q = vec![T::default(); x.len()];
    a.quantize(x, &mut q).map_err(codec)?;
    let data = q.into_iter().flat_map(enc).collect();
    Ok((
        Quantization::PerTensor {
            scale: a.scale(),
            zero_point: a.zero_point(),
        },
        data,
    ))
}

/// Quantize one tensor as [`choose_quantization`] decides (unchanged when it says
/// [`TensorQuant::Keep`]).
///
/// # Errors
/// [`MobiError::Codec`] for NaN/Inf weights (or fp16 overflow), and the errors of
/// [`ConstantTensor::to_f32`].
pub fn quantize_tensor(
    t: &ConstantTensor,
    target: QuantTarget,
) -> Result<ConstantTensor, MobiError> {
    quantize_as(t, choose_quantization(t.dtype, &t.shape, target))
}

/// Apply a `plan` (from [`choose_quantization`] or [`choose_quantization_for`]) to `t`:
/// the one encoder of every quantized MOBI tensor.
///
/// # Errors
/// As [`quantize_tensor`].
pub fn quantize_as(t: &ConstantTensor, plan: TensorQuant) -> Result<ConstantTensor, MobiError> {
    if plan == TensorQuant::Keep {
        return Ok(t.clone());
    }
    let x = t.to_f32()?;
    let (dtype, quant, data) = match plan {
        TensorQuant::Keep => return Ok(t.clone()),
        TensorQuant::Fp16 => {
            let mut h = vec![0u16; x.len()];
            to_f16_checked(&x, &mut h).map_err(|source| MobiError::Codec {
                tensor_id: t.id,
                source,
            })?;
            let data: Payload = h.iter().flat_map(|v| v.to_le_bytes()).collect();
            (DataType::F16, None, data)
        }
        TensorQuant::PerChannelInt8 { axis } => {
            let q = ConstantTensor::from_f32_per_channel_i8(t.id, &t.shape, &x, axis)?;
            (q.dtype, q.quant, q.data)
        }
        TensorQuant::PerTensor(dt) => {
            let (q, data) = match dt {
                DataType::U8 => affine::<u8>(t.id, &x, |v| vec![v])?,
                DataType::I16 => affine::<i16>(t.id, &x, |v| v.to_le_bytes().to_vec())?,
                _ => affine::<i8>(t.id, &x, |v| v.to_le_bytes().to_vec())?,
            };
            (dt, Some(q), Payload::from_vec(data))
        }
    };
    Ok(ConstantTensor {
        dtype,
        quant,
        data,
        ..t.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_per_shape_and_target() {
        use TensorQuant::*;
        let f = DataType::F32;
        assert_eq!(
            choose_quantization(f, &[6, 1, 5, 5], QuantTarget::Fp16),
            Fp16
        );
        assert_eq!(choose_quantization(f, &[6], QuantTarget::Fp16), Fp16);
        assert_eq!(choose_quantization(f, &[120], QuantTarget::Int8), Keep);
        assert_eq!(choose_quantization(f, &[4000], QuantTarget::Int8), Keep);
        assert_eq!(
            choose_quantization(f, &[2, 1, 2, 2], QuantTarget::Int8),
            Keep
        );
        assert_eq!(
            choose_quantization(f, &[6, 1, 5, 5], QuantTarget::Int8),
            PerChannelInt8 { axis: 0 }
        );
        assert_eq!(
            choose_quantization_for(f, &[64, 10], QuantTarget::Int8, Some(1)),
            PerChannelInt8 { axis: 1 }
        );
        assert_eq!(
            choose_quantization_for(f, &[64, 10], QuantTarget::Int8, None),
            Keep
        );
        assert_eq!(
            choose_quantization(f, &[16, 6, 5, 5], QuantTarget::Int8),
            PerChannelInt8 { axis: 0 }
        );
        assert_eq!(
            choose_quantization(f, &[120, 400], QuantTarget::Int16),
            PerTensor(DataType::I16)
        );
        assert_eq!(
            choose_quantization(f, &[120, 400], QuantTarget::Int8PerTensor),
            PerTensor(DataType::I8)
        );
        assert_eq!(
            choose_quantization(DataType::I64, &[120, 400], QuantTarget::Int8),
            Keep
        );
    }

    #[test]
    fn always_quantizes_small_weights_too() {
        let t = ConstantTensor::from_f32(1, &[2, 1, 3, 3], &[0.5; 18]).unwrap();
        assert_eq!(quantize_tensor(&t, QuantTarget::Int16).unwrap(), t);
        let q = quantize_tensor_always(&t, QuantTarget::Int16).unwrap();
        assert_eq!((q.dtype, q.quant_kind()), (DataType::I16, "per-tensor"));
        let q = quantize_tensor_always(&t, QuantTarget::Int8).unwrap();
        assert_eq!((q.dtype, q.quant_kind()), (DataType::I8, "per-axis"));
        assert_eq!(q.to_f32().unwrap(), vec![0.5; 18]);
        let empty = ConstantTensor::from_f32(2, &[0, 3], &[]).unwrap();
        let q = quantize_tensor_always(&empty, QuantTarget::Int8).unwrap();
        assert_eq!(q.quant_kind(), "per-tensor");
    }

    #[test]
    fn per_channel_weights_keep_small_channels_accurate() {
        // Channel 0 spans 1e-3, channel 1 spans 10: per tensor, channel 0 rounds to 0.
        let x: Vec<f32> = (0..2048)
            .map(|i| ((i % 13) as f32 - 6.0) / 6.0 * if i < 1024 { 1e-3 } else { 10.0 })
            .collect();
        let t = ConstantTensor::from_f32(9, &[2, 1024], &x).unwrap();
        let pc = quantize_tensor(&t, QuantTarget::Int8).unwrap();
        let pt = quantize_tensor(&t, QuantTarget::Int8PerTensor).unwrap();
        assert_eq!(pc.quant_kind(), "per-axis");
        assert_eq!(pt.quant_kind(), "per-tensor");
        let err = |t: &ConstantTensor| {
            let y = t.to_f32().unwrap();
            x[..1024]
                .iter()
                .zip(&y)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        };
        assert!(err(&pc) <= 1e-3 / 127.0 / 2.0 + 1e-9, "{}", err(&pc));
        assert!(err(&pt) > 1e-4, "{}", err(&pt));
    }
}
