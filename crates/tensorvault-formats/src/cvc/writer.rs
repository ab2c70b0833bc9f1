//! Writing CVC files from a slice in one call ([`pack`]), and the planning and encoding
//! steps the streaming writer ([`crate::cvc::CvcWriter`]) shares. Both write atomically (temp file, fsync, rename,
//! fsync of the directory) and, for the same input and options, the same bytes as the
//! reference `decompressed` 2.1.1 (v1.0) or 0.1.0 (v0).

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value;
use tensorvault_core::atomic::AtomicFile;
use tensorvault_quant::affine_u8::{min_max_finite, AffineU8};
use tensorvault_quant::float::{f32_to_bf16_bits, f32_to_f16_bits};
use tensorvault_quant::row_int4::{row_bytes, ColumnNorm};
use tensorvault_quant::QuantError;

use crate::cvc::compression::Compression;
use crate::cvc::header::{ChunkHeader, ChunkSection, CvcHeader, Int8Params, Section};
use crate::cvc::layout::{self, Framing, MAGIC};
use crate::cvc::sink::{FileSink, MemSink, Sink};
use crate::FormatError;

/// A progress callback: `(rows done, rows total)` (the workspace's one progress type,
/// `tensorvault_core::progress`).
pub use tensorvault_core::progress::ProgressFn;

/// A section of rows with its metadata (the reference's `pack_cvc_sections`).
#[derive(Debug, Clone, PartialEq)]
pub struct SectionSpec {
    /// Rows in the section (sections follow each other in order).
    pub rows: u64,
    /// The section's metadata object.
    pub metadata: Value,
}

/// Options for [`pack`] and [`CvcWriter`]. The defaults are the reference's.
#[derive(Clone)]
pub struct PackOptions {
    /// Default compression of every chunk (`fp16`).
    pub compression: Compression,
    /// Rows per chunk (100,000); the last chunk holds the remainder.
    pub chunk_size: u64,
    /// v1.0 (default) or the legacy v0 layout.
    pub framing: Framing,
    /// Page-align every chunk frame and record `file_offset`s.
    pub mmap_optimized: bool,
    /// One metadata value per chunk (`chunk_metadata`).
    pub chunk_metadata: Option<Vec<Value>>,
    /// One compression per chunk, overriding `compression` (mixed files).
    pub chunk_compression: Option<Vec<Compression>>,
    /// Sections, in row order; their rows must add up to the number of vectors.
    pub sections: Option<Vec<SectionSpec>>,
    /// Called after each chunk is written.
    pub progress: Option<ProgressFn>,
    /// fsync the file and its directory before and after the atomic rename (default). Turn
    /// off only for scratch output: the rename stays atomic, durability is lost.
    pub sync: bool,
    /// Write the reference's exact bytes: no header checksum (`tensorvault_header_crc32c`,
    /// written by default in v1.0 files; `docs/formats/cvc.md` section 6.2).
    pub reference_exact: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            compression: Compression::Fp16,
            chunk_size: 100_000,
            framing: Framing::V1,
            mmap_optimized: false,
            chunk_metadata: None,
            chunk_compression: None,
            sections: None,
            progress: None,
            sync: true,
            reference_exact: false,
        }
    }
}

impl std::fmt::Debug for PackOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackOptions")
            .field("compression", &self.compression)
            .field("chunk_size", &self.chunk_size)
            .field("framing", &self.framing)
            .field("mmap_optimized", &self.mmap_optimized)
            .finish_non_exhaustive()
    }
}

impl PackOptions {
    pub(super) fn check(&self) -> Result<(), FormatError> {
        if self.chunk_size == 0 {
            return Err(arg("chunk_size", "must be at least 1"));
        }
        let int4 = self.compression == Compression::Int4
            || self
                .chunk_compression
                .as_ref()
                .is_some_and(|v| v.contains(&Compression::Int4));
        if int4 && self.framing == Framing::V0 {
            return Err(arg(
                "compression",
                "int4 is a tensorvault extension of v1.0 files; the legacy v0 layout cannot hold it",
            ));
        }
        if self.mmap_optimized && self.framing == Framing::V0 {
            return Err(arg(
                "mmap_optimized",
                "the legacy v0 layout has no file offsets; use v1.0",
            ));
        }
        Ok(())
    }

    pub(super) fn compression_of(&self, chunk: usize) -> Result<Compression, FormatError> {
        match &self.chunk_compression {
            None => Ok(self.compression),
            Some(v) => v.get(chunk).copied().ok_or_else(|| {
                arg(
                    "chunk_compression",
                    format!("no entry for chunk {chunk} ({} given)", v.len()),
                )
            }),
        }
    }

    pub(super) fn metadata_of(&self, chunk: usize) -> Result<Option<Value>, FormatError> {
        match &self.chunk_metadata {
            None => Ok(None),
            Some(v) => v.get(chunk).cloned().map(Some).ok_or_else(|| {
                arg(
                    "chunk_metadata",
                    format!("no entry for chunk {chunk} ({} given)", v.len()),
                )
            }),
        }
    }
}

pub(super) fn arg(name: &'static str, reason: impl Into<String>) -> FormatError {
    FormatError::InvalidArgument {
        name,
        reason: reason.into(),
    }
}

/// What a write produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSummary {
    /// Bytes in the file.
    pub bytes: u64,
    /// Vectors written.
    pub rows: u64,
    /// Chunks written.
    pub chunks: usize,
    /// JSON header length.
    pub header_len: u64,
}

/// Values encoded per parallel task.
const ENCODE_BLOCK: usize = 256 * 1024;

/// Minimum and maximum over `values`, reduced in parallel blocks; a non-finite value is
/// reported at its index in `values` (the first one, as the sequential scan would).
fn par_min_max(values: &[f32]) -> Result<(f32, f32), QuantError> {
    let parts: Vec<Result<(f32, f32), QuantError>> = values
        .par_chunks(ENCODE_BLOCK)
        .enumerate()
        .map(|(b, c)| {
            min_max_finite(c).map_err(|e| match e {
                QuantError::NonFinite { index, value } => QuantError::NonFinite {
                    index: index + b * ENCODE_BLOCK,
                    value,
                },
                other => other,
            })
        })
        .collect();
    let mut acc: Option<(f32, f32)> = None;
    for p in parts {
        let (lo, hi) = p?;
        acc = Some(acc.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    Ok(acc.unwrap_or((0.0, 0.0)))
}

/// Chunk header (with int8 parameters fitted) for `values`, chunk `index` at `row_start`.
/// What every chunk of one file shares when it is planned.
pub(super) struct PlanCtx<'a> {
    pub(super) dim: u64,
    pub(super) framing: Framing,
    pub(super) sections: &'a [Section],
}

pub(super) fn plan_chunk(
    ctx: &PlanCtx<'_>,
    values: &[f32],
    index: usize,
    row_start: u64,
    compression: Compression,
    metadata: Option<Value>,
) -> Result<ChunkHeader, FormatError> {
    let (dim, framing, sections) = (ctx.dim, ctx.framing, ctx.sections);
    let rows = values.len() as u64 / dim;
    let codec_err = |source| FormatError::Codec {
        context: format!("chunk {index} (rows {row_start}..{})", row_start + rows),
        source,
    };
    let int8 = if compression == Compression::Int8 {
        let (codec, scale) = match framing {
            Framing::V1 => {
                let (min, max) = par_min_max(values).map_err(codec_err)?;
                let c = AffineU8::from_min_max(min, max).map_err(codec_err)?;
                (c, f64::from(c.scale))
            }
            Framing::V0 => AffineU8::fit_v010(values).map_err(codec_err)?,
        };
        Some(Int8Params {
            min: f64::from(codec.min),
            scale,
            codec,
        })
    } else {
        None
    };
    let int4 = if compression == Compression::Int4 {
        let cols = ColumnNorm::fit(values, dim as usize).map_err(codec_err)?;
        Some(Arc::new(cols))
    } else {
        None
    };
    let row_end = row_start + rows;
    let chunk_sections = sections
        .iter()
        .filter(|s| row_start < s.end_index && row_end > s.start_index)
        .map(|s| ChunkSection {
            end_in_chunk: s.end_index.min(row_end) - row_start,
            metadata: s.metadata.clone(),
            section_end: s.end_index,
            section_start: s.start_index,
            start_in_chunk: s.start_index.max(row_start) - row_start,
        })
        .collect();
    Ok(ChunkHeader {
        rows,
        compression,
        int8,
        int4,
        metadata,
        sections: chunk_sections,
        file_offset: None,
    })
}

thread_local! {
    /// Per-thread encode buffer (at most one piece), reused across pieces and chunks so
    /// the hot loop never allocates or zero-fills.
    static SCRATCH: std::cell::RefCell<Vec<u16>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Encode `values` into `out` (which has room for exactly their codes).
fn encode_into(values: &[f32], chunk: &ChunkHeader, out: &mut [u16]) -> Result<(), QuantError> {
    if let Some(cols) = &chunk.int4 {
        let n = values.len() / cols.dim() * row_bytes(cols.dim()).unwrap_or(0);
        let bytes = &mut bytemuck::cast_slice_mut::<u16, u8>(out)[..n];
        return cols.encode_rows(values, bytes);
    }
    match (chunk.compression, chunk.int8) {
        (Compression::Int8, Some(p)) => {
            let bytes = &mut bytemuck::cast_slice_mut::<u16, u8>(out)[..values.len()];
            p.codec.encode(values, bytes)
        }
        (c, _) => {
            if c == Compression::Bf16 {
                f32_to_bf16_bits(values, out)?;
            } else {
                f32_to_f16_bits(values, out)?;
            }
            if cfg!(target_endian = "big") {
                for w in out.iter_mut() {
                    *w = w.to_le();
                }
            }
            Ok(())
        }
    }
}

/// Encode one chunk and write its frame at `pos`: the payload in pieces encoded and
/// written in parallel (each piece's CRC-32 computed while it is hot in cache, the CRCs
/// combined in order), then the length/CRC prefix in front of it. Memory: one small
/// scratch buffer per thread, whatever the chunk size. Returns the frame length.
pub(super) fn write_chunk_at(
    sink: &dyn Sink,
    pos: u64,
    values: &[f32],
    chunk: &ChunkHeader,
    framing: Framing,
) -> Result<u64, FormatError> {
    // Pieces are whole units: a value, or an int4 row (its parameters lead the row).
    let (unit_values, unit_bytes) = match &chunk.int4 {
        Some(c) => (c.dim(), row_bytes(c.dim()).unwrap_or(usize::MAX)),
        None => (1, chunk.compression.row_bytes(1).unwrap_or(2) as usize),
    };
    let bytes_of = |n: usize| n / unit_values * unit_bytes;
    let piece_values = (ENCODE_BLOCK / unit_values).max(1) * unit_values;
    let payload_len = bytes_of(values.len());
    let len = u32::try_from(payload_len).map_err(|_| {
        arg(
            "chunk_size",
            format!("a chunk payload of {payload_len} bytes does not fit the format's u32 length; use smaller chunks"),
        )
    })?;
    let prefix_len = framing.frame_prefix();
    let payload_pos = pos + prefix_len;
    let codec_err = |source| FormatError::Codec {
        context: "encode".to_owned(),
        source,
    };
    let hashers: Vec<Result<crc32fast::Hasher, FormatError>> = values
        .par_chunks(piece_values)
        .enumerate()
        .map(|(i, piece)| {
            SCRATCH.with_borrow_mut(|scratch| {
                let n = bytes_of(piece.len());
                if scratch.len() < n.div_ceil(2) {
                    scratch.resize(n.div_ceil(2), 0);
                }
                let words = &mut scratch[..n.div_ceil(2)];
                encode_into(piece, chunk, words).map_err(codec_err)?;
                let bytes = &bytemuck::cast_slice::<u16, u8>(words)[..n];
                let mut h = crc32fast::Hasher::new();
                h.update(bytes);
                sink.put(payload_pos + (i * bytes_of(piece_values)) as u64, bytes)?;
                Ok(h)
            })
        })
        .collect();
    let mut crc = crc32fast::Hasher::new();
    for h in hashers {
        crc.combine(&h?);
    }
    let mut prefix = len.to_le_bytes().to_vec();
    if framing == Framing::V1 {
        prefix.extend_from_slice(&crc.finalize().to_le_bytes());
    }
    sink.put(pos, &prefix)?;
    Ok(prefix_len + payload_len as u64)
}

/// The file prefix: magic, (v1.0) version, header length, JSON.
pub(super) fn file_prefix(framing: Framing, json: &[u8]) -> Result<Vec<u8>, FormatError> {
    let len = u32::try_from(json.len()).map_err(|_| arg("header", "JSON header exceeds 4 GiB"))?;
    let mut p = Vec::with_capacity(json.len() + 12);
    p.extend_from_slice(MAGIC);
    if framing == Framing::V1 {
        p.extend_from_slice(&layout::V1_MAJOR.to_le_bytes());
        p.extend_from_slice(&layout::V1_MINOR.to_le_bytes());
    }
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(json);
    Ok(p)
}

/// For `mmap_optimized`: give every chunk a page-aligned `file_offset` and return the
/// serialized header and the offset where the first frame starts. The header region is
/// the smallest page multiple that holds the final header (the reference sizes it before
/// adding the offsets and then overwrites chunk 0 when the header outgrows it).
pub(super) fn assign_offsets(
    header: &mut CvcHeader,
    payload_lens: &[u64],
) -> Result<(Vec<u8>, u64), FormatError> {
    let framing = header.framing;
    let overflow = || arg("rows", "file offsets overflow u64");
    let base = framing.json_offset() + header.to_json()?.len() as u64;
    let mut region = layout::page_align(base).ok_or_else(overflow)?;
    loop {
        let mut off = region;
        let n = header.chunks.len();
        for (i, (c, &len)) in header.chunks.iter_mut().zip(payload_lens).enumerate() {
            c.file_offset = Some(off);
            let end = off + framing.frame_prefix() + len;
            off = if i + 1 < n {
                layout::page_align(end).ok_or_else(overflow)?
            } else {
                end
            };
        }
        let json = header.to_json()?;
        if framing.json_offset() + json.len() as u64 <= region {
            return Ok((json, region));
        }
        region += layout::PAGE;
    }
}

/// Sections as absolute row ranges, checked against the total.
pub(super) fn resolve_sections(
    specs: Option<&[SectionSpec]>,
    total: Option<u64>,
) -> Result<Vec<Section>, FormatError> {
    let Some(specs) = specs else {
        return Ok(Vec::new());
    };
    let mut start = 0u64;
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        let end = start
            .checked_add(s.rows)
            .ok_or_else(|| arg("sections", "rows overflow u64"))?;
        out.push(Section {
            start_index: start,
            end_index: end,
            metadata: s.metadata.clone(),
        });
        start = end;
    }
    if let Some(total) = total {
        if start != total {
            return Err(arg(
                "sections",
                format!("sections hold {start} rows but {total} vectors were given"),
            ));
        }
    }
    Ok(out)
}

pub(super) fn file_level_compression(opts: &PackOptions, chunks: &[ChunkHeader]) -> Compression {
    // An extension compression anywhere is also written at file level, so readers that do
    // not know it refuse the whole file instead of mis-decoding that chunk.
    chunks
        .iter()
        .map(|c| c.compression)
        .find(|c| !c.is_reference())
        .unwrap_or(opts.compression)
}

pub(super) fn check_shape(values: &[f32], dim: usize) -> Result<u64, FormatError> {
    if dim == 0 {
        return Err(arg("dimension", "must be at least 1"));
    }
    if !values.len().is_multiple_of(dim) {
        return Err(arg(
            "vectors",
            format!(
                "{} values is not a whole number of rows of dimension {dim}",
                values.len()
            ),
        ));
    }
    Ok((values.len() / dim) as u64)
}

/// Encode `values` (`rows x dim`, row-major) as a complete CVC file into `sink`.
fn write_file(
    sink: &dyn Sink,
    values: &[f32],
    dim: usize,
    opts: &PackOptions,
) -> Result<PackSummary, FormatError> {
    opts.check()?;
    let n = check_shape(values, dim)?;
    let d = dim as u64;
    let sections = resolve_sections(opts.sections.as_deref(), Some(n))?;
    let cs = opts.chunk_size;
    let row_slice =
        |start: u64| &values[(start * d) as usize..(start.saturating_add(cs).min(n) * d) as usize];

    // Pass 1: chunk headers (int8 parameters need the chunk's min and max).
    let mut chunks = Vec::new();
    let mut start = 0u64;
    while start < n {
        let i = chunks.len();
        let ctx = PlanCtx {
            dim: d,
            framing: opts.framing,
            sections: &sections,
        };
        let c = plan_chunk(
            &ctx,
            row_slice(start),
            i,
            start,
            opts.compression_of(i)?,
            opts.metadata_of(i)?,
        )?;
        chunks.push(c);
        start += cs;
    }
    check_counts(opts, chunks.len())?;
    let mut header = CvcHeader {
        framing: opts.framing,
        version: (layout::V1_MAJOR, layout::V1_MINOR),
        num_vectors: n,
        dimension: d,
        compression: file_level_compression(opts, &chunks),
        chunks,
        mmap_optimized: opts.mmap_optimized,
        sections,
        header_crc: !opts.reference_exact && opts.framing == Framing::V1,
    };
    let payload_lens: Vec<u64> = header
        .chunks
        .iter()
        .map(|c| c.payload_len(d).unwrap_or(u64::MAX))
        .collect();
    let (json, region) = if opts.mmap_optimized {
        assign_offsets(&mut header, &payload_lens)?
    } else {
        (header.to_json()?, 0)
    };
    // Pass 2: encode and write each chunk at its offset (known from the header).
    let prefix = file_prefix(opts.framing, &json)?;
    sink.put(0, &prefix)?;
    // The header region is padded even when no chunk follows (as the reference does).
    let mut pos = (prefix.len() as u64).max(region);
    let mut start = 0u64;
    for c in &header.chunks {
        if let Some(off) = c.file_offset {
            pos = off; // padding between frames is zeros (a hole, or zero-filled)
        }
        pos += write_chunk_at(sink, pos, row_slice(start), c, opts.framing)?;
        start += c.rows;
        if let Some(p) = &opts.progress {
            p(start, n);
        }
    }
    sink.finish(pos)?;
    Ok(PackSummary {
        bytes: pos,
        rows: n,
        chunks: header.chunks.len(),
        header_len: json.len() as u64,
    })
}

pub(super) fn check_counts(opts: &PackOptions, chunks: usize) -> Result<(), FormatError> {
    if let Some(m) = &opts.chunk_metadata {
        if m.len() != chunks {
            return Err(arg(
                "chunk_metadata",
                format!("must have {chunks} items (one per chunk), has {}", m.len()),
            ));
        }
    }
    if let Some(c) = &opts.chunk_compression {
        if c.len() != chunks {
            return Err(arg(
                "chunk_compression",
                format!("must have {chunks} items (one per chunk), has {}", c.len()),
            ));
        }
    }
    Ok(())
}

/// Pack `values` (`rows x dim`, row-major f32) into a CVC file at `path`, atomically.
///
/// # Errors
/// [`FormatError::InvalidArgument`] for inconsistent options or shapes,
/// [`FormatError::Codec`] for non-finite values in an int8 chunk, I/O errors. On error
/// no file is left at `path` (an existing file there is untouched).
pub fn pack(
    path: impl AsRef<Path>,
    values: &[f32],
    dim: usize,
    opts: &PackOptions,
) -> Result<PackSummary, FormatError> {
    let f = AtomicFile::create(path.as_ref())?;
    let sink = FileSink {
        file: f.file(),
        name: path.as_ref().display().to_string(),
    };
    let summary = write_file(&sink, values, dim, opts)?;
    f.commit_with(opts.sync)?;
    Ok(summary)
}

/// Pack into memory (same bytes as [`pack`] writes).
///
/// # Errors
/// As [`pack`], without the I/O.
pub fn pack_to_vec(values: &[f32], dim: usize, opts: &PackOptions) -> Result<Vec<u8>, FormatError> {
    let sink = MemSink(std::sync::Mutex::new(Vec::new()));
    write_file(&sink, values, dim, opts)?;
    Ok(sink
        .0
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cvc::CvcReader;

    #[test]
    fn empty_mmap_optimized_file_pads_its_header_page_like_the_reference() {
        let opts = PackOptions {
            mmap_optimized: true,
            ..PackOptions::default()
        };
        let bytes = pack_to_vec(&[], 3, &opts).unwrap();
        assert_eq!(bytes.len() as u64, layout::PAGE);
        let r = CvcReader::from_source(bytes.clone(), "empty").unwrap();
        assert_eq!(r.num_vectors(), 0);
        assert_eq!(r.load_all().unwrap().shape().dims(), &[0, 3]);
        // Padding that is not zero, or longer than the header page, is still rejected.
        let mut bad = bytes.clone();
        bad[4000] = 1;
        assert!(matches!(
            CvcReader::from_source(bad, "x"),
            Err(FormatError::TrailingBytes { .. })
        ));
        let mut long = bytes;
        long.extend_from_slice(&[0; 10]);
        assert!(matches!(
            CvcReader::from_source(long, "x"),
            Err(FormatError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn header_region_grows_past_one_page_without_touching_chunk_zero() {
        // ~300 chunks: the reference's in-place header rewrite corrupts chunk 0 here.
        let values: Vec<f32> = (0..300 * 2).map(|i| (i as f32).sin()).collect();
        let opts = PackOptions {
            compression: Compression::Int8,
            chunk_size: 1,
            mmap_optimized: true,
            ..PackOptions::default()
        };
        let bytes = pack_to_vec(&values, 2, &opts).unwrap();
        let r = CvcReader::from_source(bytes, "many").unwrap();
        assert!(r.chunks()[0].frame_offset >= 2 * layout::PAGE);
        assert!(r
            .chunks()
            .iter()
            .all(|c| c.frame_offset % layout::PAGE == 0));
        let back = r.load_all().unwrap();
        for (a, b) in values.iter().zip(back.as_slice::<f32>().unwrap()) {
            assert!((a - b).abs() < 1e-2);
        }
    }
}
