//! The decode backend boundary.
//!
//! The seed decodes on GPUs (Triton/CUDA). tensorvault's machines have none, so only the
//! CPU backend ships; a GPU backend implements [`Backend`] and is selected the same way.

use std::sync::Arc;

use tensorvault_quant::affine_u8::AffineU8;
use tensorvault_quant::float::{bf16_bits_to_f32, f16_bits_to_f32};
use tensorvault_quant::row_int4::{row_bytes, ColumnNorm};

use crate::cvc::compression::Compression;
use crate::FormatError;

/// How one chunk's payload decodes.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkCodec {
    /// IEEE binary16.
    Fp16,
    /// bfloat16.
    Bf16,
    /// Affine u8 with these parameters.
    Int8(AffineU8),
    /// 4-bit rows with this column normalisation.
    Int4(Arc<ColumnNorm>),
}

impl ChunkCodec {
    /// The compression this codec decodes.
    #[must_use]
    pub fn compression(&self) -> Compression {
        match self {
            ChunkCodec::Fp16 => Compression::Fp16,
            ChunkCodec::Bf16 => Compression::Bf16,
            ChunkCodec::Int8(_) => Compression::Int8,
            ChunkCodec::Int4(_) => Compression::Int4,
        }
    }

    /// Payload bytes that decode to `values` values (`None` when `values` is not whole
    /// int4 rows, or on overflow).
    #[must_use]
    pub fn payload_len(&self, values: usize) -> Option<usize> {
        match self {
            ChunkCodec::Int4(c) => values
                .is_multiple_of(c.dim())
                .then(|| (values / c.dim()).checked_mul(row_bytes(c.dim())?))
                .flatten(),
            ChunkCodec::Int8(_) => Some(values),
            ChunkCodec::Fp16 | ChunkCodec::Bf16 => values.checked_mul(2),
        }
    }
}

/// Decodes payload bytes into f32 values.
pub trait Backend: Sync {
    /// A short name for logs and `--json` output.
    fn name(&self) -> &'static str;

    /// Decode `payload` (little-endian, exactly [`ChunkCodec::payload_len`] of `out.len()`
    /// bytes) into `out`.
    ///
    /// # Errors
    /// [`FormatError::LengthMismatch`] if `payload` has the wrong length.
    fn decode(
        &self,
        codec: &ChunkCodec,
        payload: &[u8],
        out: &mut [f32],
    ) -> Result<(), FormatError>;
}

/// The CPU backend: `half`'s F16C paths for f16, an auto-vectorised affine loop for
/// int8, AVX2 nibble unpacking for int4 (`tensorvault_quant::row_int4`; scalar without
/// AVX2, same bits).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

/// Values decoded per step when the payload must first be copied to aligned memory.
const STAGE: usize = 16 * 1024;

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn decode(
        &self,
        codec: &ChunkCodec,
        payload: &[u8],
        out: &mut [f32],
    ) -> Result<(), FormatError> {
        let expected = codec.payload_len(out.len());
        if expected != Some(payload.len()) {
            return Err(FormatError::LengthMismatch {
                format: crate::cvc::layout::FORMAT,
                what: "decode buffer".to_owned(),
                offset: 0,
                expected: expected.map_or(u64::MAX, |e| e as u64),
                found: payload.len() as u64,
            });
        }
        let codec_err = |source| FormatError::Codec {
            context: "decode".to_owned(),
            source,
        };
        match codec {
            ChunkCodec::Int8(p) => p.decode(payload, out).map_err(codec_err),
            ChunkCodec::Int4(c) => c.decode_rows(payload, out).map_err(codec_err),
            ChunkCodec::Fp16 | ChunkCodec::Bf16 => {
                let conv = if matches!(codec, ChunkCodec::Fp16) {
                    f16_bits_to_f32
                } else {
                    bf16_bits_to_f32
                };
                match bytemuck::try_cast_slice::<u8, u16>(payload) {
                    Ok(halves) if cfg!(target_endian = "little") => {
                        conv(halves, out).map_err(codec_err)
                    }
                    _ => {
                        // Unaligned (or big-endian host): stage through an aligned buffer.
                        let mut stage = [0u16; STAGE];
                        for (src, dst) in payload.chunks(STAGE * 2).zip(out.chunks_mut(STAGE)) {
                            let n = dst.len();
                            for (h, b) in stage[..n].iter_mut().zip(src.chunks_exact(2)) {
                                *h = u16::from_le_bytes([b[0], b[1]]);
                            }
                            conv(&stage[..n], dst).map_err(codec_err)?;
                        }
                        Ok(())
                    }
                }
            }
        }
    }
}
