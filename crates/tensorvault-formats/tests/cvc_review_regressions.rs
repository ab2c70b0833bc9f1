//! Regressions for problems found in review: each test fails on the code before its fix.

use std::os::unix::fs::PermissionsExt;

use tensorvault_formats::cvc::{pack, Compression, CvcReader, CvcWriter, PackOptions};
use tensorvault_formats::FormatError;

/// v1.0 file from raw JSON and (len, crc, payload) frames.
fn v1_file(json: &str, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut b = b"CVCF".to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(json.as_bytes());
    for (len, crc, payload) in frames {
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(payload);
    }
    b
}

#[test]
fn an_empty_chunk_with_a_wrong_crc_fails_on_load_not_only_in_verify() {
    let json = r#"{"chunks":[{"compression":"fp16","rows":0}],"compression":"fp16","dimension":3,"num_vectors":0}"#;
    let r = CvcReader::from_source(v1_file(json, &[(0, 0xdead_beef, &[])]), "empty").unwrap();
    assert!(matches!(
        r.load_all(),
        Err(FormatError::ChecksumMismatch {
            stored: 0xdead_beef,
            computed: 0,
            ..
        })
    ));
    assert_eq!(r.verify().unwrap().corrupt.len(), 1);
    let ok = CvcReader::from_source(v1_file(json, &[(0, 0, &[])]), "empty").unwrap();
    assert_eq!(ok.load_all().unwrap().shape().dims(), &[0, 3]);
}

#[test]
fn a_dimension_whose_row_overflows_is_refused_at_open() {
    let json = r#"{"chunks":[{"compression":"fp16","rows":0}],"compression":"fp16","dimension":9223372036854775808,"num_vectors":0}"#;
    let err = CvcReader::from_source(v1_file(json, &[(0, 0, &[])]), "huge").unwrap_err();
    assert!(
        matches!(&err, FormatError::InvalidField { field, .. } if field == "dimension"),
        "{err:?}"
    );
}

#[test]
fn streaming_writer_rejects_a_chunk_size_that_overflows() {
    let dir = tempfile::tempdir().unwrap();
    let opts = PackOptions {
        chunk_size: 1 << 62,
        ..PackOptions::default()
    };
    let err = CvcWriter::create(dir.path().join("x.cvc"), 8, opts).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::InvalidArgument {
                name: "chunk_size",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_failed_write_poisons_the_streaming_writer() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("x.cvc");
    let opts = PackOptions {
        compression: Compression::Int8,
        chunk_size: 100,
        ..PackOptions::default()
    };
    let mut w = CvcWriter::create(&dest, 2, opts).unwrap();
    w.write_rows(&[0.5; 100]).unwrap(); // 50 rows, buffered
    let mut bad = vec![0.25f32; 100];
    bad[7] = f32::NAN;
    assert!(matches!(w.write_rows(&bad), Err(FormatError::Codec { .. })));
    // The 50 accepted rows were in the failed chunk: the writer must not pretend otherwise.
    assert!(matches!(
        w.write_rows(&[1.0; 2]),
        Err(FormatError::InvalidArgument { name: "writer", .. })
    ));
    assert!(matches!(
        w.finish(),
        Err(FormatError::InvalidArgument { name: "writer", .. })
    ));
    assert!(!dest.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn replacing_a_file_keeps_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("private.cvc");
    std::fs::write(&dest, b"old").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();
    pack(&dest, &[1.0, 2.0, 3.0], 3, &PackOptions::default()).unwrap();
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(CvcReader::open(&dest).unwrap().num_vectors(), 1);
}
