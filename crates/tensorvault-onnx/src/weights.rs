//! How each constant is stored in the MOBI file. [`storage`] is the one place that
//! decides; everything else asks it.

use tensorvault_formats::mobi::{ConstantTensor, DataType, MobiError, Quantization};
use tensorvault_quant::affine::{to_f16_checked, Affine};

use crate::error::OnnxError;
use crate::limits::SMALL_TENSOR_ELEMENTS;
use crate::tensor::{Const, Data};

/// The `--weights` mode: how large float weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightsMode {
    /// Everything f32 (exact).
    #[default]
    F32,
    /// Large float tensors as IEEE half.
    Fp16,
    /// Conv, fully-connected and MatMul weights as int16 (affine, per tensor).
    Int16,
    /// Conv, fully-connected and MatMul weights as int8, symmetric, one scale per output
    /// channel (MOBI v2 per-axis quantization).
    Int8,
}

impl WeightsMode {
    /// The CLI / Python spelling (`f32`, `fp16`, `int16`, `int8`).
    pub fn name(self) -> &'static str {
        match self {
            WeightsMode::F32 => "f32",
            WeightsMode::Fp16 => "fp16",
            WeightsMode::Int16 => "int16",
            WeightsMode::Int8 => "int8",
        }
    }

    /// Parse the CLI / Python spelling.
    pub fn parse(s: &str) -> Option<WeightsMode> {
        [
            WeightsMode::F32,
            WeightsMode::Fp16,
            WeightsMode::Int16,
            WeightsMode::Int8,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

/// What a constant is used as (decides its storage together with the mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A Conv2D / DepthwiseConv2D weight (OIHW: output channels on axis 0).
    ConvWeight,
    /// A FullyConnected weight (`[out, in]`: output channels on axis 0).
    FcWeight,
    /// The constant right-hand side of a MatMul (`[K, N]`: output columns on axis 1).
    MatMulWeight,
    /// A bias, BatchNorm vector or any other operand.
    Other,
}

/// How one tensor is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Storage {
    /// f32, exact.
    F32,
    /// Integer values as i64 (shapes, indices).
    I64,
    /// IEEE half precision.
    Fp16,
    /// int16, one affine scale and zero point for the tensor.
    Int16PerTensor,
    /// int8, symmetric, one scale per slice along `axis` (the output channels).
    Int8PerChannel {
        /// The quantized axis.
        axis: u8,
    },
}

/// The storage of a constant of `rank` with `elements` values (`float` says whether it
/// holds floating-point values) used as `role` under `mode`. Integer tensors stay i64;
/// fp16 halves every float tensor (biases too: relative error ~5e-4, and the file stays
/// under half the ONNX size); in int8/int16 modes vectors and scalars (biases, BatchNorm
/// vectors: rank <= 1) and tiny tensors (fewer than [`SMALL_TENSOR_ELEMENTS`]) stay
/// f32 and only weights of Conv,
/// FullyConnected and MatMul are quantized (int8 per output channel: axis 0 of conv and
/// FullyConnected weights, axis 1 of a MatMul's `[K, N]`; int16 per tensor), other
/// operands stay f32.
pub fn storage(role: Role, rank: usize, elements: u64, float: bool, mode: WeightsMode) -> Storage {
    if !float {
        return Storage::I64;
    }
    if mode == WeightsMode::Fp16 {
        return Storage::Fp16;
    }
    if rank <= 1 || elements < SMALL_TENSOR_ELEMENTS {
        return Storage::F32;
    }
    let channel_axis = match role {
        Role::ConvWeight | Role::FcWeight => Some(0),
        Role::MatMulWeight => Some(1),
        Role::Other => None,
    };
    match (mode, channel_axis) {
        (WeightsMode::F32, _) => Storage::F32,
        (WeightsMode::Fp16, _) => Storage::Fp16,
        (WeightsMode::Int16, Some(_)) => Storage::Int16PerTensor,
        (WeightsMode::Int8, Some(axis)) => Storage::Int8PerChannel { axis },
        (WeightsMode::Int16 | WeightsMode::Int8, None) => Storage::F32,
    }
}

/// The MOBI constant tensor for `c` used as `role` (id assigned by the builder).
///
/// # Errors
/// [`OnnxError::Mobi`] if quantization fails (NaN/Inf weights, fp16 overflow).
pub(crate) fn to_mobi(
    c: &Const,
    role: Role,
    mode: WeightsMode,
) -> Result<ConstantTensor, OnnxError> {
    let float = matches!(c.data, Data::F32(_));
    match storage(role, c.shape.len(), c.len() as u64, float, mode) {
        Storage::I64 => {
            let v = c.to_i64();
            Ok(ConstantTensor {
                id: 0,
                dtype: DataType::I64,
                shape: c.shape.clone(),
                quant: None,
                gzip: false,
                data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            })
        }
        Storage::F32 => Ok(ConstantTensor::from_f32(0, &c.shape, &c.to_f32())?),
        Storage::Fp16 => {
            let x = c.to_f32();
            let mut h = vec![0u16; x.len()];
            to_f16_checked(&x, &mut h).map_err(|source| MobiError::Codec {
                tensor_id: 0,
                source,
            })?;
            Ok(ConstantTensor {
                dtype: DataType::F16,
                quant: None,
                data: h.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ..empty(&c.shape)
            })
        }
        Storage::Int16PerTensor => {
            let x = c.to_f32();
            let codec = |source| MobiError::Codec {
                tensor_id: 0,
                source,
            };
            let a = Affine::<i16>::fit(&x).map_err(codec)?;
            let mut q = vec![0i16; x.len()];
            a.quantize(&x, &mut q).map_err(codec)?;
            Ok(ConstantTensor {
                dtype: DataType::I16,
                quant: Some(Quantization::PerTensor {
                    scale: a.scale(),
                    zero_point: a.zero_point(),
                }),
                data: q.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ..empty(&c.shape)
            })
        }
        Storage::Int8PerChannel { axis } => Ok(ConstantTensor::from_f32_per_channel_i8(
            0,
            &c.shape,
            &c.to_f32(),
            axis,
        )?),
    }
}

/// A tensor shell of `shape` whose dtype, quantization and data the caller sets.
fn empty(shape: &[u64]) -> ConstantTensor {
    ConstantTensor {
        id: 0,
        dtype: DataType::F32,
        shape: shape.to_vec(),
        quant: None,
        gzip: false,
        data: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_integer_tensors_stay_exact_in_integer_modes() {
        for mode in [WeightsMode::F32, WeightsMode::Int16, WeightsMode::Int8] {
            assert_eq!(storage(Role::Other, 1, 4096, true, mode), Storage::F32);
            assert_eq!(storage(Role::ConvWeight, 4, 10, true, mode), Storage::F32);
        }
        for mode in [
            WeightsMode::F32,
            WeightsMode::Fp16,
            WeightsMode::Int16,
            WeightsMode::Int8,
        ] {
            let s = storage(Role::FcWeight, 2, 1 << 20, false, mode);
            assert_eq!(s, Storage::I64);
        }
        // fp16 halves biases too.
        assert_eq!(
            storage(Role::Other, 1, 8, true, WeightsMode::Fp16),
            Storage::Fp16
        );
    }

    #[test]
    fn int8_quantizes_weights_only() {
        let m = WeightsMode::Int8;
        let q8 = Storage::Int8PerChannel { axis: 0 };
        assert_eq!(storage(Role::ConvWeight, 4, 36, true, m), q8);
        assert_eq!(storage(Role::FcWeight, 2, 4096, true, m), q8);
        let q8_cols = Storage::Int8PerChannel { axis: 1 };
        assert_eq!(storage(Role::MatMulWeight, 2, 4096, true, m), q8_cols);
        assert_eq!(storage(Role::Other, 2, 4096, true, m), Storage::F32);
        let i16 = WeightsMode::Int16;
        let q16 = Storage::Int16PerTensor;
        assert_eq!(storage(Role::FcWeight, 2, 4096, true, i16), q16);
        let h = Storage::Fp16;
        assert_eq!(storage(Role::Other, 2, 4096, true, WeightsMode::Fp16), h);
    }

    #[test]
    fn modes_parse_their_names() {
        for m in [
            WeightsMode::F32,
            WeightsMode::Fp16,
            WeightsMode::Int16,
            WeightsMode::Int8,
        ] {
            assert_eq!(WeightsMode::parse(m.name()), Some(m));
        }
        assert_eq!(WeightsMode::parse("int4"), None);
    }
}
