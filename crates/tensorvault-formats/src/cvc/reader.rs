//! Reading CVC files: open (header + layout validation), whole/partial/filtered loads,
//! a streaming chunk iterator and integrity verification.

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use serde_json::Value;
use tensorvault_core::{AlignedBuf, Shape, Tensor};

use crate::cvc::backend::{Backend, CpuBackend};
use crate::cvc::header::CvcHeader;
use crate::cvc::layout::{self, Framing, FORMAT, MAGIC};
use crate::cvc::source::{FileSource, ReadAt};
pub use crate::cvc::table::ChunkLayout;
use crate::cvc::table::{build_layout, detect_framing, read_at, truncated};
use crate::FormatError;

/// Target payload bytes per unit of parallel work.
pub(super) const PIECE_BYTES: u64 = 1 << 20;

/// A reader over one CVC file. Cheap to share between threads (`&self` everywhere).
pub struct CvcReader<S: ReadAt = FileSource> {
    src: S,
    name: String,
    header: CvcHeader,
    json_len: u64,
    chunks: Vec<ChunkLayout>,
    verify_checksums: bool,
    backend: Box<dyn Backend + Send>,
}

impl<S: ReadAt> std::fmt::Debug for CvcReader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CvcReader")
            .field("name", &self.name)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl CvcReader<FileSource> {
    /// Open a file for positioned reads (bounded memory: each chunk is read into a
    /// buffer of its own size).
    ///
    /// # Errors
    /// [`FormatError::Io`] if the file cannot be opened, or any validation error of
    /// [`CvcReader::from_source`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let file = FormatError::open_regular(path)?;
        let src = FileSource::new(file).map_err(FormatError::io("stat", path.display()))?;
        Self::from_source(src, path.display().to_string())
    }
}

impl CvcReader<memmap2::Mmap> {
    /// Open a file through a read-only memory map: loads decode straight from the page
    /// cache without an intermediate copy (the fastest path for whole-file loads).
    ///
    /// The file must not be truncated by another process while the reader lives: reading
    /// a page that no longer exists raises SIGBUS, as with any memory map. tensorvault
    /// only replaces files by rename, which is safe; use [`CvcReader::open`] (positioned
    /// reads) for files other programs may rewrite in place.
    ///
    /// # Errors
    /// As [`CvcReader::open`].
    pub fn open_mmap(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let file = FormatError::open_regular(path)?;
        // SAFETY: the map is read-only; tensorvault never writes a file it has open for
        // reading, and files are replaced by rename, never modified in place. A file
        // truncated by another process while mapped could fault; that is the documented
        // contract of memory-mapped readers (use `open` to avoid it).
        // No MAP_POPULATE: it would read the whole file, one fault-sized block at a time,
        // before anything decodes (3x slower than a plain read on a cold file) and even for
        // a partial load. Loads instead advise the ranges they need ahead of the decoders
        // and populate each piece's page tables in one call (`ReadAt::map_in`).
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(FormatError::io("mmap", path.display()))?;
        Self::from_source(map, path.display().to_string())
    }
}

impl<S: ReadAt> CvcReader<S> {
    /// Validate a source and build the chunk table. `name` is used in errors.
    ///
    /// Checks, before allocating anything sized by the file: magic, version, header
    /// length against the file, JSON and required fields, compressions, int8 parameters,
    /// rows against `num_vectors`, every chunk frame inside the file (in order, not
    /// overlapping), no trailing bytes, and every stored payload length.
    ///
    /// # Errors
    /// The [`FormatError`] naming the first problem found.
    pub fn from_source(src: S, name: impl Into<String>) -> Result<Self, FormatError> {
        let name = name.into();
        let file_len = src.len();
        let mut head = [0u8; 13];
        let head_len = usize::try_from(file_len.min(13)).expect("at most 13");
        read_at(&src, &name, &mut head[..head_len], 0)?;
        let head = &head[..head_len];
        if head.len() < MAGIC.len() || &head[..MAGIC.len()] != MAGIC {
            return Err(FormatError::BadMagic {
                format: FORMAT,
                expected: MAGIC,
                found: head[..head.len().min(MAGIC.len())].to_vec(),
            });
        }
        let (framing, version) = detect_framing(head, file_len)?;
        let hl_off = framing.header_len_offset() as usize;
        let header_len = u64::from(u32::from_le_bytes(
            head[hl_off..hl_off + 4].try_into().expect("4 bytes"),
        ));
        let json_offset = framing.json_offset();
        let json_end = json_offset + header_len;
        if header_len > layout::MAX_HEADER_LEN {
            return Err(FormatError::InvalidField {
                format: FORMAT,
                field: "header_len".into(),
                offset: framing.header_len_offset(),
                reason: format!(
                    "{header_len} exceeds the limit of {} bytes",
                    layout::MAX_HEADER_LEN
                ),
            });
        }
        if json_end > file_len {
            return Err(truncated(
                format!("JSON header (header_len = {header_len})"),
                json_offset,
                json_end,
                file_len,
            ));
        }
        // header_len is now backed by bytes actually present in the file.
        let mut json = vec![0u8; header_len as usize];
        read_at(&src, &name, &mut json, json_offset)?;
        let header = CvcHeader::parse(&json, framing, version, json_offset)?;
        drop(json);
        for (i, s) in header.sections.iter().enumerate() {
            if s.end_index > header.num_vectors {
                return Err(FormatError::InvalidField {
                    format: FORMAT,
                    field: format!("sections[{i}].end_index"),
                    offset: json_offset,
                    reason: format!(
                        "{} is past num_vectors = {}",
                        s.end_index, header.num_vectors
                    ),
                });
            }
        }
        let chunks = build_layout(&src, &name, &header, json_end, file_len)?;
        Ok(CvcReader {
            src,
            name,
            header,
            json_len: header_len,
            chunks,
            verify_checksums: true,
            backend: Box::new(CpuBackend),
        })
    }

    /// Turn CRC verification on loads on or off (on by default; `verify` always checks).
    #[must_use]
    pub fn with_checksums(mut self, verify: bool) -> Self {
        self.verify_checksums = verify;
        self
    }

    /// Decode with another backend.
    #[must_use]
    pub fn with_backend(mut self, backend: Box<dyn Backend + Send>) -> Self {
        self.backend = backend;
        self
    }

    /// The parsed header.
    #[must_use]
    pub fn header(&self) -> &CvcHeader {
        &self.header
    }

    /// Length of the JSON header in bytes.
    #[must_use]
    pub fn header_len(&self) -> u64 {
        self.json_len
    }

    /// The chunk table.
    #[must_use]
    pub fn chunks(&self) -> &[ChunkLayout] {
        &self.chunks
    }

    /// Total number of vectors.
    #[must_use]
    pub fn num_vectors(&self) -> u64 {
        self.header.num_vectors
    }

    /// Values per vector.
    #[must_use]
    pub fn dimension(&self) -> u64 {
        self.header.dimension
    }

    /// File length in bytes.
    #[must_use]
    pub fn file_len(&self) -> u64 {
        self.src.len()
    }

    /// The name used in errors (usually the path).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn source(&self) -> &S {
        &self.src
    }

    pub(super) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    pub(super) fn verifies_checksums(&self) -> bool {
        self.verify_checksums
    }

    /// Load every vector as a `[num_vectors, dimension]` f32 tensor.
    ///
    /// # Errors
    /// I/O errors and [`FormatError::ChecksumMismatch`] (when checksums are on).
    pub fn load_all(&self) -> Result<Tensor, FormatError> {
        let segs = self
            .chunks
            .iter()
            .map(|c| (c.index, 0..c.rows))
            .collect::<Vec<_>>();
        self.load_segments(&segs)
    }

    /// Load rows `[range.start, range.end)`, reading only the chunks that hold them.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] if the range is reversed or past the end; I/O and
    /// checksum errors as [`CvcReader::load_all`].
    pub fn load_rows(&self, range: Range<u64>) -> Result<Tensor, FormatError> {
        if range.start > range.end || range.end > self.header.num_vectors {
            return Err(FormatError::InvalidArgument {
                name: "rows",
                reason: format!(
                    "{}..{} is not within 0..{}",
                    range.start, range.end, self.header.num_vectors
                ),
            });
        }
        let segs = self.segments_for_rows(std::slice::from_ref(&range));
        self.load_segments(&segs)
    }

    /// Load the given chunks, concatenated in the order given.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for an index past the last chunk.
    pub fn load_chunks(&self, indices: &[usize]) -> Result<Tensor, FormatError> {
        let segs = indices
            .iter()
            .map(|&i| {
                self.chunks.get(i).map(|c| (i, 0..c.rows)).ok_or_else(|| {
                    FormatError::InvalidArgument {
                        name: "chunk_indices",
                        reason: format!(
                            "chunk {i} does not exist (the file has {})",
                            self.chunks.len()
                        ),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.load_segments(&segs)
    }

    /// Indices of the chunks whose `metadata[key] == value`.
    #[must_use]
    pub fn chunks_where_metadata(&self, key: &str, value: &Value) -> Vec<usize> {
        self.header
            .chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.metadata.as_ref().and_then(|m| m.get(key)) == Some(value))
            .map(|(i, _)| i)
            .collect()
    }

    /// Load the chunks whose `metadata[key] == value` (the reference's `metadata_key` /
    /// `metadata_value` filter).
    ///
    /// # Errors
    /// As [`CvcReader::load_chunks`].
    pub fn load_where_metadata(&self, key: &str, value: &Value) -> Result<Tensor, FormatError> {
        self.load_chunks(&self.chunks_where_metadata(key, value))
    }

    /// Row ranges of the sections whose `metadata[key] == value`.
    #[must_use]
    pub fn section_rows(&self, key: &str, value: &Value) -> Vec<Range<u64>> {
        self.header
            .sections
            .iter()
            .filter(|s| s.metadata.get(key) == Some(value))
            .map(|s| s.start_index..s.end_index)
            .collect()
    }

    /// Load the rows of every section whose `metadata[key] == value`, in file order (the
    /// reference's `section_key` / `section_value` filter).
    ///
    /// # Errors
    /// I/O and checksum errors as [`CvcReader::load_all`].
    pub fn load_section(&self, key: &str, value: &Value) -> Result<Tensor, FormatError> {
        let segs = self.segments_for_rows(&self.section_rows(key, value));
        self.load_segments(&segs)
    }

    /// Iterate over chunks one at a time (memory: one payload and one decoded chunk).
    #[must_use]
    pub fn iter_chunks(&self) -> ChunkIter<'_, S> {
        ChunkIter {
            reader: self,
            order: (0..self.chunks.len()).collect(),
            pos: 0,
            payload: Vec::new(),
        }
    }

    /// Iterate over the given chunks, in the order given.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for an index past the last chunk.
    pub fn iter_selected(&self, indices: Vec<usize>) -> Result<ChunkIter<'_, S>, FormatError> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.chunks.len()) {
            return Err(FormatError::InvalidArgument {
                name: "chunk_indices",
                reason: format!(
                    "chunk {bad} does not exist (the file has {})",
                    self.chunks.len()
                ),
            });
        }
        Ok(ChunkIter {
            reader: self,
            order: indices,
            pos: 0,
            payload: Vec::new(),
        })
    }

    /// Check every chunk's CRC-32 (v1.0) without decoding. Structural problems were
    /// already rejected when the reader opened; this reports every corrupt chunk rather
    /// than stopping at the first.
    ///
    /// # Errors
    /// I/O errors only; checksum failures are in the report.
    pub fn verify(&self) -> Result<VerifyReport, FormatError> {
        let results: Vec<Result<Option<(usize, u32)>, FormatError>> = self
            .chunks
            .par_iter()
            .map_init(Vec::new, |buf, c| {
                let Some(stored) = c.crc else { return Ok(None) };
                let mut h = crc32fast::Hasher::new();
                let mut off = c.payload_offset;
                while off < c.frame_end() {
                    let n = (c.frame_end() - off).min(4 * PIECE_BYTES);
                    let bytes = self.bytes_at(off, n, buf)?;
                    h.update(bytes);
                    off += n;
                }
                let computed = h.finalize();
                Ok((computed != stored).then_some((c.index, computed)))
            })
            .collect();
        let mut report = VerifyReport {
            framing: self.header.framing,
            chunks: self.chunks.len(),
            checksummed: self.chunks.iter().filter(|c| c.crc.is_some()).count(),
            bytes: self.src.len(),
            corrupt: Vec::new(),
        };
        for r in results {
            if let Some((index, computed)) = r? {
                let c = &self.chunks[index];
                report.corrupt.push(CorruptChunk {
                    index,
                    rows: c.row_start..c.row_start + c.rows,
                    payload_offset: c.payload_offset,
                    stored: c.crc.unwrap_or_default(),
                    computed,
                });
            }
        }
        Ok(report)
    }

    /// `n` bytes at `offset`: borrowed from an in-memory source, else read into `buf`.
    pub(super) fn bytes_at<'b>(
        &'b self,
        offset: u64,
        n: u64,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8], FormatError> {
        let n_us = usize::try_from(n)
            .map_err(|_| truncated("read", offset, offset + n, self.src.len()))?;
        if let Some(all) = self.src.as_bytes() {
            self.src.map_in(offset, n);
            let start = usize::try_from(offset).expect("offset checked at open");
            return Ok(&all[start..start + n_us]);
        }
        buf.resize(n_us, 0);
        read_at(&self.src, &self.name, buf, offset)?;
        Ok(&buf[..])
    }

    /// Split row ranges into `(chunk index, rows within that chunk)` segments, in order:
    /// the chunks a partial read has to touch. Ranges are clipped to the collection.
    #[must_use]
    pub fn segments_for_rows(&self, ranges: &[Range<u64>]) -> Vec<(usize, Range<u64>)> {
        let mut segs = Vec::new();
        for r in ranges {
            let first = self
                .chunks
                .partition_point(|c| c.row_start + c.rows <= r.start);
            for c in &self.chunks[first..] {
                if c.row_start >= r.end {
                    break;
                }
                let lo = r.start.max(c.row_start) - c.row_start;
                let hi = r.end.min(c.row_start + c.rows) - c.row_start;
                if hi > lo {
                    segs.push((c.index, lo..hi));
                }
            }
        }
        segs
    }

    /// Decode `(chunk, rows within chunk)` segments into one tensor, in parallel.
    fn load_segments(&self, segs: &[(usize, Range<u64>)]) -> Result<Tensor, FormatError> {
        let dim = self.header.dimension;
        let total_rows: u64 = segs.iter().map(|(_, r)| r.end - r.start).sum();
        // Every segment lies inside a chunk whose payload is present in the file, so the
        // allocation is bounded by (file bytes / value width) * 4.
        let numel =
            usize::try_from(total_rows * dim).map_err(|_| FormatError::InvalidArgument {
                name: "rows",
                reason: "result does not fit in memory on this platform".into(),
            })?;
        let shape = Shape::new(&[total_rows, dim])?;
        let mut out = AlignedBuf::<f32>::zeroed(numel);
        let batches = self.plan(segs, u64::MAX);
        self.run_plan(&batches, out.as_mut_slice(), &mut |_| {
            Ok::<(), FormatError>(())
        })?;
        self.check_empty_chunks(segs)?;
        Ok(Tensor::from_buf(shape, out)?)
    }

    /// Empty chunks have no pieces; their stored CRC must be that of no bytes (0).
    fn check_empty_chunks(&self, segs: &[(usize, Range<u64>)]) -> Result<(), FormatError> {
        if self.verify_checksums {
            for (ci, _) in segs {
                if self.chunks[*ci].rows == 0 {
                    self.check_crc(&self.chunks[*ci], 0)?;
                }
            }
        }
        Ok(())
    }

    /// Decode `(chunk, rows within chunk)` segments (as [`CvcReader::segments_for_rows`]
    /// returns) in order, handing the values to `sink` in batches of at most
    /// `batch_values` values (rounded up to one row). Memory: one batch, whatever the
    /// file size; storage reads ahead across batch boundaries, so a cold file streams at
    /// the speed of the disk. With checksums on, every chunk touched is checked; a corrupt
    /// chunk is reported before the batch holding its last rows reaches `sink`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] (converted) for a chunk index or rows outside the
    /// file; I/O and checksum errors as [`CvcReader::load_all`]; the first error `sink`
    /// returns, which stops the load.
    pub fn stream_segments<E: From<FormatError>>(
        &self,
        segs: &[(usize, Range<u64>)],
        batch_values: usize,
        mut sink: impl FnMut(&[f32]) -> Result<(), E>,
    ) -> Result<(), E> {
        for (ci, rows) in segs {
            let ok = self
                .chunks
                .get(*ci)
                .is_some_and(|c| rows.start <= rows.end && rows.end <= c.rows);
            if !ok {
                return Err(FormatError::InvalidArgument {
                    name: "segments",
                    reason: format!(
                        "chunk {ci} rows {}..{} are not in the file ({} chunks)",
                        rows.start,
                        rows.end,
                        self.chunks.len()
                    ),
                }
                .into());
            }
        }
        let batches = self.plan(segs, batch_values as u64);
        let dim = self.header.dimension;
        let largest = batches
            .iter()
            .map(|b| {
                b.iter()
                    .filter(|s| s.decode)
                    .map(|s| (s.rows.end - s.rows.start) * dim)
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0);
        let largest = usize::try_from(largest).map_err(|_| FormatError::InvalidArgument {
            name: "batch_values",
            reason: "a batch does not fit in memory on this platform".into(),
        })?;
        let mut buf = AlignedBuf::<f32>::zeroed(largest);
        self.run_plan(&batches, buf.as_mut_slice(), &mut sink)?;
        self.check_empty_chunks(segs)?;
        Ok(())
    }

    pub(super) fn check_crc(&self, c: &ChunkLayout, computed: u32) -> Result<(), FormatError> {
        match c.crc {
            Some(stored) if stored != computed => Err(FormatError::ChecksumMismatch {
                format: FORMAT,
                what: format!("chunk {} payload", c.index),
                offset: c.payload_offset,
                stored: stored.into(),
                computed: computed.into(),
            }),
            _ => Ok(()),
        }
    }

    /// Read, check and decode one whole chunk into `out` (`rows * dimension` values).
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a bad index or output size; I/O and checksum
    /// errors.
    pub fn read_chunk_into(
        &self,
        index: usize,
        out: &mut [f32],
        scratch: &mut Vec<u8>,
    ) -> Result<(), FormatError> {
        let c = self
            .chunks
            .get(index)
            .ok_or_else(|| FormatError::InvalidArgument {
                name: "index",
                reason: format!(
                    "chunk {index} does not exist (the file has {})",
                    self.chunks.len()
                ),
            })?;
        if out.len() as u64 != c.rows * self.header.dimension {
            return Err(FormatError::InvalidArgument {
                name: "out",
                reason: format!(
                    "chunk {index} has {} values, buffer holds {}",
                    c.rows * self.header.dimension,
                    out.len()
                ),
            });
        }
        let bytes = self.bytes_at(c.payload_offset, c.payload_len, scratch)?;
        if self.verify_checksums && c.crc.is_some() {
            self.check_crc(c, crc32fast::hash(bytes))?;
        }
        self.backend.decode(&c.codec, bytes, out)
    }
}

/// One decoded chunk from [`ChunkIter`].
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedChunk {
    /// Chunk index.
    pub index: usize,
    /// First row of the chunk in the collection.
    pub row_start: u64,
    /// Rows in the chunk.
    pub rows: u64,
    /// `rows * dimension` values, row-major.
    pub values: Vec<f32>,
}

/// Streaming iterator over decoded chunks; holds one payload buffer, reused.
pub struct ChunkIter<'r, S: ReadAt> {
    reader: &'r CvcReader<S>,
    order: Vec<usize>,
    pos: usize,
    payload: Vec<u8>,
}

impl<S: ReadAt> Iterator for ChunkIter<'_, S> {
    type Item = Result<DecodedChunk, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        let &index = self.order.get(self.pos)?;
        self.pos += 1;
        let c = &self.reader.chunks[index];
        let mut values = vec![0f32; (c.rows * self.reader.header.dimension) as usize];
        Some(
            self.reader
                .read_chunk_into(index, &mut values, &mut self.payload)
                .map(|()| DecodedChunk {
                    index,
                    row_start: c.row_start,
                    rows: c.rows,
                    values,
                }),
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.order.len() - self.pos;
        (n, Some(n))
    }
}

/// The result of [`CvcReader::verify`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// The file's framing.
    pub framing: Framing,
    /// Chunks in the file.
    pub chunks: usize,
    /// Chunks that carry a CRC (all of them in v1.0, none in v0).
    pub checksummed: usize,
    /// File size.
    pub bytes: u64,
    /// Chunks whose CRC does not match.
    pub corrupt: Vec<CorruptChunk>,
}

impl VerifyReport {
    /// Whether every checksum matched.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.corrupt.is_empty()
    }
}

/// A chunk that failed its CRC.
#[derive(Debug, Clone, PartialEq)]
pub struct CorruptChunk {
    /// Chunk index.
    pub index: usize,
    /// The rows it holds.
    pub rows: Range<u64>,
    /// Offset of its payload.
    pub payload_offset: u64,
    /// CRC stored in the file.
    pub stored: u32,
    /// CRC of the bytes present.
    pub computed: u32,
}
