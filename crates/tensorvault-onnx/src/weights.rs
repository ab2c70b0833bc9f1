//! How each constant is stored in the MOBI file. [`storage`] is the one place that
//! decides; everything else asks it.

use tensorvault_formats::mobi::{
    choose_quantization_for, quantize_as, ConstantTensor, DataType, QuantTarget, TensorQuant,
};

use crate::error::OnnxError;
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
    /// A ConvTranspose2D weight (`[C, M/group, kh, kw]`: output channels on axis 1).
    ConvTransposeWeight,
    /// The constant right-hand side of a MatMul (`[K, N]`: output columns on axis 1).
    MatMulWeight,
    /// A bias, BatchNorm vector or any other operand.
    Other,
}

impl WeightsMode {
    /// The MOBI quantization target of this mode (`None`: everything stays f32).
    pub fn target(self) -> Option<QuantTarget> {
        match self {
            WeightsMode::F32 => None,
            WeightsMode::Fp16 => Some(QuantTarget::Fp16),
            WeightsMode::Int16 => Some(QuantTarget::Int16),
            WeightsMode::Int8 => Some(QuantTarget::Int8),
        }
    }
}

impl Role {
    /// The axis of a weight's output channels (`None` for other operands).
    pub fn channel_axis(self) -> Option<u8> {
        match self {
            Role::ConvWeight | Role::FcWeight => Some(0),
            Role::MatMulWeight | Role::ConvTransposeWeight => Some(1),
            Role::Other => None,
        }
    }
}

/// How a float constant of `shape` used as `role` is stored under `mode`: MOBI's one
/// policy ([`choose_quantization_for`]) with the role's output-channel axis. fp16 halves
/// every float tensor (biases too: relative error ~5e-4); under int8/int16 only weights of
/// Conv, FullyConnected and MatMul with rank >= 2 and at least
/// [`tensorvault_formats::mobi::SMALL_TENSOR_ELEMENTS`] values are quantized (int8 per
/// output channel, int16 per tensor), everything else stays f32.
pub fn storage(role: Role, shape: &[u64], mode: WeightsMode) -> TensorQuant {
    match mode.target() {
        None => TensorQuant::Keep,
        Some(t) => choose_quantization_for(DataType::F32, shape, t, role.channel_axis()),
    }
}

/// The MOBI constant tensor for `c` used as `role` (id assigned by the builder). Integer
/// constants (shapes, indices) are stored as i64.
///
/// # Errors
/// [`OnnxError::Mobi`] if quantization fails (NaN/Inf weights, fp16 overflow).
pub(crate) fn to_mobi(
    c: &Const,
    role: Role,
    mode: WeightsMode,
) -> Result<ConstantTensor, OnnxError> {
    if !matches!(c.data, Data::F32(_)) {
        let v = c.to_i64();
        return Ok(ConstantTensor {
            dtype: DataType::I64,
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ..empty(&c.shape)
        });
    }
    let t = ConstantTensor::from_f32(0, &c.shape, &c.to_f32())?;
    Ok(quantize_as(&t, storage(role, &c.shape, mode))?)
}

/// A tensor shell of `shape` whose dtype, quantization and data the caller sets.
fn empty(shape: &[u64]) -> ConstantTensor {
    ConstantTensor {
        id: 0,
        dtype: DataType::F32,
        shape: shape.to_vec(),
        quant: None,
        gzip: false,
        data: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tensors_and_operands_stay_exact_in_integer_modes() {
        for mode in [WeightsMode::F32, WeightsMode::Int16, WeightsMode::Int8] {
            assert_eq!(storage(Role::Other, &[4096], mode), TensorQuant::Keep);
            assert_eq!(storage(Role::Other, &[64, 64], mode), TensorQuant::Keep);
            assert_eq!(storage(Role::ConvWeight, &[10], mode), TensorQuant::Keep);
            assert_eq!(
                storage(Role::ConvWeight, &[1, 1, 2, 5], mode),
                TensorQuant::Keep
            );
        }
        // fp16 halves biases too.
        let h = TensorQuant::Fp16;
        assert_eq!(storage(Role::Other, &[8], WeightsMode::Fp16), h);
        assert_eq!(storage(Role::Other, &[64, 64], WeightsMode::Fp16), h);
    }

    #[test]
    fn int8_quantizes_weights_per_output_channel() {
        let m = WeightsMode::Int8;
        let q8 = TensorQuant::PerChannelInt8 { axis: 0 };
        assert_eq!(storage(Role::ConvWeight, &[4, 1, 3, 3], m), q8);
        assert_eq!(storage(Role::FcWeight, &[64, 64], m), q8);
        let cols = TensorQuant::PerChannelInt8 { axis: 1 };
        assert_eq!(storage(Role::MatMulWeight, &[64, 64], m), cols);
        let q16 = TensorQuant::PerTensor(DataType::I16);
        assert_eq!(storage(Role::FcWeight, &[64, 64], WeightsMode::Int16), q16);
    }

    #[test]
    fn integer_constants_stay_i64_in_every_mode() {
        let c = Const::ints(vec![3], vec![1, -2, 3]);
        for mode in [WeightsMode::F32, WeightsMode::Fp16, WeightsMode::Int8] {
            let t = to_mobi(&c, Role::FcWeight, mode).unwrap();
            assert_eq!(t.dtype, DataType::I64);
            assert_eq!(t.data.len(), 24);
        }
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
