//! Reading `meta.log` for replay: chunks of [`CHUNK`] bytes, holes of a sparse file
//! skipped, and (feature `threads`) a second thread that reads and decodes while the
//! caller applies.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::layout::RECORD_LEN;
use super::replayer::Replayer;
use super::MetaRecord;
use crate::error::{Result, StoreErr};

/// Replay reads this many bytes at a time (a multiple of the record length): 1 MiB, so a
/// 128 MB log takes 128 reads.
pub(super) const CHUNK: usize = 8192 * RECORD_LEN;

/// What the log holds from some offset on.
enum Piece<'a> {
    /// `count` all-zero records (a hole of a sparse file) at `pos`.
    Zeros { pos: u64, count: u64 },
    /// Bytes read at `pos` (whole records, but for a torn last one).
    Data { pos: u64, bytes: &'a [u8] },
}

/// Read the records after the header in chunks of [`CHUNK`] bytes, handing each piece to
/// `on` until it returns false. Holes of a sparse file are skipped as whole runs of zero
/// records: the work stays proportional to the bytes the file holds, not to the length it
/// claims.
fn read_pieces(
    file: &File,
    path: &Path,
    len: u64,
    on: &mut dyn FnMut(Piece<'_>) -> Result<bool>,
) -> Result<()> {
    let mut f = file;
    let mut pos = RECORD_LEN as u64;
    f.seek(SeekFrom::Start(pos))
        .map_err(|e| StoreErr::io("seek", path, e))?;
    let mut buf = vec![0u8; CHUNK];
    while pos < len {
        let data = next_data(file, pos, len);
        if data > pos {
            let count = (data - pos) / RECORD_LEN as u64;
            if !on(Piece::Zeros { pos, count })? {
                return Ok(());
            }
            pos += count * RECORD_LEN as u64;
            f.seek(SeekFrom::Start(pos))
                .map_err(|e| StoreErr::io("seek", path, e))?;
            continue;
        }
        // Bounded by CHUNK, so the cast is lossless.
        let n = (len - pos).min(CHUNK as u64) as usize;
        let chunk = &mut buf[..n];
        f.read_exact(chunk)
            .map_err(|e| StoreErr::io("read", path, e))?;
        if !on(Piece::Data { pos, bytes: chunk })? {
            return Ok(());
        }
        pos += n as u64;
    }
    Ok(())
}

/// Replay the log's records into `r` and `visit`, on this thread.
#[cfg(not(feature = "threads"))]
pub(super) fn replay_body(
    file: &File,
    path: &Path,
    len: u64,
    r: &mut Replayer,
    visit: &mut dyn FnMut(u64, MetaRecord) -> Result<()>,
) -> Result<()> {
    read_pieces(file, path, len, &mut |piece| {
        match piece {
            Piece::Zeros { pos, count } => r.feed_zeros(count, pos),
            Piece::Data { pos, bytes } => r.feed(bytes, pos, visit)?,
        }
        Ok(!r.stopped())
    })
}

/// Replay the log's records into `r` and `visit`: a second thread reads and decodes
/// (CRC check and field validation) while this one applies the records, in file order.
/// Decoded batches go back to the reader for reuse, so no batch is allocated per chunk.
#[cfg(feature = "threads")]
pub(super) fn replay_body(
    file: &File,
    path: &Path,
    len: u64,
    r: &mut Replayer,
    visit: &mut dyn FnMut(u64, MetaRecord) -> Result<()>,
) -> Result<()> {
    use std::sync::mpsc::{channel, sync_channel};

    use super::replayer::{decode_batch, Decoded};

    enum Msg {
        Zeros { pos: u64, count: u64 },
        Records { pos: u64, recs: Vec<Decoded> },
    }
    // Two batches in flight: one being applied, one ready.
    let (tx, rx) = sync_channel::<Result<Msg>>(2);
    let (free_tx, free_rx) = channel::<Vec<Decoded>>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let res = read_pieces(file, path, len, &mut |piece| {
                let msg = match piece {
                    Piece::Zeros { pos, count } => Msg::Zeros { pos, count },
                    Piece::Data { pos, bytes } => {
                        let mut recs = free_rx.try_recv().unwrap_or_default();
                        decode_batch(bytes, pos, &mut recs);
                        Msg::Records { pos, recs }
                    }
                };
                // The applier stopped (point-in-time stop or an error): stop reading.
                Ok(tx.send(Ok(msg)).is_ok())
            });
            if let Err(e) = res {
                let _ = tx.send(Err(e));
            }
        });
        for msg in rx {
            match msg? {
                Msg::Zeros { pos, count } => r.feed_zeros(count, pos),
                Msg::Records { pos, mut recs } => {
                    r.feed_decoded(recs.drain(..), pos, visit)?;
                    // The reader may have finished: then the batch is simply dropped.
                    let _ = free_tx.send(recs);
                }
            }
            if r.stopped() {
                break;
            }
        }
        // Dropping the receiver (end of this scope's loop) makes a still-running
        // reader's next send fail, so it stops; the scope then joins it.
        Ok(())
    })
}

/// The first offset at or after `pos` that holds data (`lseek(SEEK_DATA)`), or `len` if
/// the rest of the file is a hole. Where the filesystem cannot say, `pos` (read it all).
#[cfg(all(unix, feature = "mmap"))]
fn next_data(file: &File, pos: u64, len: u64) -> u64 {
    use std::os::fd::AsRawFd;
    let Ok(at) = libc::off_t::try_from(pos) else {
        return pos;
    };
    // SAFETY: lseek on an fd this File owns; it only moves the file offset, which the
    // caller resets with a seek before reading.
    let r = unsafe { libc::lseek(file.as_raw_fd(), at, libc::SEEK_DATA) };
    if r >= 0 {
        // r >= 0 was just checked.
        (r as u64).min(len)
    } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
        len
    } else {
        pos
    }
}

#[cfg(not(all(unix, feature = "mmap")))]
fn next_data(_file: &File, pos: u64, _len: u64) -> u64 {
    pos
}
