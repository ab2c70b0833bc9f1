//! tensorvault's codecs.
//!
//! * [`float`]: f32 <-> f16 and f32 <-> bf16 slice conversion. f16 encoding is bit-exact
//!   with numpy's `astype(np.float16)` (round to nearest even, overflow to infinity, NaN
//!   payloads truncated and never quieted), which the CVC format depends on.
//! * [`affine_u8`]: the CVC int8 codec (per-chunk `min`/`scale`, `u8` codes), bit-exact
//!   with the reference implementation `decompressed` 2.1.1.
//!
//! Every function works on caller-provided slices and never allocates from a length it
//! was not handed.

mod error;

pub mod affine_u8;
pub mod float;

pub use error::QuantError;
