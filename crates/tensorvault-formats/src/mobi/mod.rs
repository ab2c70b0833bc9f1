//! MOBI: the compact mobile model file (`.mobi`), little-endian, versioned, checksummed.
//!
//! A file is a 32-byte header (magic `"MOBI"`, version, header CRC32, flags, total size,
//! section offsets), the metadata with the graph's input/output specs (v2: symbolic
//! dimensions such as batch `"N"`), the constant tensors (f32, or fp16 / affine int8,
//! uint8, int16 per tensor or, in v2, per axis; optionally gzip; v2 payloads of >= 1 KiB
//! 64-byte aligned), the operator graph with typed parameters (v2: then a value-names
//! table), and a CRC32 footer over everything before it. Readers take v1 and v2; the
//! writer writes v2. The byte-level specification is `docs/formats/mobi.md`; which
//! tensor gets which quantization is decided by [`choose_quantization`].
//!
//! Every reader entry point validates the whole file ([`validate`] collects every
//! problem; [`Model::from_bytes`], [`Model::open`] and [`Model::from_reader`] return the
//! first). Lengths and counts are checked against the bytes present before anything is
//! allocated, and gzip inflation is capped at the size the shape declares.
//! [`Model::open`] maps the file read-only and copies no uncompressed payload: each
//! tensor's [`Payload`] points into the shared map (gzip payloads are inflated into
//! memory of their own).
//!
//! ```
//! use tensorvault_formats::mobi::{models, Model, QuantTarget, WriteOptions};
//! let model = models::lenet5(1)?;
//! assert_eq!(model.parameter_count(), models::LENET5_PARAMS);
//! let opts = WriteOptions { quantize: Some(QuantTarget::Int8), gzip: false };
//! let bytes = model.to_bytes_with(&opts)?;
//! let mut back = Model::from_bytes(&bytes)?;
//! // conv2 [16, 6, 5, 5] is int8 with one scale per output channel; biases stay f32.
//! assert_eq!(back.tensors[2].quant_kind(), "per-axis");
//! assert_eq!(back.tensors[1].quant_kind(), "none");
//! back.dequantize()?; // f32 again, within scale/2 (per channel) of the original weights
//! # Ok::<(), tensorvault_formats::mobi::MobiError>(())
//! ```

mod builder;
mod cursor;
mod dequant;
mod error;
mod graph;
mod header;
pub mod layout;
pub mod models;
pub mod ops;
mod payload;
mod quantize;
mod read;
mod read_v1;
mod read_v2;
mod tensor;
mod types;
mod write;

pub use builder::{ModelBuilder, Value};
pub use dequant::Dequantizer;
pub use error::MobiError;
pub use graph::{listing, printable, to_dot};
pub use header::Header;
pub use payload::Payload;
pub use quantize::{
    choose_quantization, choose_quantization_for, quantize_as, quantize_tensor,
    quantize_tensor_always, QuantTarget, TensorQuant, WriteOptions, SMALL_TENSOR_ELEMENTS,
};
pub use read::{read_with, validate, validate_with, ReadOptions, Report};
pub use types::{
    element_count, shape_text, ConstantTensor, DataType, Dim, IoSpec, Metadata, Model, Operator,
    OperatorType, ParamValue, Quantization,
};
