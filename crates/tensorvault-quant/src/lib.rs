//! tensorvault's codecs.
//!
//! * [`float`]: f32 <-> f16 and f32 <-> bf16 slice conversion. f16 encoding is bit-exact
//!   with numpy's `astype(np.float16)` (round to nearest even, overflow to infinity, NaN
//!   payloads truncated and never quieted), which the CVC format depends on.
//! * [`affine_u8`]: the CVC int8 codec (per-chunk `min`/`scale`, `u8` codes), bit-exact
//!   with the reference implementation `decompressed` 2.1.1.
//! * [`groupwise`]: groupwise symmetric k-bit quantization (2..=8 bits, one f16 scale per
//!   group), with [`bitpack`] for the LSB-first code stream.
//! * [`segment`]: the self-describing quantized segment (one tensor, or a run of frames
//!   that reuse scales while the data's range drifts less than a tolerance); its byte
//!   layout is in [`layout`] and `docs/formats/quant.md`.
//! * [`segment_v2`]: the asymmetric segment (version 2): u8-coded group scales and mins,
//!   groups along the values or down the columns of a `[rows, width]` layout (KV keys per
//!   channel), optional raw f16 leading rows (attention sinks); fitting in [`asym`].
//! * [`segment_rot`]: the rotated segment (version 3): blocks of 2^k values rotated by a
//!   seeded randomized Hadamard transform ([`rotation`]), coded against fixed levels
//!   fitted to N(0, 1) ([`levels`]: Lloyd-Max or optimal-step uniform) with one log-coded
//!   scale byte per block.
//! * [`entropy`]: lossless rANS coding of k-bit codes (static per-run frequency table,
//!   interleaved lanes); [`segment_v5`] wraps a v2, v3 or v4 segment's codes in it (version 5),
//!   kept only when it is shorter.
//! * [`ecsq`]: entropy-coded uniform levels under rate control: a v3 segment with one
//!   shared step, wrapped by [`segment_v5`], the step searched so the bytes fit a budget.
//! * [`segment_v6`]: the row-gain envelope (version 6): one f16 gain per row part in front
//!   of a v2..v5 segment, making each row's decoding an unbiased inner-product estimate.
//! * [`segment_v7`]: model-coded ECSQ (version 7): one uniform step per run, codes
//!   rANS-coded with frequencies from a Gaussian model ([`ecsq_model`]) whose standard
//!   deviation is one side byte per rotation block; no stored frequency table.
//! * [`segment_v4`]: the super-block segment (version 4): groups of 4-256 values inside
//!   super-blocks with two f16 units each, every group's scale and min coded in 2-8 bits
//!   against them (GGUF k-quant style side data), optionally rotated per super-block.
//! * [`affine`]: per-tensor and per-channel affine int8 / uint8 / int16 for model weights.
//! * [`kind`]: what a tensor holds ([`TensorKind`]) and the codec v2 layout that follows
//!   from it, shared by the store's tiers and `tensorvault quant eval`.
//! * [`per_axis`]: affine quantization per slice along any axis (per-channel weights).
//! * [`row_int4`]: the CVC int4 codec (a tensorvault extension): 4-bit codes with a
//!   per-chunk column normalisation and a `(min, step)` pair per row.
//! * [`metrics`]: reconstruction error metrics (max abs error, RMSE, relative RMSE, SNR).
//!
//! Every function works on caller-provided slices and never allocates from a length it
//! was not handed.
//!
//! ```
//! use tensorvault_quant::segment::{encode_tensor, Segment};
//! use tensorvault_quant::groupwise::QuantParams;
//! let x: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.01).cos()).collect();
//! let (bytes, _) = encode_tensor(&QuantParams::for_bits(3)?, &x)?;
//! assert!(bytes.len() * 10 < x.len() * 4); // > 10x smaller than f32
//! let seg = Segment::parse(&bytes)?;
//! let mut y = vec![0f32; x.len()];
//! seg.decode_frame(0, &mut y)?;
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

mod error;

pub mod affine;
pub mod affine_u8;
pub mod asym;
pub mod bitpack;
pub mod ecsq;
pub mod ecsq_model;
pub mod entropy;
mod entropy_rans;
mod entropy_rans_simd;
mod entropy_rans_wide;
pub mod float;
#[cfg(target_arch = "x86_64")]
mod fwht_avx2;
pub mod groupwise;
pub mod kind;
pub mod layout;
mod le;
pub mod levels;
mod levels_table;
pub mod metrics;
pub mod per_axis;
#[cfg(target_arch = "x86_64")]
mod rot_decode_avx2;
pub mod rotation;
pub mod row_int4;
#[cfg(target_arch = "x86_64")]
mod row_int4_avx2;
pub mod segment;
pub mod segment_rot;
pub mod segment_v2;
pub mod segment_v4;
pub mod segment_v5;
pub mod segment_v6;
pub mod segment_v7;
pub mod segment_v8;
pub mod segment_v9;
mod superblock;

pub use error::QuantError;
pub use kind::TensorKind;
