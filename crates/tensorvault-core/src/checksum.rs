//! Checksums, each a thin wrapper over a well-kept crate with a hardware path.
//!
//! | function | algorithm | used by |
//! |---|---|---|
//! | [`crc32c`] | CRC-32C (Castagnoli) | store MetaLog, block checksums |
//! | [`crc32`] | CRC-32 (IEEE 802.3, zlib's `crc32`) | CVC v1.0 chunks, MOBI |
//! | [`xxh3_64`] | XXH3 64-bit, seed 0 | CGEB content hash |
//! | [`sha256_hex`] | SHA-256, lower-case hex | registry checkpoints |

use sha2::Digest;

/// CRC-32C (Castagnoli) of `data`.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC-32C of `data`, continuing from a previous CRC (`crc32c(a ++ b) ==
/// crc32c_append(crc32c(a), b)`).
#[must_use]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// CRC-32 (IEEE polynomial, identical to zlib's `crc32` and Python's `zlib.crc32`).
#[must_use]
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Incremental CRC-32 (IEEE), for data that arrives in pieces.
pub type Crc32Hasher = crc32fast::Hasher;

/// XXH3 64-bit hash with seed 0.
#[must_use]
pub fn xxh3_64(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

/// Incremental XXH3-64, for data that arrives in pieces.
pub type Xxh3Hasher = xxhash_rust::xxh3::Xxh3;

/// SHA-256 of `data` as 64 lower-case hex digits.
#[must_use]
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&sha2::Sha256::digest(data))
}

/// Incremental SHA-256, for data that arrives in pieces.
pub type Sha256Hasher = sha2::Sha256;

/// Lower-case hex of a byte string.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Check values from the algorithms' specifications ("123456789").
    #[test]
    fn standard_check_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_append(crc32c(b"1234"), b"56789"), 0xE306_9283);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        let mut h = Xxh3Hasher::new();
        h.update(b"12345");
        h.update(b"6789");
        assert_eq!(h.digest(), xxh3_64(b"123456789"));
    }
}
