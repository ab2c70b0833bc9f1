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
}

impl Compression {
    /// The name stored in the JSON header.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Compression::Fp16 => "fp16",
            Compression::Int8 => "int8",
            Compression::Bf16 => "bf16",
        }
    }

    /// Bytes per stored value.
    #[must_use]
    pub const fn width(self) -> u64 {
        match self {
            Compression::Int8 => 1,
            Compression::Fp16 | Compression::Bf16 => 2,
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
