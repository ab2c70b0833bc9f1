//! CVC int4 (a tensorvault extension): round trips, the file-level marker that makes
//! readers without it refuse the file, and crafted headers and payloads (validly
//! checksummed) that must be refused with errors naming the field.

mod common;
use common::*;

fn table(rows: usize, dim: usize) -> Vec<f32> {
    (0..rows * dim)
        .map(|i| {
            let (r, j) = ((i / dim) as f32, (i % dim) as f32);
            (r * 0.37 + j * 1.3).sin() * (1.0 + j * 0.1) + j * 0.05
        })
        .collect()
}

/// An int4 file without the header checksum, so the JSON can be edited.
fn int4_file(rows: usize, dim: usize, chunk_size: u64) -> Vec<u8> {
    let opts = PackOptions {
        compression: Compression::Int4,
        chunk_size,
        reference_exact: true,
        ..Default::default()
    };
    pack_to_vec(&table(rows, dim), dim, &opts).unwrap()
}

#[test]
fn round_trip_is_close_and_four_bits_per_value() {
    let (rows, dim) = (300, 96);
    let x = table(rows, dim);
    let bytes = pack_to_vec(
        &x,
        dim,
        &PackOptions {
            compression: Compression::Int4,
            ..Default::default()
        },
    )
    .unwrap();
    let r = CvcReader::from_source(bytes.clone(), "mem").unwrap();
    let payload: u64 = r.chunks().iter().map(|c| c.payload_len).sum();
    // 48 code bytes + 8 parameter bytes per row of 96 values: 4.67 bits per value.
    assert_eq!(payload, (rows * (dim / 2 + 8)) as u64);
    let y = r.load_all().unwrap();
    let y = y.as_slice::<f32>().unwrap();
    let (mut se, mut sx) = (0f64, 0f64);
    for (a, b) in x.iter().zip(y) {
        se += f64::from(a - b).powi(2);
        sx += f64::from(*a).powi(2);
    }
    let rel = (se / sx).sqrt();
    assert!(rel < 0.06, "relative RMSE {rel}");
    // Rows 17..41 read alone equal the same rows of the full load.
    let part = r.load_rows(17..41).unwrap();
    assert_eq!(
        bits(part.as_slice::<f32>().unwrap()),
        bits(&y[17 * dim..41 * dim])
    );
}

#[test]
fn a_mixed_file_names_int4_at_file_level() {
    let dim = 5;
    let opts = PackOptions {
        compression: Compression::Fp16,
        chunk_size: 4,
        chunk_compression: Some(vec![
            Compression::Fp16,
            Compression::Int4,
            Compression::Fp16,
        ]),
        ..Default::default()
    };
    let bytes = pack_to_vec(&table(10, dim), dim, &opts).unwrap();
    let r = CvcReader::from_source(bytes, "mem").unwrap();
    assert_eq!(r.header().compression, Compression::Int4);
    assert_eq!(r.header().chunks[1].compression, Compression::Int4);
    assert_eq!(r.header().chunks[0].compression, Compression::Fp16);
}

#[test]
fn the_legacy_layout_cannot_hold_int4() {
    let opts = PackOptions {
        compression: Compression::Int4,
        framing: Framing::V0,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&table(4, 3), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "compression",
            ..
        }
    );
}

#[test]
fn non_finite_input_is_refused_at_pack() {
    let mut x = table(4, 3);
    x[7] = f32::INFINITY;
    let opts = PackOptions {
        compression: Compression::Int4,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&x, 3, &opts).unwrap_err(),
        FormatError::Codec {
            source: QuantError::NonFinite { index: 7, .. },
            ..
        }
    );
}

#[test]
fn crafted_column_parameters_are_refused() {
    let good = int4_file(6, 5, 3);
    let b = with_json(&good, |v| {
        v["chunks"][1].as_object_mut().unwrap().remove("col_scale");
    });
    assert_err!(
        reject(&b),
        FormatError::MissingField { field, .. } if field == "chunks[1].col_scale"
    );
    // A string too short for the dimension (and a dimension far beyond the file: the
    // length is checked before anything is decoded or allocated).
    let b = with_json(&good, |v| v["chunks"][0]["col_offset"] = json!("AAAAAA=="));
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, .. } if field == "chunks[0].col_offset"
    );
    let b = with_json(&good, |v| v["dimension"] = json!(1u64 << 60));
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, .. } if field == "chunks[0].col_offset"
    );
    let b = with_json(&good, |v| v["chunks"][0]["col_offset"] = json!(12));
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, .. } if field == "chunks[0].col_offset"
    );
    let b = with_json(&good, |v| {
        v["chunks"][0]["col_offset"] = json!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!")
    });
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, .. } if field == "chunks[0].col_offset"
    );
    // A NaN and a zero scale, in well-formed base64.
    for bad in [f32::NAN, 0.0, -1.0] {
        let enc = b64(&[1.0, 1.0, bad, 1.0, 1.0]);
        let b = with_json(&good, |v| v["chunks"][0]["col_scale"] = json!(enc));
        assert_err!(
            reject(&b),
            FormatError::InvalidField { field, .. } if field == "chunks[0].col_scale"
        );
    }
}

/// Standard padded base64 of little-endian f32 values (independent of the crate's own).
fn b64(values: &[f32]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                s.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Rewrite a frame's payload bytes and its CRC-32 so only the codec can object.
fn patch_payload(bytes: &mut [u8], frame: Frame, at: usize, new: &[u8]) {
    let p = frame.payload as usize;
    bytes[p + at..p + at + new.len()].copy_from_slice(new);
    let crc = crc32fast::hash(&bytes[p..p + frame.len as usize]);
    put_u32(bytes, frame.offset as usize + 4, crc);
}

#[test]
fn crafted_rows_with_valid_checksums_are_refused_on_load() {
    let good = int4_file(6, 5, 3);
    let f = frames(&good);
    assert_eq!(f.len(), 2);
    // Row 1 of chunk 1: its step (bytes 4..8 of the 11-byte row) made negative.
    let mut b = good.clone();
    patch_payload(&mut b, f[1], 11 + 4, &(-0.5f32).to_le_bytes());
    let (r, _dir) = accept(&b);
    assert_err!(
        r.load_all().unwrap_err(),
        FormatError::Codec {
            source: QuantError::InvalidParam {
                field: "row step",
                ..
            },
            ..
        }
    );
    // The rows of chunk 0 still read.
    assert_eq!(
        r.load_rows(0..3).unwrap().as_slice::<f32>().unwrap().len(),
        15
    );
    // A non-zero padding nibble after the 5th value of row 0.
    let mut b = good.clone();
    let last = good[f[0].payload as usize + 10] | 0x30;
    patch_payload(&mut b, f[0], 10, &[last]);
    let (r, _dir) = accept(&b);
    assert_err!(
        r.load_rows(0..1).unwrap_err(),
        FormatError::Codec {
            source: QuantError::InvalidParam {
                field: "padding nibble",
                ..
            },
            ..
        }
    );
    // A payload whose length disagrees with rows x (8 + ceil(dim / 2)).
    let b = with_json(&good, |v| v["chunks"][0]["rows"] = json!(2));
    let b = with_json(&b, |v| v["num_vectors"] = json!(5));
    assert_err!(reject(&b), FormatError::LengthMismatch { .. });
}
