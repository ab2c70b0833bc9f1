//! MOBI v1 bad input: one crafted v1 file per rejection, each checked for the typed
//! error naming the field and offset, plus "validate reports every problem". (v1 files
//! are made by the test encoder in `mobi_util`; v2 rejections: `mobi_bad_input_v2.rs`.)

mod mobi_util;

use mobi_util::{encode_v1, reseal};
use tensorvault_formats::mobi::Quantization;
use tensorvault_formats::mobi::{
    layout, validate, ConstantTensor, DataType, Header, MobiError, Model, ModelBuilder,
    OperatorType, ParamValue, QuantTarget, WriteOptions,
};
use tensorvault_formats::FormatError;

/// A small model: x -> FullyConnected(w, b) -> Softmax{axis} -> y.
fn tiny() -> Model {
    let mut b = ModelBuilder::new("tiny").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 4]);
    let w = b
        .constant_f32(&[2, 4], &[0.5, -0.5, 0.25, 1.0, 2.0, 0.0, -1.0, 0.125])
        .unwrap();
    let bias = b.constant_f32(&[2], &[0.1, -0.1]).unwrap();
    let y = b.op(OperatorType::FullyConnected, &[x, w, bias], vec![]);
    let z = b.op(
        OperatorType::Softmax,
        &[y],
        vec![("axis".into(), ParamValue::Int(-1))],
    );
    b.output("y", DataType::F32, &[1, 2], z);
    b.build().unwrap()
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn err(b: &[u8]) -> MobiError {
    Model::from_bytes(b).unwrap_err()
}

fn good() -> Vec<u8> {
    encode_v1(&tiny())
}

fn offsets(b: &[u8]) -> (usize, usize) {
    let h = Header::parse(b).unwrap();
    (h.tensor_offset as usize, h.graph_offset as usize)
}

#[test]
fn bad_magic() {
    let mut b = good();
    b[0] = b'X';
    assert!(matches!(err(&b), MobiError::InvalidMagic { found } if found == *b"XOBI"));
    assert!(matches!(
        Header::parse(&b),
        Err(MobiError::InvalidMagic { .. })
    ));
}

#[test]
fn version_too_new_and_zero() {
    for v in [3u16, 0] {
        let mut b = good();
        put_u16(&mut b, layout::VERSION_OFFSET, v);
        reseal(&mut b);
        assert!(
            matches!(err(&b), MobiError::UnsupportedVersion { version, offset: 4, supported: 2 } if version == v)
        );
    }
}

#[test]
fn header_checksum_wrong() {
    let mut b = good();
    b[layout::HEADER_CRC_OFFSET] ^= 1;
    assert!(matches!(
        err(&b),
        MobiError::ChecksumMismatch {
            what: "header",
            offset: 8,
            ..
        }
    ));
}

#[test]
fn file_checksum_catches_every_single_bit_flip() {
    let b = good();
    for i in 0..b.len() {
        for bit in 0..8 {
            let mut c = b.clone();
            c[i] ^= 1 << bit;
            assert!(
                Model::from_bytes(&c).is_err(),
                "flip at byte {i} bit {bit} accepted"
            );
        }
    }
    let mut c = b.clone();
    let mid = c.len() / 2;
    c[mid] ^= 0x10;
    assert!(matches!(
        err(&c),
        MobiError::ChecksumMismatch { what: "file", .. }
    ));
}

#[test]
fn reserved_bits_must_be_zero() {
    let mut b = good();
    put_u32(&mut b, layout::FLAGS_OFFSET, 1 << 9);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::ReservedBits {
            field: "flags",
            offset: 12,
            ..
        }
    ));
    let mut b = good();
    put_u16(&mut b, layout::RESERVED_OFFSET, 1);
    reseal(&mut b);
    assert!(matches!(err(&b), MobiError::ReservedBits { offset: 6, .. }));
}

#[test]
fn total_size_differs_from_the_file() {
    let mut b = good();
    let n = b.len() as u32;
    put_u32(&mut b, layout::TOTAL_SIZE_OFFSET, n + 8);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidHeaderField {
            field: "total_size",
            offset: 16,
            ..
        }
    ));
    // Appended bytes (with a resealed footer) are refused too.
    let mut b = good();
    b.extend_from_slice(&[0; 4]);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidHeaderField {
            field: "total_size",
            ..
        }
    ));
}

#[test]
fn section_offsets_out_of_order_or_range() {
    let b0 = good();
    let (t, g) = offsets(&b0);
    let mut b = b0.clone();
    put_u32(&mut b, layout::TENSOR_OFFSET_OFFSET, g as u32 + 8);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidHeaderField {
            offset: 28,
            field: "graph_offset",
            ..
        } | MobiError::InvalidHeaderField {
            field: "tensor_offset",
            ..
        }
    ));
    let mut b = b0.clone();
    put_u32(&mut b, layout::GRAPH_OFFSET_OFFSET, u32::MAX);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidHeaderField {
            field: "graph_offset",
            offset: 28,
            ..
        }
    ));
    let mut b = b0.clone();
    put_u32(&mut b, layout::METADATA_OFFSET_OFFSET, 40);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidHeaderField {
            field: "metadata_offset",
            offset: 20,
            ..
        }
    ));
    // In range but not where the previous section ends.
    let mut b = b0;
    put_u32(&mut b, layout::TENSOR_OFFSET_OFFSET, t as u32 + 4);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::SectionBoundary { .. } | MobiError::Truncated { .. }
    ));
}

#[test]
fn truncated_files() {
    let b = good();
    for n in [0, 3, 31, 40, b.len() - 1] {
        assert!(Model::from_bytes(&b[..n]).is_err());
    }
    assert!(matches!(
        err(&b[..20]),
        MobiError::Truncated { what: "header", .. }
    ));
}

#[test]
fn name_length_past_the_end() {
    let mut b = good();
    put_u32(&mut b, 32, 1 << 30);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::Truncated {
            what: "model name",
            offset: 36,
            needed: 1_073_741_824,
            ..
        }
    ));
}

#[test]
fn invalid_utf8_name() {
    let mut b = good();
    b[36] = 0xff;
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidUtf8 {
            field: "model name",
            offset: 36
        }
    ));
}

/// Offset of the first constant tensor's fields.
fn first_tensor(b: &[u8]) -> usize {
    offsets(b).0 + 4
}

#[test]
fn rank_absurd() {
    let mut b = good();
    let t = first_tensor(&b);
    put_u16(&mut b, t + 6, 60_000);
    reseal(&mut b);
    assert!(
        matches!(err(&b), MobiError::RankTooLarge { rank: 60_000, offset, .. } if offset == (t + 6) as u64)
    );
}

#[test]
fn shape_product_overflows() {
    let mut b = good();
    let t = first_tensor(&b);
    // shape [2, 4] -> [2^40, 2^40]
    b[t + 8..t + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    b[t + 16..t + 24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    reseal(&mut b);
    assert!(matches!(err(&b), MobiError::ShapeOverflow { offset } if offset == (t + 8) as u64));
}

#[test]
fn data_size_not_matching_dtype_times_shape() {
    let mut b = good();
    let t = first_tensor(&b);
    // shape [2, 4] -> [2, 3]: 24 bytes needed, 32 stored.
    b[t + 16..t + 24].copy_from_slice(&3u64.to_le_bytes());
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::DataSizeMismatch {
            expected: 24,
            found: 32,
            ..
        }
    ));
    let mut b = good();
    b[t + 24..t + 32].copy_from_slice(&u64::MAX.to_le_bytes());
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::Truncated {
            what: "tensor data",
            ..
        }
    ));
}

#[test]
fn unknown_data_type_and_dtype_reserved_bits() {
    let mut b = good();
    let t = first_tensor(&b);
    put_u16(&mut b, t + 4, 0x00_63);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::UnknownDataType { value: 0x63, .. }
    ));
    let mut b = good();
    put_u16(&mut b, t + 4, 0x0101);
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::ReservedBits {
            field: "tensor data type",
            ..
        }
    ));
}

fn gzip_model(data: Vec<u8>, shape: &[u64]) -> Vec<u8> {
    // Write a valid gzip tensor, then swap in `data` as its payload.
    let mut m = tiny();
    m.tensors[1].gzip = true;
    let mut b = encode_v1(&m);
    let (t, g) = offsets(&b);
    let t1 = t + 4 + 4 + 2 + 2 + 16 + 8 + 32; // second tensor
    let old = u64::from_le_bytes(b[t1 + 16..t1 + 24].try_into().unwrap()) as usize;
    let mut out = b[..t1].to_vec();
    out.extend_from_slice(&b[t1..t1 + 8]);
    out.extend_from_slice(&shape[0].to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data);
    let delta = data.len() as i64 - old as i64;
    out.extend_from_slice(&b[t1 + 24 + old..]);
    b = out;
    put_u32(&mut b, 28, (g as i64 + delta) as u32);
    let n = b.len() as u32;
    put_u32(&mut b, 16, n);
    reseal(&mut b);
    b
}

fn gz(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_payload_corrupt() {
    let mut payload = gz(&[0u8; 8]);
    let n = payload.len();
    payload[n - 6] ^= 0xff; // crc32 of the gzip trailer
    let b = gzip_model(payload, &[2]);
    assert!(matches!(err(&b), MobiError::Gzip { tensor_id: 3, .. }));
    let b = gzip_model(vec![1, 2, 3], &[2]);
    assert!(matches!(err(&b), MobiError::Gzip { .. }));
}

#[test]
fn gzip_bomb_is_capped_at_the_declared_size() {
    // 64 MiB of zeros compresses to ~64 KiB; the shape declares 8 bytes.
    let bomb = gz(&vec![0u8; 64 << 20]);
    let b = gzip_model(bomb, &[2]);
    match err(&b) {
        MobiError::Gzip { reason, .. } => assert!(reason.contains("zip-bomb"), "{reason}"),
        e => panic!("{e}"),
    }
    // Inflating short of the declared size is a size mismatch.
    let b = gzip_model(gz(&[0u8; 4]), &[2]);
    assert!(matches!(
        err(&b),
        MobiError::DataSizeMismatch {
            expected: 8,
            found: 4,
            ..
        }
    ));
}

/// Offset of the first operator descriptor.
fn first_op(b: &[u8]) -> usize {
    offsets(b).1 + 4
}

#[test]
fn unknown_operator_type() {
    let mut b = good();
    let o = first_op(&b);
    put_u16(&mut b, o, 999);
    reseal(&mut b);
    assert!(
        matches!(err(&b), MobiError::UnknownOperator { index: 0, value: 999, offset } if offset == o as u64)
    );
}

#[test]
fn unknown_parameter_tag() {
    let mut b = good();
    let n = b.len();
    // Softmax is the last operator: key_len u16 "axis" tag i64 footer.
    let tag_at = n - 4 - 8 - 1;
    assert_eq!(b[tag_at], layout::TAG_INT);
    b[tag_at] = 77;
    reseal(&mut b);
    assert!(
        matches!(err(&b), MobiError::UnknownParamTag { index: 1, tag: 77, offset } if offset == tag_at as u64)
    );
}

#[test]
fn operator_referring_to_a_missing_tensor() {
    let mut b = good();
    let o = first_op(&b);
    put_u32(&mut b, o + 8 + 4, 4242); // second input: the weights
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::MissingTensor {
            index: 0,
            id: 4242,
            ..
        }
    ));
}

#[test]
fn invalid_quantization_parameters() {
    let mut m = tiny();
    m.tensors[0].dtype = DataType::I8;
    m.tensors[0].data = m.tensors[0].data[..8].into();
    m.tensors[0].quant = Some(Quantization::PerTensor {
        scale: 0.5,
        zero_point: 0,
    });
    let mut b = encode_v1(&m);
    let t = first_tensor(&b);
    b[t + 24..t + 28].copy_from_slice(&(-1.0f32).to_le_bytes()); // scale
    reseal(&mut b);
    assert!(matches!(
        err(&b),
        MobiError::InvalidQuantization { tensor_id: 2, .. }
    ));
}

#[test]
fn count_fields_checked_before_allocating() {
    let mut b = good();
    let (t, g) = offsets(&b);
    put_u32(&mut b, t, u32::MAX);
    put_u32(&mut b, g, u32::MAX);
    reseal(&mut b);
    let r = validate(&b);
    assert!(r.problems.iter().any(|e| matches!(
        e,
        MobiError::CountTooLarge {
            field: "tensor count",
            ..
        }
    )));
    assert!(r.problems.iter().any(|e| matches!(
        e,
        MobiError::CountTooLarge {
            field: "operator count",
            ..
        }
    )));
}

#[test]
fn validate_reports_every_problem() {
    let mut b = good();
    let o = first_op(&b);
    put_u16(&mut b, layout::RESERVED_OFFSET, 1);
    put_u32(&mut b, o + 8 + 4, 4242);
    b[36] = 0xff;
    // Do not reseal: both checksums are wrong as well.
    let r = validate(&b);
    let has = |f: fn(&MobiError) -> bool| r.problems.iter().any(f);
    assert!(has(|e| matches!(
        e,
        MobiError::ChecksumMismatch { what: "header", .. }
    )));
    assert!(has(|e| matches!(
        e,
        MobiError::ChecksumMismatch { what: "file", .. }
    )));
    assert!(has(|e| matches!(e, MobiError::ReservedBits { .. })));
    assert!(has(|e| matches!(e, MobiError::InvalidUtf8 { .. })));
    assert!(has(|e| matches!(
        e,
        MobiError::MissingTensor { id: 4242, .. }
    )));
    assert!(r.problems.len() >= 5, "{:#?}", r.problems);
}

#[test]
fn writer_refuses_inconsistent_models() {
    let mut m = tiny();
    m.operators[0].inputs[0] = 77;
    assert!(matches!(
        m.to_bytes(),
        Err(MobiError::MissingTensor { id: 77, .. })
    ));
    let mut m = tiny();
    m.tensors[0].data = m.tensors[0].data[..m.tensors[0].data.len() - 1].into();
    assert!(matches!(m.to_bytes(), Err(MobiError::InvalidModel { .. })));
    let mut m = tiny();
    m.tensors.push(ConstantTensor {
        id: 3,
        ..m.tensors[0].clone()
    });
    assert!(matches!(
        m.to_bytes(),
        Err(MobiError::DuplicateId { id: 3, .. })
    ));
    let mut m = tiny();
    m.tensors[0] = ConstantTensor::from_f32(3, &[2, 4], &[f32::NAN; 8]).unwrap();
    assert!(matches!(
        m.to_bytes_with(&WriteOptions {
            quantize: Some(QuantTarget::Fp16),
            gzip: false
        }),
        Err(MobiError::Codec { tensor_id: 3, .. })
    ));
}

#[test]
fn errors_convert_into_format_error() {
    let e: FormatError = err(b"nope").into();
    assert!(matches!(e, FormatError::Mobi(MobiError::Truncated { .. })));
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Model::open(dir.path().join("missing.mobi")),
        Err(FormatError::Io { .. })
    ));
}

/// The gzip cap used to be per tensor only: many small compressed tensors, each under it,
/// let a 1 MB file inflate to 1 GB (issue 16). Inflation of all tensors together has a
/// budget too.
#[test]
fn gzip_inflation_has_a_per_file_budget() {
    use tensorvault_formats::mobi::{read_with, ReadOptions};
    let mut b = ModelBuilder::new("many").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 4]);
    let mut last = x;
    for _ in 0..8 {
        let w = b.constant_f32(&[4, 4], &[0.0; 16]).unwrap();
        last = b.op(OperatorType::FullyConnected, &[last, w], vec![]);
    }
    b.output("y", DataType::F32, &[1, 4], last);
    let mut m = b.build().unwrap();
    for t in &mut m.tensors {
        t.gzip = true;
    }
    let bytes = m.to_bytes().unwrap();
    // 8 tensors of 64 bytes: a 300-byte budget admits 4 of them.
    let opts = ReadOptions {
        max_inflated_bytes: 300,
        ..ReadOptions::default()
    };
    match read_with(&bytes, &opts).unwrap_err() {
        MobiError::InflateBudget { total, limit, .. } => {
            assert_eq!((total, limit), (320, 300));
        }
        e => panic!("expected InflateBudget, got {e}"),
    }
    // The default budget reads it.
    read_with(&bytes, &ReadOptions::default()).unwrap();
}

/// With default options the budget follows the file's size: four 8 MiB all-zero tensors
/// deflate to a ~35 KB file, far more output than 64x the file plus 16 MiB.
#[test]
fn gzip_budget_follows_the_file_size_by_default() {
    let mut b = ModelBuilder::new("zeros").framework_version(1);
    let n = 2 << 20;
    let x = b.input("x", DataType::F32, &[1, n as u64]);
    let mut last = x;
    for _ in 0..4 {
        let w = b.constant_f32(&[n as u64], &vec![0.0; n]).unwrap();
        last = b.op(OperatorType::Add, &[last, w], vec![]);
    }
    b.output("y", DataType::F32, &[1, n as u64], last);
    let mut m = b.build().unwrap();
    for t in &mut m.tensors {
        t.gzip = true;
    }
    let bytes = m.to_bytes().unwrap();
    assert!(bytes.len() < 200_000, "{}", bytes.len());
    match err(&bytes) {
        MobiError::InflateBudget { total, limit, .. } => {
            assert!(total > limit, "{total} {limit}");
            assert_eq!(limit, bytes.len() as u64 * 64 + (16 << 20));
        }
        e => panic!("expected InflateBudget, got {e}"),
    }
}

/// The builder refuses a graph output that the file cannot hold (a constant tensor, a graph
/// input, a value declared twice) with the output's name, before any id is assigned.
#[test]
fn builder_refuses_outputs_the_file_cannot_declare() {
    let named = |e: MobiError, name: &str, why: &str| match e {
        MobiError::InvalidModel { what, reason } => {
            assert!(what.contains(name), "{what}");
            assert!(reason.contains(why), "{reason}");
        }
        other => panic!("{other:?}"),
    };
    let mut b = ModelBuilder::new("c");
    let x = b.input("x", DataType::F32, &[2]);
    let c = b.constant_f32(&[2], &[1.0, 2.0]).unwrap();
    let y = b.op(OperatorType::Add, &[x, c], vec![]);
    b.output("y", DataType::F32, &[2], y);
    b.output("k", DataType::F32, &[2], c);
    named(b.build().unwrap_err(), "\"k\"", "constant tensor");
    let mut b = ModelBuilder::new("i");
    let x = b.input("x", DataType::F32, &[2]);
    b.output("same", DataType::F32, &[2], x);
    named(b.build().unwrap_err(), "\"same\"", "graph input or output");
    let mut b = ModelBuilder::new("twice");
    let x = b.input("x", DataType::F32, &[2]);
    let y = b.op(OperatorType::Relu, &[x], vec![]);
    b.output("a", DataType::F32, &[2], y);
    b.output("b", DataType::F32, &[2], y);
    named(b.build().unwrap_err(), "\"b\"", "graph input or output");
}
