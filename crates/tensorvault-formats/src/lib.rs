//! tensorvault's file formats, one module per format.
//!
//! * [`cgeb`]: fused-embedding records (`.cgeb`) with zero-copy decode, and GDS-aligned
//!   batch files (`.cgeb` + `.cgei`).
//! * [`cvc`]: compressed vector collections (`.cvc`), byte-compatible with the Python
//!   reference package `decompressed` (legacy v0 and v1.0 framings).
//! * [`mobi`]: compact mobile model files (`.mobi`): header, metadata, I/O specs,
//!   constant tensors (f32/fp16/int8/int16, optional gzip), operator graph, CRC32.
//! * [`npy`]: a strict, bounded parser of numpy `.npy` headers (the CLI's input).
//!
//! Every decoder here treats its input as untrusted: lengths are checked against the
//! bytes present before anything is allocated, and every rejection is a typed
//! [`FormatError`] naming the field and the file offset. Byte-level specifications live
//! in the repository's `docs/formats/`.

mod error;

pub mod cgeb;
pub mod cvc;
pub mod mobi;
pub mod npy;

pub use error::FormatError;
