//! CVC: compressed vector collections (`.cvc`).
//!
//! A CVC file holds `num_vectors` f32 vectors of `dimension` values, split into chunks
//! that are stored as fp16, int8 (affine u8 with a per-chunk `min`/`scale`) or bf16 (our
//! extension). It is byte-compatible with the Python reference package `decompressed`:
//! tensorvault reads both framings (legacy v0 and v1.0, which adds a version and a
//! per-chunk CRC-32) and writes v1.0 by default. The byte-level specification, with every
//! quirk of the reference, is `docs/formats/cvc.md`.
//!
//! ```
//! use tensorvault_formats::cvc::{pack_to_vec, Compression, CvcReader, PackOptions};
//!
//! let rows: Vec<f32> = (0..12).map(|i| i as f32 * 0.25).collect(); // 4 vectors of 3
//! let opts = PackOptions { compression: Compression::Int8, chunk_size: 2, ..Default::default() };
//! let bytes = pack_to_vec(&rows, 3, &opts)?;
//! let reader = CvcReader::from_source(bytes, "in-memory")?;
//! assert_eq!(reader.num_vectors(), 4);
//! let back = reader.load_rows(1..3)?; // reads only the chunks holding rows 1 and 2
//! assert_eq!(back.shape().dims(), &[2, 3]);
//! assert!((back.as_slice::<f32>()?[0] - 0.75).abs() <= 0.5 * 0.25 / 255.0 * 10.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
mod compression;
mod decode;
mod header;
pub mod header_crc;
pub mod layout;
pub mod pyjson;
mod reader;
mod sink;
mod source;
mod stream_writer;
mod table;
mod writer;

pub use backend::{Backend, ChunkCodec, CpuBackend};
pub use compression::Compression;
pub use header::{ChunkHeader, ChunkSection, CvcHeader, Int8Params, Section};
pub use layout::Framing;
pub use reader::{ChunkIter, ChunkLayout, CorruptChunk, CvcReader, DecodedChunk, VerifyReport};
pub use source::{FileSource, ReadAt};
pub use stream_writer::CvcWriter;
pub use writer::{pack, pack_to_vec, PackOptions, PackSummary, ProgressFn, SectionSpec};
