//! CGEB: fused-embedding records (`.cgeb`) and GDS-aligned batch files (`.cgeb` +
//! `.cgei`).
//!
//! A record is a 64-byte big-endian header, the vector (`dimension` f32), the expert
//! weights (`num_experts` f32), the selected expert indices (`top_k` bytes) and optional
//! aux data (stored as is, LZ4 or Zstd). The header carries an xxh3-64 of everything
//! after it. [`EmbeddingBinaryCodec::decode_zero_copy`] returns a view over the buffer
//! that allocates nothing. A batch puts records at multiples of 4096 bytes (for GPU
//! Direct Storage; 64 allowed) in `NAME.cgeb`, with their offsets in `NAME.cgei`;
//! [`BatchReader`] memory-maps the pair and gives O(1) access by index, and
//! [`DirectReader`] reads records with `O_DIRECT` (the stand-in for cuFile). The
//! byte-level specification is `docs/formats/cgeb.md`.
//!
//! ```
//! use tensorvault_formats::cgeb::{BatchBinaryEncoder, BatchReader, FusedEmbedding};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut batch = BatchBinaryEncoder::with_capacity(3);
//! for i in 0..3u8 {
//!     batch.push(&FusedEmbedding::new(vec![f32::from(i); 1536], vec![0.125; 8], vec![i, 7]))?;
//! }
//! batch.write_gds_file(&dir.path().join("emb"))?; // emb.cgeb + emb.cgei
//! let reader = BatchReader::open(&dir.path().join("emb"))?;
//! assert_eq!(reader.index().offsets, [0, 8192, 16384]);
//! assert_eq!(reader.get(2)?.vector().get(0), Some(2.0));
//! # Ok::<(), tensorvault_formats::FormatError>(())
//! ```

mod aux;
mod batch;
mod codec;
mod direct;
mod embedding;
mod error;
mod extent;
mod header;
mod index;
pub mod layout;
mod reader;

pub use aux::CompressionType;
pub use batch::{batch_paths, BatchBinaryEncoder};
pub use codec::EmbeddingBinaryCodec;
pub use direct::{DirectReader, DIRECT_OPEN_OP};
pub use embedding::{FloatSlice, FusedEmbedding, FusedEmbeddingRef};
pub use error::CgebError;
pub use header::EmbeddingHeader;
pub use index::{BatchIndex, EmbeddingIndexHeader};
pub use layout::{MAGIC as EMBEDDING_MAGIC, VERSION as EMBEDDING_BINARY_VERSION};
pub use reader::{BatchReader, BatchReaderOptions, BatchVerifyReport};
