//! [`BatchBinaryEncoder`]: many records in one GDS-friendly data file plus an index.

use std::io::Write;
use std::path::{Path, PathBuf};

use tensorvault_core::atomic::AtomicFile;
use tensorvault_core::checksum::xxh3_64;

use super::codec::EmbeddingBinaryCodec;
use super::embedding::FusedEmbedding;
use super::index::BatchIndex;
use super::layout as l;
use crate::FormatError;

/// The `(NAME.cgeb, NAME.cgei)` pair for `path` (its extension, if any, is replaced).
#[must_use]
pub fn batch_paths(path: &Path) -> (PathBuf, PathBuf) {
    (path.with_extension("cgeb"), path.with_extension("cgei"))
}

/// Builds a batch: records appended in memory, each at a multiple of the record
/// alignment (4096 by default, for GPU Direct Storage; zero padding in between).
#[derive(Debug, Clone)]
pub struct BatchBinaryEncoder {
    codec: EmbeddingBinaryCodec,
    buffer: Vec<u8>,
    offsets: Vec<u64>,
    alignment: u32,
}

impl BatchBinaryEncoder {
    /// An encoder with the default codec and 4096-byte alignment, with room for `count`
    /// records of the seed's size reserved up front (capped at 64 MiB).
    #[must_use]
    pub fn with_capacity(count: usize) -> Self {
        let bytes = count
            .saturating_mul(2 * l::GDS_ALIGNMENT as usize)
            .min(64 << 20);
        BatchBinaryEncoder {
            codec: EmbeddingBinaryCodec::new(),
            buffer: Vec::with_capacity(bytes),
            offsets: Vec::with_capacity(count.min(1 << 20)),
            alignment: l::GDS_ALIGNMENT,
        }
    }

    /// An encoder with this codec and record alignment.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] unless `alignment` is a power of two in
    /// 64..=1048576.
    pub fn new(codec: EmbeddingBinaryCodec, alignment: u32) -> Result<Self, FormatError> {
        if !l::valid_alignment(alignment) {
            return Err(FormatError::InvalidArgument {
                name: "alignment",
                reason: format!("{alignment} is not a power of two in 64..=1048576"),
            });
        }
        Ok(BatchBinaryEncoder {
            codec,
            buffer: Vec::new(),
            offsets: Vec::new(),
            alignment,
        })
    }

    /// Append one record.
    ///
    /// # Errors
    /// As [`EmbeddingBinaryCodec::encode`]; the batch is unchanged on error.
    pub fn push(&mut self, e: &FusedEmbedding) -> Result<(), FormatError> {
        let before = self.buffer.len();
        let start = before.next_multiple_of(self.alignment as usize);
        self.buffer.resize(start, 0);
        if let Err(err) = self.codec.encode_append(e, &mut self.buffer) {
            self.buffer.truncate(before);
            return Err(err);
        }
        self.offsets.push(start as u64);
        Ok(())
    }

    /// Records so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether no record was pushed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The record alignment.
    #[must_use]
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// The data file's bytes and the record offsets.
    #[must_use]
    pub fn finalize(self) -> (Vec<u8>, Vec<u64>) {
        (self.buffer, self.offsets)
    }

    /// The index for the current contents (hashes the data).
    #[must_use]
    pub fn index(&self) -> BatchIndex {
        BatchIndex {
            data_file_hash: xxh3_64(&self.buffer),
            record_alignment: self.alignment,
            offsets: self.offsets.clone(),
            version: crate::cgeb::layout::INDEX_VERSION,
        }
    }

    /// Write `NAME.cgeb` then `NAME.cgei` (extension of `path` replaced), each
    /// atomically: temp file, fsync, rename, fsync of the directory. Returns both paths.
    ///
    /// # Errors
    /// [`FormatError::Core`] / [`FormatError::Io`] if a write fails; a failed write
    /// leaves no temp file behind (the data file may be new while the index is old only
    /// if the index write itself fails, which the reader detects by the data hash).
    pub fn write_gds_file(&self, path: &Path) -> Result<(PathBuf, PathBuf), FormatError> {
        let (data_path, index_path) = batch_paths(path);
        // Both files are written in full to temporaries before either is renamed in, so a
        // failure to write the index (a full disk, an unwritable path) leaves no new data
        // file behind. If the index rename itself fails after the data's, the new data
        // file is removed rather than left without its index.
        let data = staged(&data_path, &self.buffer)?;
        let index = staged(&index_path, &self.index().to_bytes())?;
        data.commit()?;
        if let Err(e) = index.commit() {
            let _ = std::fs::remove_file(&data_path);
            return Err(e.into());
        }
        Ok((data_path, index_path))
    }
}

/// `bytes` written to a temporary file that replaces `path` on commit.
fn staged(path: &Path, bytes: &[u8]) -> Result<AtomicFile, FormatError> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)
        .map_err(FormatError::io("write", path.display()))?;
    Ok(f)
}
