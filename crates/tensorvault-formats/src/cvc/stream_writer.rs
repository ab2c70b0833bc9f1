//! The streaming CVC writer: rows in batches of any size, memory bounded by one chunk.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde_json::Value;
use tensorvault_core::atomic::AtomicFile;

use crate::cvc::compression::Compression;
use crate::cvc::header::{ChunkHeader, CvcHeader, Section};
use crate::cvc::layout;
use crate::cvc::sink::{pad_to, CountingWriter, FileSink};
use crate::cvc::writer::{
    arg, assign_offsets, check_counts, check_shape, file_level_compression, file_prefix,
    plan_chunk, resolve_sections, write_chunk_at, PackOptions, PackSummary, PlanCtx,
};
use crate::FormatError;

/// A streaming writer: rows arrive in batches of any size, memory stays at one chunk.
///
/// Chunk frames go to an anonymous spill file in the destination directory as they are
/// encoded; [`CvcWriter::finish`] writes the header (only then known) and appends the
/// frames (`copy_file_range` where the OS has it, except for page-aligned layouts), then
/// commits atomically. After any failed call the writer is poisoned: later calls fail,
/// so a file never silently lacks rows that were accepted. Output is
/// byte-identical to [`pack`] for the same rows and options.
pub struct CvcWriter {
    dest: AtomicFile,
    spill: File,
    dim: u64,
    opts: PackOptions,
    sections: Vec<Section>,
    pending: Vec<f32>,
    chunks: Vec<ChunkHeader>,
    frame_lens: Vec<u64>,
    spill_len: u64,
    rows: u64,
    /// Values per full chunk (`chunk_size * dim`, checked at creation).
    chunk_values: usize,
    /// Set by the first failed call: rows already accepted may be lost, so every later
    /// call fails too instead of silently writing a file without them.
    failed: bool,
}

impl std::fmt::Debug for CvcWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CvcWriter")
            .field("dest", &self.dest.dest())
            .field("rows", &self.rows)
            .field("chunks", &self.chunks.len())
            .finish_non_exhaustive()
    }
}

impl CvcWriter {
    /// Start writing a collection of `dim`-dimensional vectors to `path`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for bad options, I/O errors creating the files.
    pub fn create(
        path: impl AsRef<Path>,
        dim: usize,
        opts: PackOptions,
    ) -> Result<Self, FormatError> {
        opts.check()?;
        if dim == 0 {
            return Err(arg("dimension", "must be at least 1"));
        }
        let dest = AtomicFile::create(path.as_ref())?;
        let dir = dest
            .temp_path()
            .parent()
            .map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
        let spill = tempfile::tempfile_in(&dir)
            .map_err(FormatError::io("create spill file in", dir.display()))?;
        let chunk_values = opts
            .chunk_size
            .checked_mul(dim as u64)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| {
                arg(
                    "chunk_size",
                    format!("{} rows of {dim} values overflow", opts.chunk_size),
                )
            })?;
        let sections = resolve_sections(opts.sections.as_deref(), None)?;
        Ok(CvcWriter {
            dest,
            spill,
            dim: dim as u64,
            opts,
            sections,
            pending: Vec::new(),
            chunks: Vec::new(),
            frame_lens: Vec::new(),
            spill_len: 0,
            rows: 0,
            chunk_values,
            failed: false,
        })
    }

    /// Rows accepted so far.
    #[must_use]
    pub fn rows(&self) -> u64 {
        self.rows + self.pending.len() as u64 / self.dim
    }

    /// Append rows (`k x dim` values). Full chunks of `chunk_size` rows are encoded and
    /// spilled as they fill.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] if `values` is not whole rows; codec and I/O errors.
    pub fn write_rows(&mut self, values: &[f32]) -> Result<(), FormatError> {
        // A batch that is not whole rows is refused before any state changes: no poison.
        check_shape(values, self.dim as usize)?;
        self.guarded(|w| w.write_rows_inner(values))
    }

    /// Run `f` unless an earlier call failed; a failure now poisons the writer.
    fn guarded(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        if self.failed {
            return Err(arg(
                "writer",
                "an earlier call failed and buffered rows may be lost; this file is abandoned",
            ));
        }
        let res = f(self);
        self.failed = res.is_err();
        res
    }

    fn write_rows_inner(&mut self, mut values: &[f32]) -> Result<(), FormatError> {
        let chunk_values = self.chunk_values;
        while !values.is_empty() {
            if self.pending.is_empty() && values.len() >= chunk_values {
                let (head, tail) = values.split_at(chunk_values);
                self.emit(head, None, None)?;
                values = tail;
                continue;
            }
            let take = (chunk_values - self.pending.len()).min(values.len());
            self.pending.extend_from_slice(&values[..take]);
            values = &values[take..];
            if self.pending.len() == chunk_values {
                let full = std::mem::take(&mut self.pending);
                self.emit(&full, None, None)?;
                self.pending = full;
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// Write `values` as one chunk of its own, with an optional compression and metadata
    /// overriding the options (rows buffered by [`CvcWriter::write_rows`] are flushed
    /// first as a shorter chunk).
    ///
    /// # Errors
    /// As [`CvcWriter::write_rows`].
    pub fn write_chunk(
        &mut self,
        values: &[f32],
        compression: Option<Compression>,
        metadata: Option<Value>,
    ) -> Result<(), FormatError> {
        check_shape(values, self.dim as usize)?;
        self.guarded(|w| {
            w.flush_pending()?;
            w.emit(values, compression, metadata)
        })
    }

    fn flush_pending(&mut self) -> Result<(), FormatError> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest, None, None)?;
        }
        Ok(())
    }

    fn emit(
        &mut self,
        values: &[f32],
        compression: Option<Compression>,
        metadata: Option<Value>,
    ) -> Result<(), FormatError> {
        if values.is_empty() {
            return Ok(());
        }
        let i = self.chunks.len();
        let compression = match compression {
            Some(c) => c,
            None => self.opts.compression_of(i)?,
        };
        let metadata = match metadata {
            Some(m) => Some(m),
            None => self.opts.metadata_of(i)?,
        };
        let ctx = PlanCtx {
            dim: self.dim,
            framing: self.opts.framing,
            sections: &self.sections,
        };
        let c = plan_chunk(&ctx, values, i, self.rows, compression, metadata)?;
        let sink = FileSink {
            file: &self.spill,
            name: format!("spill file for {}", self.dest.dest().display()),
        };
        let frame_len = write_chunk_at(&sink, self.spill_len, values, &c, self.opts.framing)?;
        self.spill_len += frame_len;
        self.frame_lens.push(frame_len);
        self.rows += c.rows;
        self.chunks.push(c);
        if let Some(p) = &self.opts.progress {
            p(self.rows, self.rows);
        }
        Ok(())
    }

    /// Write the header, append the frames and commit the file atomically.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] if the sections or per-chunk option lists do not
    /// match what was written; I/O errors. On error nothing is left at the destination.
    pub fn finish(mut self) -> Result<PackSummary, FormatError> {
        self.guarded(Self::flush_pending)?;
        let n = self.rows;
        resolve_sections(self.opts.sections.as_deref(), Some(n))?;
        check_counts(&self.opts, self.chunks.len())?;
        let chunks = std::mem::take(&mut self.chunks);
        let mut header = CvcHeader {
            framing: self.opts.framing,
            version: (layout::V1_MAJOR, layout::V1_MINOR),
            num_vectors: n,
            dimension: self.dim,
            compression: file_level_compression(&self.opts, &chunks),
            chunks,
            mmap_optimized: self.opts.mmap_optimized,
            sections: std::mem::take(&mut self.sections),
            header_crc: !self.opts.reference_exact && self.opts.framing == crate::cvc::Framing::V1,
        };
        let prefix = self.opts.framing.frame_prefix();
        let payload_lens: Vec<u64> = self.frame_lens.iter().map(|l| l - prefix).collect();
        let (json, region) = if self.opts.mmap_optimized {
            assign_offsets(&mut header, &payload_lens)?
        } else {
            (header.to_json()?, 0)
        };
        let dest_name = self.dest.dest().display().to_string();
        let io_err = |op| FormatError::io(op, dest_name.clone());
        let mut out = CountingWriter {
            inner: self.dest.file(),
            pos: 0,
        };
        out.write_all(&file_prefix(self.opts.framing, &json)?)
            .map_err(io_err("write"))?;
        pad_to(&mut out, region)?;
        self.spill
            .seek(SeekFrom::Start(0))
            .map_err(io_err("rewind spill file for"))?;
        if self.opts.mmap_optimized {
            for (c, &len) in header.chunks.iter().zip(&self.frame_lens) {
                pad_to(&mut out, c.file_offset.expect("assigned above"))?;
                let copied = io::copy(&mut (&self.spill).take(len), &mut out)
                    .map_err(io_err("copy frames to"))?;
                if copied != len {
                    return Err(FormatError::Io {
                        op: "copy frames to",
                        path: dest_name.clone(),
                        source: io::ErrorKind::UnexpectedEof.into(),
                    });
                }
            }
        } else {
            // Exactly the frames written (File to File: `copy_file_range` on Linux).
            let mut frames = (&self.spill).take(self.spill_len);
            let copied =
                io::copy(&mut frames, &mut self.dest.file()).map_err(io_err("copy frames to"))?;
            out.pos += copied;
        }
        let bytes = out.pos;
        self.dest.commit_with(self.opts.sync)?;
        Ok(PackSummary {
            bytes,
            rows: n,
            chunks: header.chunks.len(),
            header_len: json.len() as u64,
        })
    }
}
