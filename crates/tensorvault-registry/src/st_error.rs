//! Safetensors parser errors as [`RegistryError::Safetensors`], with the field and byte
//! offset of what the parser refused (the `safetensors` crate reports only a kind).
//!
//! Layout of a safetensors file: a u64 LE header length `n` at offset 0, `n` bytes of JSON
//! header at offset 8, then the data section at `8 + n`, which the tensors' `data_offsets`
//! must cover exactly.

use std::path::Path;

use safetensors::SafeTensorError;

use crate::error::RegistryError;

/// Offset of the JSON header (after the u64 LE header length).
const HEADER_START: u64 = 8;

/// The header length a file claims (`None` when it is shorter than 8 bytes).
fn claimed_header_len(bytes: &[u8]) -> Option<u64> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

/// `e` from parsing `bytes` (the file at `path`; `None` for bytes being serialized) as a
/// typed error naming the field and its offset.
pub(crate) fn st_err(path: &Path, bytes: Option<&[u8]>, e: &SafeTensorError) -> RegistryError {
    let len = bytes.map_or(0, |b| b.len() as u64);
    let claimed = bytes.and_then(claimed_header_len);
    let (field, offset, reason) = match e {
        SafeTensorError::HeaderTooSmall => (
            "header length".to_owned(),
            0,
            format!("the file has {len} bytes, fewer than the 8-byte header length"),
        ),
        SafeTensorError::HeaderTooLarge | SafeTensorError::InvalidHeaderLength => (
            "header length".to_owned(),
            0,
            match claimed {
                Some(n) => format!(
                    "claims a {n}-byte header; the file has {len} bytes (and the parser reads at most 100 MB of header)"
                ),
                None => format!("{e:?}"),
            },
        ),
        SafeTensorError::InvalidHeader => (
            "header".to_owned(),
            HEADER_START,
            "not valid UTF-8".to_owned(),
        ),
        SafeTensorError::InvalidHeaderStart => (
            "header".to_owned(),
            HEADER_START,
            "does not start with '{'".to_owned(),
        ),
        SafeTensorError::InvalidHeaderDeserialization => (
            "header".to_owned(),
            HEADER_START,
            "not a valid safetensors JSON header".to_owned(),
        ),
        SafeTensorError::JsonError(j) => ("header".to_owned(), HEADER_START, j.to_string()),
        SafeTensorError::InvalidOffset(name) => (
            format!("tensor {name:?} data_offsets"),
            HEADER_START,
            "not contiguous with the previous tensor's or past the data section".to_owned(),
        ),
        SafeTensorError::TensorInvalidInfo => (
            "tensor dtype/shape/data_offsets".to_owned(),
            HEADER_START,
            "a tensor's byte length differs from its shape times its dtype size".to_owned(),
        ),
        SafeTensorError::ValidationOverflow => (
            "tensor shape".to_owned(),
            HEADER_START,
            "the shape's element count or byte length overflows".to_owned(),
        ),
        SafeTensorError::MetadataIncompleteBuffer => (
            "data_offsets".to_owned(),
            claimed.map_or(HEADER_START, |n| HEADER_START.saturating_add(n)),
            format!(
                "the tensors' data does not end where the file does ({len} bytes): bytes left over or missing"
            ),
        ),
        SafeTensorError::TensorNotFound(name) => {
            (format!("tensor {name:?}"), HEADER_START, "not in the header".to_owned())
        }
        SafeTensorError::InvalidTensorView(dtype, shape, n) => (
            "tensor view".to_owned(),
            0,
            format!("{n} bytes do not hold a {dtype:?} tensor of shape {shape:?}"),
        ),
        SafeTensorError::IoError(io) => ("file".to_owned(), 0, io.to_string()),
    };
    RegistryError::Safetensors {
        path: path.to_owned(),
        field,
        offset,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::SafeTensors;

    fn err(bytes: &[u8]) -> RegistryError {
        let e = SafeTensors::deserialize(bytes).unwrap_err();
        st_err(Path::new("x.safetensors"), Some(bytes), &e)
    }

    #[test]
    fn header_length_past_the_file_names_offset_0() {
        let mut b = 1_000u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        match err(&b) {
            RegistryError::Safetensors {
                field,
                offset,
                reason,
                ..
            } => {
                assert_eq!((field.as_str(), offset), ("header length", 0));
                assert!(
                    reason.contains("1000-byte header") && reason.contains("10 bytes"),
                    "{reason}"
                );
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn too_small_and_bad_json_name_their_fields() {
        match err(b"abc") {
            RegistryError::Safetensors { field, offset, .. } => {
                assert_eq!((field.as_str(), offset), ("header length", 0));
            }
            e => panic!("{e:?}"),
        }
        let mut b = 4u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"{ab}");
        match err(&b) {
            RegistryError::Safetensors { field, offset, .. } => {
                assert_eq!((field.as_str(), offset), ("header", 8));
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn data_left_over_names_the_data_section() {
        let h = br#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
        let mut b = (h.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(h);
        b.extend_from_slice(&[0u8; 8]);
        match err(&b) {
            RegistryError::Safetensors { field, offset, .. } => {
                assert_eq!(
                    (field.as_str(), offset),
                    ("data_offsets", 8 + h.len() as u64)
                );
            }
            e => panic!("{e:?}"),
        }
    }
}
