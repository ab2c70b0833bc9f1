//! Digests of weights files: the whole-file SHA-256 and per-chunk BLAKE3 digests.
//!
//! SHA-256 is sequential within one message, so a whole-file digest runs on one core
//! (~1.7 GB/s with SHA-NI on a quiet core of the bench machine). The chunk digests are
//! independent, so they are hashed on all cores (rayon), and they use BLAKE3 (a
//! cryptographic hash, 256-bit, SIMD within each chunk: about twice SHA-NI's speed per
//! core), which is what lets a verified load keep up with an unverified read.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::{RegistryError, Result};

/// Chunk size of the per-chunk digests the registry records.
pub const CHUNK_BYTES: u64 = 4 << 20;
/// Smallest chunk size a metadata file may declare.
pub const MIN_CHUNK_BYTES: u64 = 64 << 10;
/// Largest chunk size a metadata file may declare.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Per-chunk BLAKE3 digests of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkDigests {
    /// Chunk size; the last chunk is shorter.
    pub chunk_bytes: u64,
    /// BLAKE3 (64 lowercase hex digits) of each chunk, in file order.
    pub blake3: Vec<String>,
}

/// Digests of one file of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// File name inside the version directory (a plain name: see [`crate::model::validate_file_name`]).
    pub path: String,
    /// Length in bytes.
    pub bytes: u64,
    /// `sha256:<hex>` of the whole file.
    pub sha256: String,
    /// BLAKE3 digests of the file's chunks (absent: only the whole-file digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunkDigests>,
}

impl ChunkDigests {
    /// Whether these digests can describe a `len`-byte file: a chunk size within
    /// [`MIN_CHUNK_BYTES`]..=[`MAX_CHUNK_BYTES`], one digest per chunk, all 64 hex digits.
    #[must_use]
    pub fn fits(&self, len: u64) -> bool {
        (MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&self.chunk_bytes)
            && self.blake3.len() as u64 == len.div_ceil(self.chunk_bytes)
            && self
                .blake3
                .iter()
                .all(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }
}

/// SHA-256 of `bytes`, 64 lowercase hex digits.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    tensorvault_core::checksum::hex(&sha2::Sha256::digest(bytes))
}

/// BLAKE3 of `bytes`, 64 lowercase hex digits.
#[must_use]
pub fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// `(sha256:<whole-file hex>, chunk digests)` of `bytes`, the chunks hashed on all cores
/// while one core hashes the whole.
#[must_use]
pub fn digest_all(bytes: &[u8]) -> (String, ChunkDigests) {
    digest_all_reporting(bytes, &|_| {})
}

/// [`digest_all`], calling `hashed(n)` with the bytes of the whole-file SHA-256 done so far
/// after every [`CHUNK_BYTES`] (the sequential hash is the slow side: the chunk digests run
/// on the other cores at the same time), and once with `bytes.len()` at the end.
#[must_use]
pub fn digest_all_reporting(bytes: &[u8], hashed: &(dyn Fn(u64) + Sync)) -> (String, ChunkDigests) {
    let (whole, chunks) = rayon::join(
        || {
            let mut h = sha2::Sha256::new();
            let mut done = 0u64;
            for part in bytes.chunks(CHUNK_BYTES as usize) {
                h.update(part);
                done += part.len() as u64;
                hashed(done);
            }
            if bytes.is_empty() {
                hashed(0);
            }
            tensorvault_core::checksum::hex(&h.finalize())
        },
        || {
            bytes
                .par_chunks(CHUNK_BYTES as usize)
                .map(blake3_hex)
                .collect::<Vec<_>>()
        },
    );
    (
        format!("{CHECKSUM_PREFIX}{whole}"),
        ChunkDigests {
            chunk_bytes: CHUNK_BYTES,
            blake3: chunks,
        },
    )
}

/// Checks every chunk of the mapped file `path` against `d`, on all cores. Each thread
/// asks the kernel to populate its chunk's pages in one call (`MADV_POPULATE_READ`, which
/// reads them from disk if needed) before hashing, instead of faulting them in page by
/// page; the tensors are then views of those same pages.
///
/// # Errors
/// [`RegistryError::ChunkChecksumMismatch`] naming a damaged chunk's byte range;
/// [`RegistryError::ChecksumMismatch`] when the digests do not fit the file's length.
pub fn verify_chunks(path: &Path, map: &memmap2::Mmap, d: &ChunkDigests) -> Result<()> {
    if !d.fits(map.len() as u64) {
        return Err(RegistryError::ChecksumMismatch {
            path: path.to_owned(),
            expected: format!(
                "{} chunk digests of {} bytes",
                d.blake3.len(),
                d.chunk_bytes
            ),
            computed: format!("(a {}-byte file)", map.len()),
        });
    }
    let n = d.chunk_bytes as usize;
    map.par_chunks(n)
        .zip(d.blake3.par_iter())
        .enumerate()
        .try_for_each(|(i, (chunk, expected))| {
            // Advice only: an older kernel without MADV_POPULATE_READ faults pages in.
            let _ = map.advise_range(memmap2::Advice::PopulateRead, i * n, chunk.len());
            let computed = blake3_hex(chunk);
            if computed.eq_ignore_ascii_case(expected) {
                Ok(())
            } else {
                let offset = (i * n) as u64;
                Err(RegistryError::ChunkChecksumMismatch {
                    path: path.to_owned(),
                    offset,
                    end: offset + chunk.len() as u64,
                    expected: expected.clone(),
                    computed,
                })
            }
        })
}

/// Checks the whole-file digest (`sha256:<hex>`) of `bytes` (the file `path`).
///
/// # Errors
/// [`RegistryError::BadChecksumFormat`], [`RegistryError::ChecksumMismatch`].
pub fn verify_whole(path: &Path, bytes: &[u8], expected: &str) -> Result<()> {
    check_checksum_format(expected)?;
    let computed = format!("{CHECKSUM_PREFIX}{}", sha256_hex(bytes));
    if computed.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(RegistryError::ChecksumMismatch {
            path: path.to_owned(),
            expected: expected.to_owned(),
            computed,
        })
    }
}

/// Prefix of the `checksum` field.
pub const CHECKSUM_PREFIX: &str = "sha256:";

/// `expected` must be `sha256:` and 64 hex digits.
pub(crate) fn check_checksum_format(expected: &str) -> Result<()> {
    match expected.strip_prefix(CHECKSUM_PREFIX) {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(()),
        _ => Err(RegistryError::BadChecksumFormat {
            found: expected.to_owned(),
        }),
    }
}
