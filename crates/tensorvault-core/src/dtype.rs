//! Element types.

use std::fmt;
use std::str::FromStr;

use crate::CoreError;

/// An element type tensorvault can store.
///
/// The discriminants are stable and may be written to disk by formats that need a
/// one-byte dtype tag; never reorder them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum DType {
    /// IEEE-754 binary32.
    F32 = 0,
    /// IEEE-754 binary16.
    F16 = 1,
    /// bfloat16 (the upper half of a binary32).
    BF16 = 2,
    /// Signed 8-bit integer.
    I8 = 3,
    /// Unsigned 8-bit integer.
    U8 = 4,
    /// Signed 16-bit integer.
    I16 = 5,
    /// Signed 32-bit integer.
    I32 = 6,
    /// Signed 64-bit integer.
    I64 = 7,
    /// IEEE-754 binary64.
    F64 = 8,
}

impl DType {
    /// Every dtype, in tag order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F64,
    ];

    /// Width of one element in bytes.
    #[must_use]
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The lower-case name used in headers, CLIs and error messages (`"f32"`, `"bf16"`, ...).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F64 => "f64",
        }
    }

    /// numpy's name of the dtype (`"float32"`, `"bfloat16"`, ...), which Python callers
    /// see; [`DType::from_str`] accepts it as well as [`DType::name`].
    #[must_use]
    pub const fn numpy_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F64 => "float64",
        }
    }

    /// The stable one-byte tag (the enum discriminant).
    #[must_use]
    pub const fn tag(self) -> u8 {
        self as u8
    }

    /// The dtype for a one-byte tag, if it is known.
    #[must_use]
    pub fn from_tag(tag: u8) -> Option<DType> {
        DType::ALL.get(usize::from(tag)).copied()
    }

    /// Whether the type is a floating-point type.
    #[must_use]
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let dt = match lower.as_str() {
            "f32" | "float32" => DType::F32,
            "f16" | "float16" | "fp16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "i8" | "int8" => DType::I8,
            "u8" | "uint8" => DType::U8,
            "i16" | "int16" => DType::I16,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "f64" | "float64" => DType::F64,
            _ => return Err(CoreError::UnknownDType { name: s.to_owned() }),
        };
        Ok(dt)
    }
}

/// Rust element types that correspond to a [`DType`].
///
/// Sealed: only the primitive types below implement it, so a byte buffer can be
/// reinterpreted as `&[T]` only for types that have no invalid bit patterns.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The dtype of this element type.
    const DTYPE: DType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}

element! {
    f32 => F32, half::f16 => F16, half::bf16 => BF16, i8 => I8, u8 => U8,
    i16 => I16, i32 => I32, i64 => I64, f64 => F64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_names_parse() {
        for dt in DType::ALL {
            assert_eq!(DType::from_tag(dt.tag()), Some(dt));
            assert_eq!(dt.name().parse::<DType>().unwrap(), dt);
        }
        assert_eq!(DType::from_tag(9), None);
        assert!(matches!(
            "q4".parse::<DType>(),
            Err(CoreError::UnknownDType { .. })
        ));
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::BF16.size(), 2);
        assert_eq!(DType::I64.size(), 8);
        assert_eq!(DType::U8.size(), 1);
    }
}
