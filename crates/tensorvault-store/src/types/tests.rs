//! Unit tests of `types.rs`.

use super::*;

fn meta() -> BlockMeta {
    BlockMeta {
        key: BlockKey::new(1, 0),
        shape: [0; MAX_NDIM],
        shape_ndim: 0,
        dtype: DType::F32,
        tier: Tier::Tier1,
        bits: 8,
        scale: 0.0,
        zero_point: 0,
        created_at: 0,
        last_access_at: 0,
        access_count: 0,
        ema_access_rate: 0.0,
        access_window: 1,
        checksum: 0,
        lineage_parent: 0,
        reconstruct: ReconstructPolicy::None,
        kind: TensorKind::Generic,
        tier_since: 0,
        data_offset: 0,
        data_len: 0,
        centre: None,
    }
}

#[test]
fn key_order_is_tensor_then_block() {
    let mut v = [
        BlockKey::new(2, 0),
        BlockKey::new(1, 5),
        BlockKey::new(1, 2),
        BlockKey::new(u128::MAX, 0),
    ];
    v.sort();
    assert_eq!(
        v,
        [
            BlockKey::new(1, 2),
            BlockKey::new(1, 5),
            BlockKey::new(2, 0),
            BlockKey::new(u128::MAX, 0)
        ]
    );
}

#[test]
fn tensor_id_is_stable_and_unambiguous() {
    let a = tensor_id("t", "c", "name", 0);
    assert_eq!(a, tensor_id("t", "c", "name", 0));
    assert_ne!(a, tensor_id("t", "cn", "ame", 0));
    assert_ne!(a, tensor_id("t", "c", "name", 1));
    // Pinned value: changing the derivation silently would orphan every stored block.
    let mut h = blake3::Hasher::new();
    for s in ["t", "c", "name"] {
        h.update(&(s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    }
    h.update(&[0u8; 16]);
    let d = h.finalize();
    assert_eq!(a.to_le_bytes(), d.as_bytes()[..16]);
}

#[test]
fn record_access_follows_the_adr() {
    let mut m = meta();
    m.record_access(0); // same tick
    assert_eq!(m.access_window, 1);
    assert_eq!(m.access_count, 1);
    assert!((m.ema_access_rate - 0.1).abs() < 1e-7);
    m.record_access(3);
    assert_eq!(m.access_window, 0b1001);
    assert!((m.ema_access_rate - (0.1 / 3.0 + 0.9 * 0.1)).abs() < 1e-6);
    assert_eq!(m.recent_access_density(), 2);
    m.record_access(3 + 64);
    assert_eq!(m.access_window, 1);
    assert_eq!(m.access_count, 3);
}

#[test]
fn migration_score_matches_formula() {
    let mut m = meta();
    m.ema_access_rate = 5.0;
    m.access_window = u64::MAX >> 32; // 32 of 64
    m.last_access_at = 100;
    let s = m.migration_score(100);
    let want = 0.7 * 5.0 * 1000.0 + 0.3 * 0.5 * 1000.0 / 10.0;
    assert!((s - want).abs() < 1e-2, "{s} vs {want}");
    // Age never divides by zero.
    assert!(m.migration_score(0).is_finite());
}

#[test]
fn migration_score_cools_down_without_accesses() {
    // Read every tick for 200 ticks: EMA near 1, full window.
    let mut m = meta();
    for t in 0..200 {
        m.record_access(t);
    }
    let hot = m.migration_score(199);
    assert!(hot > 512.0, "{hot}");
    // Unchanged statistics, later ticks: the score falls with the idle time.
    let after = |idle: u64| m.migration_score(199 + idle);
    assert!(
        after(10) < hot && after(30) < after(10),
        "{hot} {} {}",
        after(10),
        after(30)
    );
    assert!(after(40) < 32.0, "cold after 40 idle ticks: {}", after(40));
    // The window ages out: 64 idle ticks leave no recent access.
    let s = after(64);
    assert!((s - 0.7 * 1000.0 / 64.0).abs() < 1e-3, "{s}");
    // A block read every 20 ticks keeps its score between reads.
    let mut p = meta();
    for t in (0..2000).step_by(20) {
        p.record_access(t);
    }
    let at_read = 0.7 * p.ema_access_rate * 1000.0;
    let between = p.migration_score(1980 + 19);
    assert!(between >= at_read, "{between} vs {at_read}");
    // One read after a long pause does not make the once-hot block hot again.
    let mut again = m;
    again.record_access(199 + 500);
    assert!(again.ema_access_rate < 0.01, "{}", again.ema_access_rate);
    assert!(again.migration_score(199 + 500) < 32.0);
}
