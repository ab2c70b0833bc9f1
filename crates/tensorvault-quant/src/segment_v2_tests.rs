use super::*;
use proptest::prelude::*;

fn keys(rows: usize, width: usize) -> Vec<f32> {
    // Channels with very different offsets and magnitudes, like real keys.
    (0..rows * width)
        .map(|i| {
            let (r, c) = (i / width, i % width);
            let mag = if c % 7 == 0 { 8.0 } else { 1.0 };
            (c as f32 - 20.0) * 0.3 + mag * ((r * 31 + c * 17) as f32 * 0.13).sin()
        })
        .collect()
}

fn params(bits: u8, group_log2: u8, axis: Axis, width: u16, raw_rows: u16) -> V2Params {
    V2Params {
        bits,
        group_log2,
        axis,
        width,
        raw_rows,
        clip_search: false,
    }
}

fn rel_rmse(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let den: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
    (num / den).sqrt()
}

fn round_trip(p: &V2Params, x: &[f32]) -> Vec<f32> {
    let bytes = encode(p, x).unwrap();
    assert_eq!(bytes.len(), p.encoded_len(x.len()).unwrap());
    let seg = SegmentV2::parse(&bytes).unwrap();
    assert_eq!(seg.values(), x.len());
    let mut y = vec![0f32; x.len()];
    seg.decode(&mut y).unwrap();
    y
}

#[test]
fn every_value_is_within_half_a_step_of_its_group() {
    let x = keys(128, 64);
    for bits in 2..=8u8 {
        for axis in [Axis::Flat, Axis::Columns] {
            let p = params(bits, 6, axis, 64, 0);
            let y = round_trip(&p, &x);
            let bytes = encode(&p, &x).unwrap();
            let seg = SegmentV2::parse(&bytes).unwrap();
            let half_step = seg.max_scale() / 2.0;
            for (a, b) in x.iter().zip(&y) {
                assert!(
                    (a - b).abs() <= half_step * 1.001 + 1e-6,
                    "{bits} {axis:?}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn per_channel_groups_beat_flat_groups_on_keys() {
    let x = keys(128, 64);
    let flat = rel_rmse(&x, &round_trip(&params(3, 6, Axis::Flat, 64, 0), &x));
    let cols = rel_rmse(&x, &round_trip(&params(3, 6, Axis::Columns, 64, 0), &x));
    assert!(cols < flat * 0.7, "columns {cols} vs flat {flat}");
}

#[test]
fn raw_rows_are_exact_and_clip_search_lowers_the_error() {
    // f16-exact values (as KV caches hold them), an outlier in the raw row.
    let mut x: Vec<f32> = keys(64, 64)
        .iter()
        .map(|&v| half::f16::from_f32(v).to_f32())
        .collect();
    x[3] = 1234.0;
    let y = round_trip(&params(3, 6, Axis::Columns, 64, 1), &x);
    assert_eq!(y[..64], x[..64]);
    let mut w: Vec<f32> = (0..4096)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0).powi(3))
        .collect();
    w[100] = 6.0;
    let plain = rel_rmse(&w, &round_trip(&params(3, 5, Axis::Flat, 64, 0), &w));
    let mut p = params(3, 5, Axis::Flat, 64, 0);
    p.clip_search = true;
    let searched = rel_rmse(&w, &round_trip(&p, &w));
    assert!(searched < plain, "search {searched} vs plain {plain}");
}

#[test]
fn sizes_count_every_side_byte() {
    // 4096 values, 3 bits, groups of 64: 32 header + 64 groups x 2 + 1536 codes.
    let p = params(3, 6, Axis::Flat, 64, 0);
    assert_eq!(p.encoded_len(4096).unwrap(), 32 + 128 + 1536);
    // Columns over 256 rows x 64 with one raw row: 255 quantized rows -> 4 row groups.
    let p = params(3, 6, Axis::Columns, 64, 1);
    assert_eq!(p.group_count(16384).unwrap(), 4 * 64);
    assert_eq!(
        p.encoded_len(16384).unwrap(),
        32 + 128 + 256 * 2 + (16320 * 3usize).div_ceil(8)
    );
}

#[test]
fn bad_settings_and_inputs_are_typed_errors() {
    let x = vec![1.0f32; 100];
    assert!(matches!(
        encode(&params(9, 6, Axis::Flat, 10, 0), &x),
        Err(QuantError::InvalidBits { bits: 9 })
    ));
    assert!(matches!(
        encode(&params(3, 6, Axis::Columns, 64, 0), &x),
        Err(QuantError::CorruptField { field: "width", .. })
    ));
    assert!(matches!(
        encode(&params(3, 6, Axis::Flat, 10, 11), &x),
        Err(QuantError::CorruptField {
            field: "raw_rows",
            ..
        })
    ));
    let mut bad = x.clone();
    bad[7] = f32::NAN;
    assert!(matches!(
        encode(&params(3, 6, Axis::Flat, 10, 0), &bad),
        Err(QuantError::NonFinite { index: 7, .. })
    ));
    let mut big = x;
    big[2] = 1e6;
    assert!(matches!(
        encode(&params(3, 6, Axis::Flat, 10, 1), &big),
        Err(QuantError::OutOfRange { index: 2, .. })
    ));
}

/// Found by fuzzing (quant_segment_v2): values whose range is near f32's limit encoded to
/// units the parser refuses. Every segment `encode` returns must parse; such input is a
/// `ScaleOverflow` error instead.
#[test]
fn encode_never_writes_a_segment_the_parser_refuses() {
    for (lo, hi) in [(-1.5e38f32, 1.5e38f32), (-3.0e38, 1.0e30), (1.0, 3.4e38)] {
        let x: Vec<f32> = (0..256).map(|i| if i % 2 == 0 { lo } else { hi }).collect();
        for bits in [2u8, 3, 5, 8] {
            match encode(&params(bits, 6, Axis::Flat, 64, 0), &x) {
                Ok(b) => {
                    SegmentV2::parse(&b).unwrap();
                }
                Err(e) => assert!(matches!(e, QuantError::ScaleOverflow { .. }), "{e:?}"),
            }
        }
    }
}

#[test]
fn crafted_segments_are_refused_with_the_field() {
    let x = keys(64, 64);
    let good = encode(&params(5, 6, Axis::Columns, 64, 1), &x).unwrap();
    let cases: [(usize, u8, &str); 5] = [
        (BITS_OFFSET, 1, "bits"),
        (V2_AXIS_OFFSET, 2, "axis"),
        (V2_GROUP_LOG2_OFFSET, 11, "group_log2"),
        (V2_WIDTH_OFFSET, 0, "width"),
        (V2_RAW_ROWS_OFFSET, 65, "raw_rows"),
    ];
    for (off, v, field) in cases {
        let mut b = good.clone();
        b[off] = v;
        if off == V2_WIDTH_OFFSET {
            b[off + 1] = 0;
        }
        match SegmentV2::parse(&b) {
            Err(QuantError::CorruptField { field: f, .. }) => assert_eq!(f, field),
            Err(QuantError::InvalidBits { .. }) => assert_eq!(field, "bits"),
            other => panic!("{field}: {other:?}"),
        }
    }
    let mut b = good.clone();
    b[V2_SCALE_UNIT_OFFSET..V2_SCALE_UNIT_OFFSET + 4]
        .copy_from_slice(&f32::NAN.to_bits().to_le_bytes());
    assert!(matches!(
        SegmentV2::parse(&b),
        Err(QuantError::CorruptField {
            field: "scale_unit",
            ..
        })
    ));
    let mut b = good.clone();
    b[V2_MIN_UNIT_OFFSET..V2_MIN_UNIT_OFFSET + 4]
        .copy_from_slice(&(f32::MAX / 10.0).to_bits().to_le_bytes());
    assert!(matches!(
        SegmentV2::parse(&b),
        Err(QuantError::CorruptField { field: "units", .. })
    ));
    assert!(matches!(
        SegmentV2::parse(&good[..good.len() - 1]),
        Err(QuantError::Truncated { what: "codes", .. })
    ));
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(
        SegmentV2::parse(&long),
        Err(QuantError::TrailingBytes { .. })
    ));
    let mut v1 = good;
    v1[VERSION_OFFSET] = 1;
    assert!(matches!(
        SegmentV2::parse(&v1),
        Err(QuantError::UnsupportedVersion { version: 1, .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip_error_is_bounded(
        rows in 1usize..40,
        width in 1u16..40,
        bits in 2u8..=8,
        group_log2 in 2u8..=7,
        columns in any::<bool>(),
        raw in 0u16..2,
        search in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let n = rows * usize::from(width);
        let raw_rows = raw.min(rows as u16);
        let x: Vec<f32> = (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 20001) as f32 / 1000.0 - 10.0)
            .collect();
        let p = V2Params {
            bits,
            group_log2,
            axis: if columns { Axis::Columns } else { Axis::Flat },
            width,
            raw_rows,
            clip_search: search,
        };
        let bytes = encode(&p, &x).unwrap();
        prop_assert_eq!(bytes.len(), p.encoded_len(n).unwrap());
        let seg = SegmentV2::parse(&bytes).unwrap();
        let mut y = vec![0f32; n];
        seg.decode(&mut y).unwrap();
        // The range of any group is at most 20, so one step is at most 20/(2^bits-1) plus
        // the coding slack of one min step; a clipped value may be off by its clip.
        let step = 20.0 / f32::from((1u16 << bits) - 1);
        let bound = if search { 0.15 * 20.0 + step } else { step };
        for (a, b) in x.iter().zip(&y) {
            prop_assert!((a - b).abs() <= bound * 1.01 + 0.1, "{} vs {}", a, b);
        }
        let raw_vals = usize::from(raw_rows) * usize::from(width);
        for (a, b) in x[..raw_vals].iter().zip(&y[..raw_vals]) {
            prop_assert!((a - b).abs() <= a.abs() / 1024.0);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), patch in any::<bool>()) {
        let mut b = bytes;
        if patch && b.len() >= V2_HEADER_LEN {
            b[..8].copy_from_slice(&MAGIC);
            b[VERSION_OFFSET] = V2_VERSION;
        }
        if let Ok(seg) = SegmentV2::parse(&b) {
            let mut y = vec![0f32; seg.values()];
            seg.decode(&mut y).unwrap();
        }
    }
}
