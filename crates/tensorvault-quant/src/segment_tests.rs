//! Tests of the segment encoder and parser (a child module of `segment`).

use super::*;
use crate::groupwise::tests::signal;
use proptest::prelude::*;

fn seg_bytes() -> Vec<u8> {
    // 3 frames of 40 values, group 16: the third frame jumps and refits.
    let p = QuantParams::new(3, 16).unwrap();
    let mut x = signal(40, 1, 1.0);
    x.extend(signal(40, 1, 1.0).iter().map(|v| v * 1.05));
    x.extend(signal(40, 2, 4.0));
    let (b, r) = encode_frames(&p, &x, 40, 0.1).unwrap();
    assert_eq!(
        r.iter().map(|r| r.new_scale_set).collect::<Vec<_>>(),
        [true, false, true]
    );
    b
}

#[test]
fn layout_of_a_small_segment() {
    let b = seg_bytes();
    let groups = 3;
    assert_eq!(&b[..8], &MAGIC);
    assert_eq!(b[BITS_OFFSET], 3);
    assert_eq!(b[GROUP_LOG2_OFFSET], 4);
    assert_eq!(u32_at(&b, VALUES_PER_FRAME_OFFSET), 40);
    assert_eq!(u32_at(&b, FRAME_COUNT_OFFSET), 3);
    assert_eq!(u32_at(&b, SCALE_SET_COUNT_OFFSET), 2);
    assert_eq!(b[BITMAP_OFFSET], 0b101);
    assert_eq!(b.len(), HEADER_LEN + 1 + 2 * groups * 2 + 3 * 15);
    let s = Segment::parse(&b).unwrap();
    assert_eq!(
        (s.scale_set_of(0), s.scale_set_of(1), s.scale_set_of(2)),
        (Ok(0), Ok(0), Ok(1))
    );
}

#[test]
fn single_frames_decode_like_the_whole() {
    let b = seg_bytes();
    let s = Segment::parse(&b).unwrap();
    let mut all = vec![0f32; 120];
    s.decode_all(&mut all).unwrap();
    for i in 0..3 {
        let mut f = vec![0f32; 40];
        s.decode_frame(i, &mut f).unwrap();
        assert_eq!(f, all[i * 40..(i + 1) * 40]);
    }
    let mut f = vec![0f32; 40];
    assert_eq!(
        s.decode_frame(3, &mut f),
        Err(QuantError::FrameOutOfRange {
            index: 3,
            frames: 3
        })
    );
    assert!(matches!(
        s.decode_frame(0, &mut f[..39]),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        s.decode_all(&mut all[..119]),
        Err(QuantError::LengthMismatch { .. })
    ));
}

#[test]
fn reused_scales_clamp_and_count_growth() {
    let p = QuantParams::new(4, 16).unwrap();
    let a = vec![1.0f32; 16];
    let b = vec![1.08f32; 16]; // +8%: within 10%, reused; 1.08 * 7 = 7.56 clamps to 7
    let mut e = SegmentEncoder::new(p, 16).unwrap();
    assert!(e.push_frame(&a).unwrap().new_scale_set);
    let r = e.push_frame(&b).unwrap();
    assert!(!r.new_scale_set);
    assert_eq!(r.clamp.clamped, 16);
    assert!((r.clamp.max_clamp_error - 0.08).abs() < 1e-3);
    let r = e.push_frame(&[1.2f32; 16]).unwrap();
    assert!(r.new_scale_set);
    let mut e = SegmentEncoder::new(p, 16)
        .unwrap()
        .with_drift_tolerance(0.5)
        .unwrap();
    e.push_frame(&a).unwrap();
    let r = e.push_frame(&[1.2f32; 16]).unwrap();
    assert!(!r.new_scale_set);
    assert_eq!(r.clamp.clamped, 16);
    assert!((r.clamp.max_clamp_error - 0.2).abs() < 1e-3);
    assert!(SegmentEncoder::new(p, 16)
        .unwrap()
        .with_drift_tolerance(-0.1)
        .is_err());
    assert!(SegmentEncoder::new(p, 16)
        .unwrap()
        .with_drift_tolerance(f32::NAN)
        .is_err());
}

#[test]
fn encoder_errors_leave_it_usable() {
    let p = QuantParams::new(2, 16).unwrap();
    assert!(matches!(
        SegmentEncoder::new(p, 0),
        Err(QuantError::InvalidParam { .. })
    ));
    let mut e = SegmentEncoder::new(p, 16).unwrap();
    assert!(matches!(
        e.clone().finish(),
        Err(QuantError::InvalidParam { .. })
    ));
    assert!(matches!(
        e.push_frame(&[0.0; 15]),
        Err(QuantError::LengthMismatch { .. })
    ));
    let mut bad = [0.0f32; 16];
    bad[9] = f32::NAN;
    assert!(matches!(
        e.push_frame(&bad),
        Err(QuantError::NonFinite { index: 9, .. })
    ));
    assert!(matches!(
        e.push_frame(&[1.0e6; 16]),
        Err(QuantError::ScaleOverflow { .. })
    ));
    e.push_frame(&[1.0; 16]).unwrap();
    let b = e.finish().unwrap();
    assert_eq!(Segment::parse(&b).unwrap().frame_count(), 1);
    let mut x = vec![0.0f32; 48];
    x[40] = f32::INFINITY;
    assert!(matches!(
        encode_frames(&p, &x, 16, 0.1),
        Err(QuantError::NonFinite { index: 40, .. })
    ));
    assert!(matches!(
        encode_frames(&p, &x[..47], 16, 0.1),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        encode_tensor(&p, &[]),
        Err(QuantError::InvalidParam { .. })
    ));
}

fn with(b: &[u8], off: usize, v: &[u8]) -> Vec<u8> {
    let mut c = b.to_vec();
    c[off..off + v.len()].copy_from_slice(v);
    c
}

fn field_err(b: &[u8]) -> (&'static str, usize) {
    match Segment::parse(b) {
        Err(QuantError::CorruptField { field, offset, .. }) => (field, offset),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_header_field_is_checked() {
    let b = seg_bytes();
    assert!(matches!(
        Segment::parse(&b[..23]),
        Err(QuantError::Truncated { what: "header", .. })
    ));
    assert_eq!(
        Segment::parse(&with(&b, 4, b"\n")).unwrap_err(),
        QuantError::BadMagic
    );
    assert!(matches!(
        Segment::parse(&with(&b, 8, &[2])),
        Err(QuantError::UnsupportedVersion {
            version: 2,
            offset: 8
        })
    ));
    for bits in [0u8, 1, 9] {
        assert_eq!(
            field_err(&with(&b, BITS_OFFSET, &[bits])),
            ("bits", BITS_OFFSET)
        );
    }
    assert_eq!(
        field_err(&with(&b, FLAGS_OFFSET, &[2])),
        ("flags", FLAGS_OFFSET)
    );
    for g in [0u8, 3, 11, 255] {
        assert_eq!(
            field_err(&with(&b, GROUP_LOG2_OFFSET, &[g])),
            ("group_log2", GROUP_LOG2_OFFSET)
        );
    }
    assert_eq!(
        field_err(&with(&b, VALUES_PER_FRAME_OFFSET, &0u32.to_le_bytes())).0,
        "values_per_frame"
    );
    assert_eq!(
        field_err(&with(&b, FRAME_COUNT_OFFSET, &0u32.to_le_bytes())).0,
        "frame_count"
    );
    assert_eq!(
        field_err(&with(&b, SCALE_SET_COUNT_OFFSET, &0u32.to_le_bytes())).0,
        "scale_set_count"
    );
    assert_eq!(
        field_err(&with(&b, SCALE_SET_COUNT_OFFSET, &4u32.to_le_bytes())).0,
        "scale_set_count"
    );
    // The bitmap: frame 0 must start a set, padding bits clear, ones == scale sets.
    assert_eq!(
        field_err(&with(&b, BITMAP_OFFSET, &[0b100])),
        ("frame bitmap", BITMAP_OFFSET)
    );
    assert_eq!(
        field_err(&with(&b, BITMAP_OFFSET, &[0b1101])),
        ("frame bitmap", BITMAP_OFFSET)
    );
    assert_eq!(
        field_err(&with(&b, BITMAP_OFFSET, &[0b111])),
        ("frame bitmap", BITMAP_OFFSET)
    );
    // Scales: NaN and negative (symmetric).
    let scale0 = BITMAP_OFFSET + 1;
    assert!(matches!(
        Segment::parse(&with(&b, scale0 + 2, &0x7e00u16.to_le_bytes())),
        Err(QuantError::CorruptScale { index: 1, offset, .. }) if offset == scale0 + 2
    ));
    assert!(matches!(
        Segment::parse(&with(&b, scale0, &0xbc00u16.to_le_bytes())),
        Err(QuantError::CorruptScale { index: 0, .. })
    ));
    // Sizes against the bytes present.
    let mut longer = b.clone();
    longer.push(0);
    assert!(
        matches!(Segment::parse(&longer), Err(QuantError::TrailingBytes { present, .. }) if present == b.len() + 1)
    );
    assert!(matches!(
        Segment::parse(&b[..b.len() - 1]),
        Err(QuantError::Truncated { what: "codes", .. })
    ));
    assert!(matches!(
        Segment::parse(&b[..26]),
        Err(QuantError::Truncated { what: "scales", .. })
    ));
    // A header claiming 4 billion frames of 4 billion values in 30 bytes is an error,
    // not an allocation.
    let mut huge = with(&b, VALUES_PER_FRAME_OFFSET, &u32::MAX.to_le_bytes());
    huge = with(&huge, FRAME_COUNT_OFFSET, &u32::MAX.to_le_bytes());
    assert!(matches!(
        Segment::parse(&huge[..30]),
        Err(QuantError::Truncated {
            what: "frame bitmap",
            ..
        })
    ));
    let mut many = with(&b, FRAME_COUNT_OFFSET, &20u32.to_le_bytes());
    many.truncate(HEADER_LEN);
    assert!(matches!(
        Segment::parse(&many),
        Err(QuantError::Truncated {
            what: "frame bitmap",
            ..
        })
    ));
    Segment::parse(&b).unwrap();
}

#[test]
fn every_prefix_is_rejected_without_panic() {
    let b = seg_bytes();
    for n in 0..b.len() {
        assert!(Segment::parse(&b[..n]).is_err(), "prefix {n}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn segments_round_trip(
        bits in 2u8..=8, glog in 4u32..=7, n in 1usize..300, frames in 1usize..6,
        seed in any::<u64>(), full in any::<bool>(), drift in 0.0f32..0.3,
    ) {
        let levels = if full { Levels::Full } else { Levels::Symmetric };
        let p = QuantParams::new(bits, 1 << glog).unwrap().with_levels(levels);
        let mut x = Vec::new();
        for f in 0..frames {
            // Slowly growing amplitude so some frames reuse scales and some refit.
            x.extend(signal(n, seed ^ f as u64, 1.0 + 0.07 * f as f32));
        }
        let (b, reports) = encode_frames(&p, &x, n, drift).unwrap();
        let s = Segment::parse(&b).unwrap();
        prop_assert_eq!(s.params(), p);
        prop_assert_eq!((s.values_per_frame(), s.frame_count()), (n, frames));
        prop_assert_eq!(s.scale_set_count(), reports.iter().filter(|r| r.new_scale_set).count());
        let mut all = vec![0f32; x.len()];
        s.decode_all(&mut all).unwrap();
        // Frames that fitted their own scales decode like a standalone tensor.
        for (i, r) in reports.iter().enumerate() {
            let mut one = vec![0f32; n];
            s.decode_frame(i, &mut one).unwrap();
            prop_assert_eq!(&one[..], &all[i * n..(i + 1) * n]);
            if r.new_scale_set {
                let (t, _) = encode_tensor(&p, &x[i * n..(i + 1) * n]).unwrap();
                let mut alone = vec![0f32; n];
                Segment::parse(&t).unwrap().decode_frame(0, &mut alone).unwrap();
                prop_assert_eq!(one, alone);
            }
        }
    }

    #[test]
    fn corrupted_segments_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let mut b = seg_bytes();
        let len = b.len();
        for (i, v) in flips {
            b[i % len] ^= v;
        }
        if let Ok(s) = Segment::parse(&b) {
            let mut out = vec![0f32; s.values_per_frame()];
            for i in 0..s.frame_count() {
                s.decode_frame(i, &mut out).unwrap();
            }
        }
    }
}
