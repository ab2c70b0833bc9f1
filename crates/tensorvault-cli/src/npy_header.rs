//! Reading the `.npy` header of an input file with the bounded parser of
//! [`tensorvault_formats::npy`]: at most [`MAX_PREFIX_LEN`] bytes are read, whatever the
//! file claims.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use tensorvault_formats::npy::{parse_header, NpyHeader, MAX_PREFIX_LEN};
use tensorvault_formats::FormatError;

use crate::error::CliError;

/// Reads and parses the `.npy` header of `file` and leaves it positioned at the first data
/// byte.
///
/// # Errors
/// [`CliError::Npy`] naming the field and its offset (magic, version, header_len,
/// header); I/O errors.
pub fn read_header(file: &mut File, name: &str) -> Result<NpyHeader, CliError> {
    let file_len = file.metadata().map_err(CliError::io("stat", name))?.len();
    file.seek(SeekFrom::Start(0))
        .map_err(CliError::io("seek", name))?;
    let mut prefix = Vec::new();
    file.take(file_len.min(MAX_PREFIX_LEN))
        .read_to_end(&mut prefix)
        .map_err(CliError::io("read", name))?;
    let h = parse_header(&prefix, file_len).map_err(|e| CliError::Npy {
        path: name.to_owned(),
        reason: match e {
            FormatError::InvalidField {
                field,
                offset,
                reason,
                ..
            } => format!("field {field} at offset {offset}: {reason}"),
            other => other.to_string(),
        },
    })?;
    file.seek(SeekFrom::Start(h.data_offset))
        .map_err(CliError::io("seek", name))?;
    Ok(h)
}
