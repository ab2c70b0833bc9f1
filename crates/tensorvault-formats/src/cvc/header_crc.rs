//! The header checksum of the CVC v1.0 files tensorvault writes: an extra top-level JSON
//! key, `"tensorvault_header_crc32c"`, whose value is the CRC-32C (8 lowercase hex
//! digits) of the whole JSON header as stored, computed with those 8 digits set to
//! ASCII `0`. The reference package ignores the key (it reads the keys it knows), so the
//! files stay readable by it; the reference's own files carry no checksum, and a writer
//! option drops it to reproduce the reference's bytes exactly.
//!
//! The key sorts after every key the reference writes and the v1.0 header is written
//! with sorted keys and compact separators, so it is always the last member: a header
//! with a checksum ends with exactly [`SUFFIX_HEAD`] + 8 hex digits + `"}`.

use tensorvault_core::checksum::crc32c;

use crate::cvc::layout::FORMAT;
use crate::FormatError;

/// The JSON key.
pub const KEY: &str = "tensorvault_header_crc32c";
/// What precedes the digits at the end of a sealed header.
pub const SUFFIX_HEAD: &str = ",\"tensorvault_header_crc32c\":\"";
/// Hex digits of the checksum.
const DIGITS: usize = 8;
/// Bytes sealing adds to a header: the member and its value.
pub const SEAL_LEN: usize = SUFFIX_HEAD.len() + DIGITS + 1;

/// Add the checksum member to a compact v1.0 header (`{...}`).
///
/// # Errors
/// [`FormatError::InvalidArgument`] if `json` is not a non-empty compact object.
pub fn seal(json: &mut Vec<u8>) -> Result<(), FormatError> {
    if json.len() < 2 || json.last() != Some(&b'}') || json[json.len() - 2] == b'{' {
        return Err(FormatError::InvalidArgument {
            name: "header",
            reason: "only a non-empty JSON object can carry a header checksum".into(),
        });
    }
    json.pop();
    json.extend_from_slice(SUFFIX_HEAD.as_bytes());
    let digits_at = json.len();
    json.extend_from_slice(&[b'0'; DIGITS]);
    json.extend_from_slice(b"\"}");
    let crc = crc32c(json);
    json[digits_at..digits_at + DIGITS].copy_from_slice(format!("{crc:08x}").as_bytes());
    Ok(())
}

/// Check the checksum of a header that ends with one; `Ok(false)` if it has none.
/// `has_key` says whether the parsed header holds the key at all (a key that is present
/// but not the well-formed last member is refused). A v1.0 header written by the
/// reference ends with a number or an array (`num_vectors` or `sections` is its last
/// key), never with a string: a header ending in `"}` is taken as sealed, so a damaged
/// key name cannot turn the check off.
///
/// # Errors
/// [`FormatError::InvalidField`] for a misplaced or malformed checksum member,
/// [`FormatError::ChecksumMismatch`] when the header bytes do not match it.
pub fn verify(json: &[u8], json_offset: u64, has_key: bool) -> Result<bool, FormatError> {
    let tail = SEAL_LEN + 1; // the member and the closing brace
    let at = json.len().checked_sub(tail);
    let digits_at = at.map(|a| a + SUFFIX_HEAD.len());
    let well_formed = match (at, digits_at) {
        (Some(a), Some(d)) => {
            &json[a..d] == SUFFIX_HEAD.as_bytes()
                && json[d..d + DIGITS]
                    .iter()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                && &json[d + DIGITS..] == b"\"}"
        }
        _ => false,
    };
    if !well_formed {
        if has_key || json.ends_with(b"\"}") {
            return Err(FormatError::InvalidField {
                format: FORMAT,
                field: KEY.to_owned(),
                offset: json_offset,
                reason: "must be the header's last member: 8 lowercase hex digits".into(),
            });
        }
        return Ok(false);
    }
    let d = digits_at.unwrap_or(0);
    let text = std::str::from_utf8(&json[d..d + DIGITS]).unwrap_or("");
    let stored = u32::from_str_radix(text, 16).unwrap_or(0);
    let mut zeroed = json.to_vec();
    zeroed[d..d + DIGITS].copy_from_slice(&[b'0'; DIGITS]);
    let computed = crc32c(&zeroed);
    if stored != computed {
        return Err(FormatError::ChecksumMismatch {
            format: FORMAT,
            what: "JSON header (tensorvault_header_crc32c)".to_owned(),
            offset: json_offset,
            stored: stored.into(),
            computed: computed.into(),
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_headers_verify_and_every_flip_is_caught() {
        let mut j = br#"{"chunks":[{"compression":"int8","min":-1.5,"rows":3,"scale":0.01}],"num_vectors":3}"#.to_vec();
        let plain = j.clone();
        seal(&mut j).unwrap();
        assert_eq!(j.len(), plain.len() + SEAL_LEN);
        assert!(verify(&j, 8, true).unwrap());
        assert!(!verify(&plain, 8, false).unwrap());
        for i in 0..j.len() * 8 {
            let mut b = j.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(
                !matches!(verify(&b, 8, true), Ok(true)),
                "flip of bit {i} passed"
            );
        }
        assert!(seal(&mut b"{}".to_vec()).is_err());
    }
}
