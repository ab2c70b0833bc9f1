//! MOBI v2 bad input: one crafted file per v2 rejection (varints, names, per-axis
//! parameters, quantization kinds, alignment padding, the names table), each checked for
//! the typed error naming the field and offset. v1 rejections: `mobi_bad_input.rs`.

mod mobi_util;

use std::collections::BTreeMap;

use mobi_util::reseal;
use tensorvault_formats::mobi::{
    validate, ConstantTensor, DataType, Dim, Header, IoSpec, MobiError, Model, Operator,
    OperatorType, Quantization,
};

/// x [N, 512] -> MatMul(x, w) -> y [1, 2]; w is int8 [2, 512] (1 KiB, so its payload is
/// 64-byte aligned) per axis 0 with stored zero points [100, -1]; names: y and w.
fn model() -> Model {
    Model {
        metadata: tensorvault_formats::mobi::Metadata {
            name: "t".into(),
            framework_version: 1,
            created_unix: 0,
        },
        inputs: vec![IoSpec {
            name: "x".into(),
            dtype: DataType::F32,
            shape: vec![Dim::Symbolic("N".into()), Dim::Fixed(512)],
        }],
        outputs: vec![IoSpec::new("y", DataType::F32, &[1, 2])],
        tensors: vec![ConstantTensor {
            id: 2,
            dtype: DataType::I8,
            shape: vec![2, 512],
            quant: Some(Quantization::PerAxis {
                axis: 0,
                scales: vec![0.5, 0.25],
                zero_points: vec![100, -1],
            }),
            gzip: false,
            data: (0..1024).map(|i| (i % 251) as u8).collect(),
        }],
        operators: vec![Operator {
            op: OperatorType::MatMul,
            inputs: vec![0, 2],
            outputs: vec![1],
            params: vec![],
        }],
        optimized: false,
        value_names: BTreeMap::from([(1, "y".into()), (2, "w".into())]),
    }
}

fn good() -> Vec<u8> {
    model().to_bytes().unwrap()
}

fn err(b: &[u8]) -> MobiError {
    Model::from_bytes(b).unwrap_err()
}

/// Offset of the tensor record (after the alignment byte and the one-byte count).
fn t0(b: &[u8]) -> usize {
    Header::parse(b).unwrap().tensor_offset as usize + 2
}

/// Patch `at..` with `bytes`, reseal, return the first error.
fn patched(at: usize, bytes: &[u8]) -> MobiError {
    let mut b = good();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    reseal(&mut b);
    err(&b)
}

#[test]
fn the_crafted_layout_is_what_the_tests_assume() {
    let b = good();
    assert_eq!(Header::parse(&b).unwrap().version, 2);
    let t = t0(&b);
    // id 2, int8, per-axis with stored zero points, rank 2, dims 2 and 512, axis 0.
    assert_eq!(&b[t..t + 8], &[2, 3, 0b100, 2, 2, 0x80, 0x04, 0]);
    // zero points 100 and -1 as zigzag varints: 200 = c8 01, 1.
    assert_eq!(&b[t + 16..t + 19], &[0xc8, 0x01, 0x01]);
    let payload = (t + 19).next_multiple_of(64);
    assert!(payload > t + 19, "the test needs padding");
    assert_eq!(&b[payload..payload + 4], &[0, 1, 2, 3]);
    assert_eq!(Model::from_bytes(&b).unwrap(), model());
}

#[test]
fn overlong_and_non_canonical_varints() {
    let t = t0(&good());
    // 0x80 0x00: a redundant zero group.
    assert!(matches!(
        patched(t, &[0x80, 0x00]),
        MobiError::InvalidVarint { field: "tensor id", offset } if offset == t as u64
    ));
    // 11 continuation bytes: longer than any u64.
    assert!(matches!(
        patched(t + 4, &[0xff; 11]),
        MobiError::InvalidVarint { field: "tensor dimension", offset } if offset == (t + 4) as u64
    ));
}

#[test]
fn name_longer_than_the_limit() {
    // Model name length 1 -> 8193 (0x81 0x40).
    assert!(matches!(
        patched(32, &[0x81, 0x40]),
        MobiError::NameTooLong {
            field: "model name",
            len: 8193,
            offset: 32,
            max: 4096
        }
    ));
}

#[test]
fn symbolic_dimension_name_not_utf8() {
    let b = good();
    let at = b.windows(2).position(|w| w == [3, b'N']).unwrap() + 1;
    assert!(matches!(
        patched(at, &[0xff]),
        MobiError::InvalidUtf8 { field: "symbolic dimension name", offset } if offset == at as u64
    ));
}

#[test]
fn alignment_out_of_range() {
    let at = t0(&good()) - 2;
    assert!(matches!(
        patched(at, &[13]),
        MobiError::ValueOutOfRange { field: "alignment log2", value: 13, max: 12, offset } if offset == at as u64
    ));
}

#[test]
fn reserved_tensor_flag_bits() {
    let t = t0(&good());
    assert!(matches!(
        patched(t + 2, &[0b100 | 0x80]),
        MobiError::ReservedBits { field: "tensor flags", value: 0x80, offset } if offset == (t + 2) as u64
    ));
}

#[test]
fn quantization_kind_must_fit_the_data_type() {
    let t = t0(&good());
    // int8 without parameters.
    assert!(matches!(
        patched(t + 2, &[0]),
        MobiError::QuantKindMismatch { tensor_id: 2, dtype: "int8", kind: "none", offset } if offset == (t + 2) as u64
    ));
    // f32 with per-axis parameters.
    assert!(matches!(
        patched(t + 1, &[1]),
        MobiError::QuantKindMismatch {
            tensor_id: 2,
            dtype: "f32",
            kind: "per-axis",
            ..
        }
    ));
    // The reserved kind 3.
    assert!(matches!(
        patched(t + 2, &[0b110]),
        MobiError::QuantKindMismatch {
            kind: "reserved",
            ..
        }
    ));
}

#[test]
fn per_axis_axis_outside_the_rank() {
    let t = t0(&good());
    assert!(matches!(
        patched(t + 7, &[2]),
        MobiError::InvalidPerAxis { tensor_id: 2, field: "axis", offset, .. } if offset == (t + 7) as u64
    ));
}

#[test]
fn per_axis_scales_must_be_finite_and_positive() {
    let t = t0(&good());
    for bad in [f32::NAN, -0.5, 0.0, f32::INFINITY] {
        assert!(matches!(
            patched(t + 12, &bad.to_le_bytes()),
            MobiError::InvalidPerAxis { field: "scale", channel: 1, offset, .. } if offset == (t + 12) as u64
        ));
    }
}

#[test]
fn per_axis_zero_point_outside_the_code_range() {
    let t = t0(&good());
    // 100 -> 200 (zigzag 400 = 0x90 0x03): not an int8 code.
    assert!(matches!(
        patched(t + 16, &[0x90, 0x03]),
        MobiError::InvalidPerAxis { field: "zero_point", channel: 0, offset, .. } if offset == (t + 16) as u64
    ));
}

#[test]
fn per_axis_channel_count_checked_against_the_bytes_left() {
    let t = t0(&good());
    // axis 0 -> 1: 512 channels need >= 2560 bytes of parameters, ~1.1 KB are left.
    assert!(matches!(
        patched(t + 7, &[1]),
        MobiError::CountTooLarge {
            field: "per-axis channel count",
            count: 512,
            ..
        }
    ));
}

#[test]
fn alignment_padding_must_be_zero() {
    let t = t0(&good());
    assert!(matches!(
        patched(t + 21, &[1]),
        MobiError::NonZeroPadding { tensor_id: 2, offset } if offset == (t + 19) as u64
    ));
    // The padding is covered by the file checksum too.
    let mut b = good();
    b[t + 21] = 1;
    assert!(matches!(
        err(&b),
        MobiError::ChecksumMismatch { what: "file", .. }
    ));
}

#[test]
fn names_table_order_and_references() {
    let b = good();
    // The table: count 2, [1, 1, "y"], [2, 1, "w"], then the footer.
    let n = b.len() - 4;
    assert_eq!(&b[n - 7..n], &[2, 1, 1, b'y', 2, 1, b'w']);
    assert!(matches!(
        patched(n - 3, &[1]),
        MobiError::InvalidValueName { id: 1, reason: "ids must strictly increase", offset } if offset == (n - 3) as u64
    ));
    assert!(matches!(
        patched(n - 3, &[9]),
        MobiError::InvalidValueName { id: 9, offset, .. } if offset == (n - 3) as u64
    ));
}

#[test]
fn validate_reports_several_v2_problems_at_once() {
    let mut b = good();
    let t = t0(&b);
    b[t + 12..t + 16].copy_from_slice(&f32::NAN.to_le_bytes());
    b[t + 21] = 7;
    reseal(&mut b);
    let r = validate(&b);
    assert!(r
        .problems
        .iter()
        .any(|e| matches!(e, MobiError::InvalidPerAxis { field: "scale", .. })));
    assert!(r
        .problems
        .iter()
        .any(|e| matches!(e, MobiError::NonZeroPadding { .. })));
}
