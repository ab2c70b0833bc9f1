//! Aux data compression: none, LZ4 (block format) or Zstd, each compressed payload
//! prefixed with its big-endian u64 uncompressed length.

use super::error::CgebError;
use super::layout::AUX_LEN_PREFIX;

/// How aux data is stored (flag bits 1-2 of a record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    /// Stored as is (code 0).
    #[default]
    None,
    /// LZ4 block format after a u64 BE uncompressed length (code 1).
    Lz4,
    /// Zstd frame (level 3) after a u64 BE uncompressed length (code 2).
    Zstd,
}

impl CompressionType {
    /// The code stored in flag bits 1-2.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            CompressionType::None => 0,
            CompressionType::Lz4 => 1,
            CompressionType::Zstd => 2,
        }
    }

    /// The type for a stored code, `None` for a code v1 does not define.
    #[must_use]
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Lz4),
            2 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// A short name (`none`, `lz4`, `zstd`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }
}

/// Zstd level used for aux data.
const ZSTD_LEVEL: i32 = 3;
/// LZ4 cannot expand more than this (255:1 for a run of one byte), plus slack.
const LZ4_MAX_RATIO: u64 = 256;

/// The stored form of `raw`.
pub(crate) fn compress(raw: &[u8], c: CompressionType) -> Vec<u8> {
    let body = match c {
        CompressionType::None => return raw.to_vec(),
        CompressionType::Lz4 => lz4_flex::block::compress(raw),
        // Compressing a byte slice in memory cannot fail; an empty frame is a safe fallback.
        CompressionType::Zstd => zstd::bulk::compress(raw, ZSTD_LEVEL).unwrap_or_default(),
    };
    let mut out = Vec::with_capacity(AUX_LEN_PREFIX + body.len());
    out.extend_from_slice(&(raw.len() as u64).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decompress stored aux data found at file/buffer offset `offset`, allocating at most
/// `limit` bytes (and, for LZ4, at most what the stored size can expand to).
pub(crate) fn decompress(
    stored: &[u8],
    c: CompressionType,
    limit: u64,
    offset: u64,
) -> Result<Vec<u8>, CgebError> {
    let bad = |reason: String| CgebError::AuxCorrupt { offset, reason };
    if c == CompressionType::None {
        return Ok(stored.to_vec());
    }
    let Some((prefix, body)) = stored.split_first_chunk::<AUX_LEN_PREFIX>() else {
        return Err(bad(format!(
            "{} stored bytes cannot hold the 8-byte uncompressed length",
            stored.len()
        )));
    };
    let declared = u64::from_be_bytes(*prefix);
    if declared > limit {
        return Err(bad(format!(
            "declared uncompressed length {declared} is above the limit {limit}"
        )));
    }
    if c == CompressionType::Lz4 && declared > (body.len() as u64 + 1) * LZ4_MAX_RATIO {
        return Err(bad(format!(
            "declared uncompressed length {declared} is more than LZ4 can expand {} bytes to",
            body.len()
        )));
    }
    let Ok(declared) = usize::try_from(declared) else {
        return Err(bad("declared length does not fit in memory".into()));
    };
    let mut out = vec![0u8; declared];
    let got = match c {
        CompressionType::Lz4 => lz4_flex::block::decompress_into(body, &mut out)
            .map_err(|e| bad(format!("LZ4: {e}")))?,
        _ => zstd::bulk::decompress_to_buffer(body, &mut out[..])
            .map_err(|e| bad(format!("Zstd: {e}")))?,
    };
    if got != declared {
        return Err(bad(format!(
            "decompressed to {got} bytes, the prefix declares {declared}"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i % 97) as u8).collect();
        for c in [
            CompressionType::None,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            let s = compress(&raw, c);
            assert_eq!(decompress(&s, c, 1 << 20, 0).unwrap(), raw);
            if c != CompressionType::None {
                assert!(s.len() < raw.len());
                assert!(matches!(
                    decompress(&s, c, 100, 7),
                    Err(CgebError::AuxCorrupt { offset: 7, .. })
                ));
                let mut lie = s.clone();
                lie[..8].copy_from_slice(&5000u64.to_be_bytes());
                assert!(decompress(&lie, c, 1 << 20, 0).is_err());
            }
        }
        assert!(decompress(&[1, 2], CompressionType::Zstd, 10, 0).is_err());
    }
}
