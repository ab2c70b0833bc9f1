//! Decoding planned row segments: pieces of about 1 MiB of payload run in file order on
//! the rayon pool while a read-ahead thread keeps storage a window ahead of them, so a
//! load of a file that is not in the page cache overlaps reading with decoding instead of
//! faulting (or reading) one small block at a time and then decoding.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use rayon::prelude::*;

use crate::cvc::reader::{CvcReader, PIECE_BYTES};
use crate::cvc::source::ReadAt;
use crate::FormatError;

/// Payload bytes requested from storage ahead of the first piece not yet started: enough
/// to keep a disk busy while the decoders, several times faster, catch up.
const LOOKAHEAD_BYTES: u64 = 64 << 20;

/// One unit of work before its output is assigned: rows of one chunk, decoded and/or
/// hashed (for the chunk's CRC-32).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spec {
    pub(super) chunk: usize,
    pub(super) rows: Range<u64>,
    pub(super) decode: bool,
    pub(super) hash: bool,
}

/// A [`Spec`] with its share of the output buffer.
struct Piece<'o> {
    chunk: usize,
    rows: Range<u64>,
    out: Option<&'o mut [f32]>,
    hash: bool,
}

/// Keeps storage reading ahead of the decoders: advises the byte ranges of the pieces, in
/// order, while they are less than [`LOOKAHEAD_BYTES`] ahead of the first piece not yet
/// started.
struct Readahead {
    ranges: Vec<(u64, u64)>,
    /// `cum[k]`: payload bytes of pieces `0..k`.
    cum: Vec<u64>,
    /// Pieces started so far, or [`STOP`].
    started: Mutex<usize>,
    wake: Condvar,
}

const STOP: usize = usize::MAX;

impl Readahead {
    fn new(ranges: Vec<(u64, u64)>) -> Self {
        let mut cum = Vec::with_capacity(ranges.len() + 1);
        let mut acc = 0u64;
        cum.push(0);
        for (_, len) in &ranges {
            acc += len;
            cum.push(acc);
        }
        Readahead {
            ranges,
            cum,
            started: Mutex::new(0),
            wake: Condvar::new(),
        }
    }

    /// A decoder starts the piece with global index `k`.
    fn start(&self, k: usize) {
        let mut g = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if *g != STOP && k + 1 > *g {
            *g = k + 1;
            self.wake.notify_one();
        }
    }

    fn stop(&self) {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner) = STOP;
        self.wake.notify_one();
    }

    /// The read-ahead thread: advise pieces `next..` as the decoders advance.
    fn run<S: ReadAt>(&self, src: &S, mut next: usize) {
        let n = self.ranges.len();
        while next < n {
            {
                let mut g = self.started.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if *g == STOP {
                        return;
                    }
                    if self.cum[next] < self.cum[(*g).min(n)] + LOOKAHEAD_BYTES {
                        break;
                    }
                    g = self.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
                }
            }
            let (off, len) = self.ranges[next];
            if !src.will_need(off, len) {
                return;
            }
            next += 1;
        }
    }
}

/// Stops the read-ahead thread when the load ends, whichever way it ends.
struct StopOnDrop<'a>(&'a Readahead);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl<S: ReadAt> CvcReader<S> {
    /// Split `(chunk, rows)` segments (already validated) into pieces of about
    /// [`PIECE_BYTES`], grouped into batches of at most `batch_values` decoded values
    /// (at least one row). With checksums on, every chunk touched is hashed in full exactly
    /// once: fused with decoding where a segment covers the whole chunk, else by hash-only
    /// pieces in a last batch that decodes nothing.
    pub(super) fn plan(&self, segs: &[(usize, Range<u64>)], batch_values: u64) -> Vec<Vec<Spec>> {
        let dim = self.header().dimension;
        let chunks = self.chunks();
        let batch_values = batch_values.max(dim).max(1);
        let mut hashed = vec![false; chunks.len()];
        let mut touched = vec![false; chunks.len()];
        let mut batches = Vec::new();
        let mut cur = Vec::new();
        let mut cur_values = 0u64;
        for (ci, rows) in segs {
            let c = &chunks[*ci];
            touched[*ci] = true;
            let full = rows.start == 0 && rows.end == c.rows;
            let hash = self.verifies_checksums() && c.crc.is_some() && full && !hashed[*ci];
            hashed[*ci] |= hash;
            let step = piece_rows(dim, c.codec.compression());
            let mut r = rows.start;
            while r < rows.end {
                let mut hi = (r + step).min(rows.end);
                // Rows that still fit the batch (none to limit when rows are empty).
                if let Some(room) = (batch_values - cur_values).checked_div(dim) {
                    if room == 0 {
                        batches.push(std::mem::take(&mut cur));
                        cur_values = 0;
                        continue;
                    }
                    hi = hi.min(r.saturating_add(room));
                }
                cur.push(Spec {
                    chunk: *ci,
                    rows: r..hi,
                    decode: true,
                    hash,
                });
                cur_values += (hi - r) * dim;
                r = hi;
            }
        }
        if !cur.is_empty() {
            batches.push(cur);
        }
        if self.verifies_checksums() {
            let mut tail = Vec::new();
            for c in chunks {
                if c.crc.is_some() && touched[c.index] && !hashed[c.index] {
                    let step = piece_rows(dim, c.codec.compression());
                    let mut r = 0;
                    while r < c.rows {
                        let hi = (r + step).min(c.rows);
                        tail.push(Spec {
                            chunk: c.index,
                            rows: r..hi,
                            decode: false,
                            hash: true,
                        });
                        r = hi;
                    }
                }
            }
            if !tail.is_empty() {
                batches.push(tail);
            }
        }
        batches
    }

    /// Payload bytes `(offset, len)` of a spec.
    fn spec_range(&self, s: &Spec) -> (u64, u64) {
        let c = &self.chunks()[s.chunk];
        // Validated when the table was built: every chunk's payload is rows x row bytes.
        let row_bytes = c.payload_len / c.rows.max(1);
        (
            c.payload_offset + s.rows.start * row_bytes,
            (s.rows.end - s.rows.start) * row_bytes,
        )
    }

    /// Run planned batches in order: decode each batch into the front of `buf` (large
    /// enough for the largest batch), check the CRC of every chunk whose last hashed piece
    /// is done, then hand the batch's values to `sink`. A corrupt chunk is reported before
    /// the batch holding its last rows reaches `sink` (earlier batches may hold its first
    /// rows).
    pub(super) fn run_plan<E: From<FormatError>>(
        &self,
        batches: &[Vec<Spec>],
        buf: &mut [f32],
        sink: &mut dyn FnMut(&[f32]) -> Result<(), E>,
    ) -> Result<(), E> {
        let dim = self.header().dimension;
        let nchunks = self.chunks().len();
        let ranges: Vec<(u64, u64)> = batches
            .iter()
            .flatten()
            .map(|s| self.spec_range(s))
            .collect();
        let total: u64 = ranges.iter().map(|r| r.1).sum();
        let mut pending = vec![0usize; nchunks];
        for s in batches.iter().flatten().filter(|s| s.hash) {
            pending[s.chunk] += 1;
        }
        let mut hashers: Vec<Option<crc32fast::Hasher>> = vec![None; nchunks];
        let ra = Readahead::new(ranges);
        std::thread::scope(|scope| {
            // A source with storage behind it answers the first hint with `true`; small
            // loads are left to the kernel's own readahead.
            let ahead = total > 2 * PIECE_BYTES
                && ra
                    .ranges
                    .first()
                    .is_some_and(|&(off, len)| self.source().will_need(off, len));
            if ahead {
                scope.spawn(|| ra.run(self.source(), 1));
            }
            let _stop = StopOnDrop(&ra);
            let mut base = 0;
            for batch in batches {
                let values = batch
                    .iter()
                    .filter(|s| s.decode)
                    .map(|s| ((s.rows.end - s.rows.start) * dim) as usize)
                    .sum::<usize>();
                let out = &mut buf[..values];
                let results = self.run_batch(batch, base, out, ahead.then_some(&ra))?;
                for (c, h) in results {
                    let Some(h) = h else { continue };
                    match &mut hashers[c] {
                        Some(acc) => acc.combine(&h),
                        slot @ None => *slot = Some(h),
                    }
                    pending[c] -= 1;
                    if pending[c] == 0 {
                        let h = hashers[c].take().expect("a hasher was just stored");
                        self.check_crc(&self.chunks()[c], h.finalize())?;
                    }
                }
                sink(&buf[..values])?;
                base += batch.len();
            }
            Ok(())
        })
    }

    /// Decode one batch's pieces in parallel, claimed in file order; returns each piece's
    /// `(chunk, hasher)` in the batch's order.
    fn run_batch(
        &self,
        specs: &[Spec],
        base: usize,
        out: &mut [f32],
        ra: Option<&Readahead>,
    ) -> Result<Vec<(usize, Option<crc32fast::Hasher>)>, FormatError> {
        let dim = self.header().dimension;
        let mut rest = out;
        let slots: Vec<Mutex<Option<Piece<'_>>>> = specs
            .iter()
            .map(|s| {
                let out = s.decode.then(|| {
                    let n = ((s.rows.end - s.rows.start) * dim) as usize;
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
                    rest = tail;
                    head
                });
                Mutex::new(Some(Piece {
                    chunk: s.chunk,
                    rows: s.rows.clone(),
                    out,
                    hash: s.hash,
                }))
            })
            .collect();
        let n = slots.len();
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let workers = rayon::current_num_threads().clamp(1, n.max(1));
        type Done = Vec<(usize, usize, Option<crc32fast::Hasher>)>;
        let parts: Vec<Result<Done, FormatError>> = (0..workers)
            .into_par_iter()
            .map(|_| {
                let mut buf = Vec::new();
                let mut done = Vec::new();
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    if let Some(ra) = ra {
                        ra.start(base + i);
                    }
                    let taken = slots[i]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take();
                    let Some(p) = taken else { continue };
                    match self.run_piece(p, &mut buf) {
                        Ok((c, h)) => done.push((i, c, h)),
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                }
                Ok(done)
            })
            .collect();
        let mut all = Vec::with_capacity(n);
        for p in parts {
            all.extend(p?);
        }
        all.sort_unstable_by_key(|d| d.0);
        Ok(all.into_iter().map(|(_, c, h)| (c, h)).collect())
    }

    fn run_piece(
        &self,
        p: Piece<'_>,
        buf: &mut Vec<u8>,
    ) -> Result<(usize, Option<crc32fast::Hasher>), FormatError> {
        let (offset, n) = self.spec_range(&Spec {
            chunk: p.chunk,
            rows: p.rows,
            decode: false,
            hash: false,
        });
        let bytes = self.bytes_at(offset, n, buf)?;
        let hasher = p.hash.then(|| {
            let mut h = crc32fast::Hasher::new();
            h.update(bytes);
            h
        });
        if let Some(out) = p.out {
            let codec = &self.chunks()[p.chunk].codec;
            self.backend().decode(codec, bytes, out)?;
        }
        Ok((p.chunk, hasher))
    }
}

/// Rows per piece: about [`PIECE_BYTES`] of payload, at least one row.
fn piece_rows(dim: u64, compression: crate::cvc::compression::Compression) -> u64 {
    (PIECE_BYTES / compression.row_bytes(dim).unwrap_or(u64::MAX).max(1)).max(1)
}
