//! Encoding and decoding of the header and records (owned by the MetaLog work).

use super::MetaRecord;
use crate::config::CollectionConfig;
use crate::error::Result;

/// Encode the 128-byte header for `c` at `generation`.
#[must_use]
pub fn encode_header(c: &CollectionConfig, generation: u64) -> [u8; super::layout::RECORD_LEN] {
    let _ = (c, generation);
    todo!("metalog helper")
}

/// Decode and validate a header: returns the geometry and generation.
///
/// # Errors
/// [`crate::StoreErr::BadHeader`] naming the field and offset.
pub fn decode_header(b: &[u8]) -> Result<(CollectionConfig, u64)> {
    let _ = b;
    todo!("metalog helper")
}

/// Encode one record.
#[must_use]
pub fn encode_record(r: &MetaRecord) -> [u8; super::layout::RECORD_LEN] {
    let _ = r;
    todo!("metalog helper")
}

/// Decode one record found at byte `offset` of the log.
///
/// # Errors
/// [`crate::StoreErr::InvalidRecord`] with the offset and the reason.
pub fn decode_record(b: &[u8; super::layout::RECORD_LEN], offset: u64) -> Result<MetaRecord> {
    let _ = (b, offset);
    todo!("metalog helper")
}
