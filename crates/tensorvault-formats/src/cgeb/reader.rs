//! [`BatchReader`]: a memory-mapped batch with O(1) zero-copy access by index.

use std::path::{Path, PathBuf};

use tensorvault_core::checksum::xxh3_64;

use super::batch::batch_paths;
use super::codec::decode_ref;
use super::embedding::FusedEmbeddingRef;
use super::error::CgebError;
use super::extent::check_extent;
use super::index::BatchIndex;
use super::layout as l;
use crate::FormatError;

/// How a [`BatchReader`] checks what it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchReaderOptions {
    /// Hash the whole data file on open and compare with the index (default on).
    pub verify_data_hash: bool,
    /// Verify each record's content hash on every `get` (default on).
    pub verify_records: bool,
}

impl Default for BatchReaderOptions {
    fn default() -> Self {
        BatchReaderOptions {
            verify_data_hash: true,
            verify_records: true,
        }
    }
}

enum Data {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Map(m) => m,
            Data::Owned(v) => v,
        }
    }
}

/// A batch (`NAME.cgeb` + `NAME.cgei`) opened for reading.
pub struct BatchReader {
    data: Data,
    index: BatchIndex,
    opts: BatchReaderOptions,
    data_path: Option<PathBuf>,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader")
            .field("records", &self.index.len())
            .field("data_len", &self.data.bytes().len())
            .field("data_path", &self.data_path)
            .finish_non_exhaustive()
    }
}

/// What [`BatchReader::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchVerifyReport {
    /// Records checked.
    pub records: u64,
    /// Hash stored in the index.
    pub stored_data_hash: u64,
    /// Hash of the data file.
    pub computed_data_hash: u64,
    /// Records that fail to decode or verify, with the reason.
    pub bad_records: Vec<(u64, String)>,
    /// Records whose vector does not start 64-byte aligned in the file.
    pub misaligned_vectors: Vec<u64>,
}

impl BatchVerifyReport {
    /// Whether everything checked out.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.stored_data_hash == self.computed_data_hash
            && self.bad_records.is_empty()
            && self.misaligned_vectors.is_empty()
    }
}

impl BatchReader {
    /// Open `NAME.cgeb` + `NAME.cgei` (`path`'s extension is replaced) with the default
    /// checks.
    ///
    /// # Errors
    /// As [`BatchReader::open_with`].
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        Self::open_with(path, BatchReaderOptions::default())
    }

    /// Open a batch: memory-map the data file, read and check the index against it.
    ///
    /// # Errors
    /// [`FormatError::Io`]; every rejection of [`BatchIndex::parse`];
    /// [`CgebError::DataFileHashMismatch`] when `verify_data_hash` is on.
    pub fn open_with(path: &Path, opts: BatchReaderOptions) -> Result<Self, FormatError> {
        let (data_path, index_path) = batch_paths(path);
        let index_bytes = FormatError::read_regular(&index_path)?;
        let file = FormatError::open_regular(&data_path)?;
        let len = file
            .metadata()
            .map_err(FormatError::io("stat", data_path.display()))?
            .len();
        let data = if len == 0 {
            Data::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; tensorvault never writes a published batch
            // in place (writers rename a new file over it), and every read through the
            // map is bounds-checked against its length taken here.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .map_err(FormatError::io("mmap", data_path.display()))?;
            Data::Map(map)
        };
        let mut r = Self::from_data(data, &index_bytes, opts)?;
        r.data_path = Some(data_path);
        Ok(r)
    }

    /// A reader over in-memory data and index bytes (tests, fuzzing, network buffers).
    ///
    /// # Errors
    /// As [`BatchReader::open_with`], without the I/O.
    pub fn from_bytes(
        data: Vec<u8>,
        index: &[u8],
        opts: BatchReaderOptions,
    ) -> Result<Self, FormatError> {
        Self::from_data(Data::Owned(data), index, opts)
    }

    fn from_data(
        data: Data,
        index_bytes: &[u8],
        opts: BatchReaderOptions,
    ) -> Result<Self, FormatError> {
        let bytes = data.bytes();
        let index = BatchIndex::parse(index_bytes, bytes.len() as u64)?;
        if opts.verify_data_hash {
            let computed = xxh3_64(bytes);
            if computed != index.data_file_hash {
                return Err(CgebError::DataFileHashMismatch {
                    offset: l::INDEX_DATA_HASH_OFFSET as u64,
                    stored: index.data_file_hash,
                    computed,
                }
                .into());
            }
        }
        Ok(BatchReader {
            data,
            index,
            opts,
            data_path: None,
        })
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the batch holds no records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The checked index.
    #[must_use]
    pub fn index(&self) -> &BatchIndex {
        &self.index
    }

    /// The data file's bytes.
    #[must_use]
    pub fn data(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The data file's path, when opened from files.
    #[must_use]
    pub fn data_path(&self) -> Option<&Path> {
        self.data_path.as_deref()
    }

    /// The options in force.
    #[must_use]
    pub fn options(&self) -> BatchReaderOptions {
        self.opts
    }

    /// Record `i`, zero-copy, in O(1): the record must fit between its offset and the
    /// next one, the bytes after it up to the next offset must be zero, and the last
    /// record must end where the file does.
    ///
    /// # Errors
    /// [`CgebError::IndexOutOfRange`], every rejection of
    /// [`super::EmbeddingBinaryCodec::decode_zero_copy`] with file offsets,
    /// [`CgebError::GapNotZero`], [`CgebError::TrailingData`].
    pub fn get(&self, i: usize) -> Result<FusedEmbeddingRef<'_>, FormatError> {
        let bytes = self.data.bytes();
        let Some((start, end)) = self.index.range(i, bytes.len() as u64) else {
            return Err(CgebError::IndexOutOfRange {
                index: i as u64,
                count: self.index.len() as u64,
            }
            .into());
        };
        // The index was checked against this data length: start < end <= len.
        let rec = bytes.get(start as usize..end as usize).unwrap_or_default();
        let r = decode_ref(rec, start, self.opts.verify_records)?;
        check_extent(i as u64, start, rec, r.record_len(), i + 1 == self.len())?;
        Ok(r)
    }

    /// Every record in order.
    pub fn iter(&self) -> impl Iterator<Item = Result<FusedEmbeddingRef<'_>, FormatError>> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Check everything: the data-file hash, every record's structure and content hash,
    /// that the bytes between records are zero and the file ends at the last record's end
    /// (reported as bad records), and that every vector starts 64-byte aligned in the file.
    #[must_use]
    pub fn verify(&self) -> BatchVerifyReport {
        let bytes = self.data.bytes();
        let mut report = BatchVerifyReport {
            records: self.len() as u64,
            stored_data_hash: self.index.data_file_hash,
            computed_data_hash: xxh3_64(bytes),
            ..Default::default()
        };
        for (i, &off) in self.index.offsets.iter().enumerate() {
            if !(off + l::VECTOR_OFFSET as u64).is_multiple_of(64) {
                report.misaligned_vectors.push(i as u64);
            }
            let (start, end) = self.index.range(i, bytes.len() as u64).unwrap_or_default();
            let rec = bytes.get(start as usize..end as usize).unwrap_or_default();
            let last = i + 1 == self.len();
            let checked = decode_ref(rec, start, true)
                .and_then(|r| check_extent(i as u64, start, rec, r.record_len(), last).map(|()| r));
            if let Err(e) = checked {
                report.bad_records.push((i as u64, e.to_string()));
            }
        }
        report
    }
}
