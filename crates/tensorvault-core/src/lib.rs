//! Core types shared by every tensorvault crate.
//!
//! * [`DType`]: the element types tensorvault stores, with their on-disk names and widths.
//! * [`Shape`]: a tensor shape whose element count is computed with overflow checks.
//! * [`AlignedBuf`]: an owned, 64-byte-aligned, zero-initialised buffer of plain-old-data.
//! * [`Tensor`] (owned) and [`TensorView`] (borrowed): bytes plus dtype plus shape.
//! * [`checksum`]: CRC-32C, CRC-32 (IEEE), xxh3-64 and SHA-256 on top of the well-kept crates.
//! * [`atomic`]: replace a file atomically (temp file, fsync, rename, fsync of the directory).
//!
//! Everything that decodes untrusted bytes lives in the format crates; this crate only
//! offers checked building blocks (`Shape::numel` never overflows silently, buffers are
//! never sized from an unchecked length).

mod buffer;
mod dtype;
mod error;
mod shape;
mod tensor;

pub mod atomic;
pub mod checksum;
pub mod fsio;
pub mod progress;
pub mod regular;

pub use buffer::{AlignedBuf, ALIGNMENT, HUGE_PAGE_THRESHOLD};
pub use dtype::{DType, Element};
pub use error::CoreError;
pub use shape::Shape;
pub use tensor::{Tensor, TensorView};
