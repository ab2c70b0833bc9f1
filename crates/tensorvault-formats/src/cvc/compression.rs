//! The chunk encodings of a CVC file.

use std::fmt;

use crate::cvc::layout::FORMAT;
use crate::FormatError;

/// How a chunk's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// IEEE binary16, 2 bytes per value (`"fp16"`).
    Fp16,
    /// Affine u8 with per-chunk `min`/`scale`, 1 byte per value (`"int8"`).
    Int8,
    /// bfloat16, 2 bytes per value (`"bf16"`): a tensorvault extension, always written at
    /// file level too so that readers without it refuse the file.
    Bf16,
    /// 4-bit codes with a per-chunk column normalisation and a `(min, step)` pair per row
    /// (`"int4"`; `tensorvault_quant::row_int4`): a tensorvault extension, written at file
    /// level too, like `bf16`.
    Int4,
}

impl Compression {
    /// The name stored in the JSON header.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Compression::Fp16 => "fp16",
            Compression::Int8 => "int8",
            Compression::Bf16 => "bf16",
            Compression::Int4 => "int4",
        }
    }

    /// Payload bytes of one row of `dim` values (`None` on overflow): `dim` times 2 (fp16,
    /// bf16) or 1 (int8); `8 + ceil(dim / 2)` for int4.
    #[must_use]
    pub fn row_bytes(self, dim: u64) -> Option<u64> {
        match self {
            Compression::Int8 => Some(dim),
            Compression::Fp16 | Compression::Bf16 => dim.checked_mul(2),
            Compression::Int4 => usize::try_from(dim)
                .ok()
                .and_then(tensorvault_quant::row_int4::row_bytes)
                .map(|b| b as u64),
        }
    }

    /// Whether the reference implementation (`decompressed`) can decode it.
    #[must_use]
    pub const fn is_reference(self) -> bool {
        matches!(self, Compression::Fp16 | Compression::Int8)
    }

    /// Parse a header value; `field` names the JSON path for the error.
    ///
    /// # Errors
    /// [`FormatError::UnsupportedCompression`] for any other name (including the
    /// reference's `"lossless"`, which tensorvault does not implement).
    pub fn parse(value: &str, field: impl Into<String>) -> Result<Self, FormatError> {
        match value {
            "fp16" => Ok(Compression::Fp16),
            "int8" => Ok(Compression::Int8),
            "bf16" => Ok(Compression::Bf16),
            "int4" => Ok(Compression::Int4),
            other => Err(FormatError::UnsupportedCompression {
                format: FORMAT,
                field: field.into(),
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, FormatError> {
        Compression::parse(s, "compression")
    }
}
