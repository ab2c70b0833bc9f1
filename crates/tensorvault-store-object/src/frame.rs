//! The trailer every object of a collection ends with (docs/formats/store-object.md):
//! `body || body_len u64 LE || crc32c(body) u32 LE || "TVO1"`. Reading an object checks
//! the magic, the length and the CRC32C before anything else looks at the body.

use tensorvault_core::checksum::crc32c;

use crate::error::{OResult, ObjectErr};

/// Trailer magic.
pub const MAGIC: [u8; 4] = *b"TVO1";
/// u64 body length, at the trailer's start.
const T_LEN: usize = 0;
/// u32 CRC32C of the body.
const T_CRC: usize = T_LEN + 8;
/// The magic.
const T_MAGIC: usize = T_CRC + 4;
/// Trailer length.
pub const TRAILER_LEN: usize = T_MAGIC + MAGIC.len();

/// Append the trailer to `body`.
pub fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let len = body.len() as u64;
    let crc = crc32c(&body);
    body.extend_from_slice(&len.to_le_bytes());
    body.extend_from_slice(&crc.to_le_bytes());
    body.extend_from_slice(&MAGIC);
    body
}

/// What a bad frame looks like: the stored CRC if the trailer was readable, and the CRC
/// of the bytes read.
#[derive(Debug, PartialEq, Eq)]
pub struct BadFrame {
    /// Why the frame is rejected.
    pub reason: String,
    /// The trailer's CRC32C (0 when the trailer is unreadable).
    pub expected: u32,
    /// CRC32C of the body bytes read (of everything read when the trailer is unreadable).
    pub actual: u32,
    /// Whether the trailer itself was sound and only the CRC differs.
    pub crc_only: bool,
}

/// Check a sealed object and return its body.
///
/// # Errors
/// [`BadFrame`] on a short object, bad magic, a length that disagrees with the object
/// size, or a CRC32C mismatch.
pub fn check(bytes: &[u8]) -> Result<&[u8], BadFrame> {
    let bad = |reason: String, expected, actual| BadFrame {
        reason,
        expected,
        actual,
        crc_only: false,
    };
    let Some(body_len) = bytes.len().checked_sub(TRAILER_LEN) else {
        return Err(bad(
            format!(
                "{} bytes, shorter than the {TRAILER_LEN}-byte trailer",
                bytes.len()
            ),
            0,
            crc32c(bytes),
        ));
    };
    let (body, t) = bytes.split_at(body_len);
    let u32_at = |o: usize| u32::from_le_bytes([t[o], t[o + 1], t[o + 2], t[o + 3]]);
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&t[T_LEN..T_CRC]);
    let stored_len = u64::from_le_bytes(len8);
    let stored_crc = u32_at(T_CRC);
    if t[T_MAGIC..] != MAGIC {
        return Err(bad("bad trailer magic".into(), stored_crc, crc32c(body)));
    }
    if stored_len != body_len as u64 {
        return Err(bad(
            format!("trailer says {stored_len} body bytes, object holds {body_len}"),
            stored_crc,
            crc32c(body),
        ));
    }
    let actual = crc32c(body);
    if actual != stored_crc {
        return Err(BadFrame {
            reason: "crc32c mismatch".into(),
            expected: stored_crc,
            actual,
            crc_only: true,
        });
    }
    Ok(body)
}

/// [`check`] with the error as an [`ObjectErr`] naming `path`.
///
/// # Errors
/// [`ObjectErr::Checksum`] for a CRC mismatch, [`ObjectErr::Malformed`] otherwise.
pub fn open<'a>(bytes: &'a [u8], path: &str) -> OResult<&'a [u8]> {
    check(bytes).map_err(|b| {
        if b.crc_only {
            ObjectErr::Checksum {
                path: path.to_owned(),
                expected: b.expected,
                actual: b.actual,
            }
        } else {
            ObjectErr::Malformed {
                path: path.to_owned(),
                reason: b.reason,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_damage_is_caught() {
        let sealed = seal(b"hello block".to_vec());
        assert_eq!(sealed.len(), 11 + TRAILER_LEN);
        assert_eq!(check(&sealed).unwrap(), b"hello block");
        let mut flip = sealed.clone();
        flip[3] ^= 0x40;
        let e = check(&flip).unwrap_err();
        assert!(e.crc_only);
        assert_ne!(e.expected, e.actual);
        assert!(!check(&sealed[..sealed.len() - 1]).unwrap_err().crc_only);
        assert!(!check(&sealed[1..]).unwrap_err().crc_only);
        assert!(check(&sealed[..5]).is_err());
        let mut magic = sealed.clone();
        let n = magic.len();
        magic[n - 1] = b'X';
        assert!(check(&magic).unwrap_err().reason.contains("magic"));
        assert!(matches!(
            open(&flip, "s3://b/k"),
            Err(ObjectErr::Checksum { .. })
        ));
        assert!(matches!(
            open(&sealed[..3], "s3://b/k"),
            Err(ObjectErr::Malformed { .. })
        ));
    }
}
