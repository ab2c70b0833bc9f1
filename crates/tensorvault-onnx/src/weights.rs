//! How each constant is stored in the MOBI file. [`storage`] is the one place that
//! decides; everything else asks it.

use tensorvault_formats::mobi::{quantize_tensor_always, ConstantTensor, DataType, QuantTarget};

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
    /// Conv, fully-connected and MatMul weights as int8. MOBI v1 has per-tensor affine
    /// int8 only; per-output-channel symmetric int8 follows with MOBI v2.
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
pub enum Storage {
    /// f32, exact.
    F32,
    /// Integer values as i64 (shapes, indices).
    I64,
    /// Quantized or half precision.
    Quantized(QuantTarget),
}

/// The storage of a constant of `rank` with `elements` values (`float` says whether it
/// holds floating-point values) used as `role` under `mode`. Integer tensors stay i64;
/// vectors and scalars (biases, BatchNorm vectors: rank <= 1) and tiny tensors (fewer
/// than [`SMALL_TENSOR_ELEMENTS`]) stay f32; in int8/int16 modes only weights of Conv,
/// FullyConnected and MatMul are quantized (other operands stay f32); fp16 halves every
/// other float tensor.
pub fn storage(role: Role, rank: usize, elements: u64, float: bool, mode: WeightsMode) -> Storage {
    if !float {
        return Storage::I64;
    }
    if rank <= 1 || elements < SMALL_TENSOR_ELEMENTS {
        return Storage::F32;
    }
    let weight = matches!(role, Role::ConvWeight | Role::FcWeight | Role::MatMulWeight);
    match mode {
        WeightsMode::F32 => Storage::F32,
        WeightsMode::Fp16 => Storage::Quantized(QuantTarget::Fp16),
        WeightsMode::Int16 if weight => Storage::Quantized(QuantTarget::Int16),
        WeightsMode::Int8 if weight => Storage::Quantized(QuantTarget::Int8),
        WeightsMode::Int16 | WeightsMode::Int8 => Storage::F32,
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
        Storage::Quantized(q) => {
            let t = ConstantTensor::from_f32(0, &c.shape, &c.to_f32())?;
            Ok(quantize_tensor_always(&t, q)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_integer_tensors_stay_exact_in_every_mode() {
        for mode in [
            WeightsMode::F32,
            WeightsMode::Fp16,
            WeightsMode::Int16,
            WeightsMode::Int8,
        ] {
            assert_eq!(storage(Role::Other, 1, 4096, true, mode), Storage::F32);
            assert_eq!(storage(Role::ConvWeight, 4, 10, true, mode), Storage::F32);
            assert_eq!(
                storage(Role::FcWeight, 2, 1 << 20, false, mode),
                Storage::I64
            );
        }
    }

    #[test]
    fn int8_quantizes_weights_only() {
        let m = WeightsMode::Int8;
        let q8 = Storage::Quantized(QuantTarget::Int8);
        assert_eq!(storage(Role::ConvWeight, 4, 36, true, m), q8);
        assert_eq!(storage(Role::FcWeight, 2, 4096, true, m), q8);
        assert_eq!(storage(Role::MatMulWeight, 2, 4096, true, m), q8);
        assert_eq!(storage(Role::Other, 2, 4096, true, m), Storage::F32);
        let h = Storage::Quantized(QuantTarget::Fp16);
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
