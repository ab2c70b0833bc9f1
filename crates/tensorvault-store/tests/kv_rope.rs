//! Pre-RoPE keys (a KV cache with a RoPE spec) and codec v4's per-kind key widths:
//! reads return post-RoPE keys, the spec persists in the MetaLog header (and a reopen
//! with another spec is refused), and codec v4 sizes tier slots for the wider kind.

mod mem;
use mem::{mem_store, resealed, Mem};

use half::f16;
use tensorvault_store::kv::{RopePairing, RopeSpec};
use tensorvault_store::meta_log::layout::{
    H_CODEC, H_FLAGS2, H_KEY_BITS, H_KEY_GROUP_SIZE, H_RESERVED, H_ROPE_DIMS, H_ROPE_PAIRING,
    H_ROPE_THETA,
};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{
    BlockInfo, CollectionConfig, DType, DirStore, Durability, KvAgePolicy, KvCache, KvKind, KvSlot,
    ManualClock, StoreConfig, StoreErr, TensorKind, Tier, CODEC_V4,
};

const HD: u32 = 64;

fn smollm_rope() -> RopeSpec {
    RopeSpec::new(100_000.0, HD as u16, RopePairing::Interleaved).unwrap()
}

/// A pre-RoPE key-like token: per-channel offsets and scales that do not depend on `t`
/// much (what makes pre-RoPE per-channel groups pay), f16-exact.
fn pre_key(t: u64) -> Vec<f16> {
    (0..HD)
        .map(|c| {
            let mag = if c % 7 == 0 { 6.0 } else { 1.0 };
            f16::from_f32(
                (c as f32 - 30.0) * 0.1 + mag * (0.3 + 0.2 * ((t as f32) * 0.37 + c as f32).sin()),
            )
        })
        .collect()
}

fn store(geo: CollectionConfig) -> Mem {
    mem_store("kv", geo)
}

fn post_rope(spec: &RopeSpec, pre: &[f16], first: u64) -> Vec<f32> {
    let mut x: Vec<f32> = pre.iter().map(|v| v.to_f32()).collect();
    spec.apply(&mut x, HD as usize, first).unwrap();
    x
}

fn rel_rmse(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let den: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
    (num / den).sqrt()
}

#[test]
fn reads_return_post_rope_keys_and_values_unrotated() {
    let spec = smollm_rope();
    let geo = CollectionConfig {
        rope: Some(spec),
        ..CollectionConfig::kv_cache(HD).unwrap()
    };
    let kv = KvCache::open(store(geo), HD, Some(spec)).unwrap();
    assert_eq!(kv.rope(), Some(spec));
    let (k, v) = (
        KvSlot::new(0, 0, KvKind::Key),
        KvSlot::new(0, 0, KvKind::Value),
    );
    let total = 600u64;
    let keys: Vec<f16> = (0..total).flat_map(pre_key).collect();
    for c in 0..total.div_ceil(100) {
        let r = (c * 100) as usize * HD as usize..((c + 1) * 100).min(total) as usize * HD as usize;
        kv.append_batch(&[(k, &keys[r.clone()]), (v, &keys[r])])
            .unwrap();
    }
    // Raw tiers: the read is RoPE of what was appended, rounded once to f16.
    for range in [0..total, 37..38, 250..520] {
        let back = kv.read(k, range.clone()).unwrap();
        let lo = range.start as usize * HD as usize;
        let hi = range.end as usize * HD as usize;
        let want = post_rope(&spec, &keys[lo..hi], range.start);
        let want16: Vec<f16> = want.iter().map(|x| f16::from_f32(*x)).collect();
        assert_eq!(back, want16, "{range:?}");
        // Values are not rotated.
        assert_eq!(kv.read(v, range).unwrap(), keys[lo..hi]);
    }
    // The stored block is pre-RoPE.
    let mut raw = Vec::new();
    kv.peek_block(k, 1, &mut raw).unwrap();
    assert_eq!(raw[..], keys[256 * HD as usize..512 * HD as usize]);
    // Demoted to 3 bits, reads stay post-RoPE and close.
    let policy = KvAgePolicy {
        tier0_tokens: 0,
        tier1_tokens: 0,
        tier2_tokens: 0,
    };
    assert_eq!(kv.demote_by_age(&policy).unwrap(), [0, 0, 0, 4]);
    let back: Vec<f32> = kv
        .read(k, 0..512)
        .unwrap()
        .iter()
        .map(|x| x.to_f32())
        .collect();
    let want = post_rope(&spec, &keys[..512 * HD as usize], 0);
    let e = rel_rmse(&want, &back);
    assert!(e > 0.0 && e < 0.05, "tier-3 pre-RoPE keys: {e}");
}

#[test]
fn the_spec_persists_and_a_different_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = smollm_rope();
    let cfg = |rope| StoreConfig {
        collection: CollectionConfig {
            rope,
            ..CollectionConfig::kv_cache(HD).unwrap()
        },
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    let open = |rope, create| {
        DirStore::open_dir(dir.path(), "t", "c", ManualClock::new(1), cfg(rope), create).unwrap()
    };
    let slot = KvSlot::new(2, 1, KvKind::Key);
    let keys: Vec<f16> = (0..300).flat_map(pre_key).collect();
    {
        let kv = KvCache::open(open(Some(spec), true), HD, Some(spec)).unwrap();
        kv.append(slot, &keys).unwrap();
        kv.into_store().close().unwrap();
    }
    // Reopen with the same spec: reads rotate as before (block 1 is the raw tail).
    let kv = KvCache::open(open(Some(spec), false), HD, Some(spec)).unwrap();
    let back = kv.read(slot, 290..300).unwrap();
    let want = post_rope(&spec, &keys[290 * 64..], 290);
    assert_eq!(
        back,
        want.iter().map(|x| f16::from_f32(*x)).collect::<Vec<_>>()
    );
    kv.into_store().close().unwrap();
    // `new` follows the persisted spec.
    let kv = KvCache::new(open(None, false), HD).unwrap();
    assert_eq!(kv.rope(), Some(spec));
    kv.into_store().close().unwrap();
    // Another spec, or none, is a typed error naming both.
    let other = RopeSpec::new(10_000.0, 64, RopePairing::Neox).unwrap();
    for want in [Some(other), None] {
        match KvCache::open(open(want, false), HD, want) {
            Err(StoreErr::RopeMismatch { stored, requested }) => {
                assert_eq!((stored, requested), (Some(spec), want));
            }
            Err(e) => panic!("expected RopeMismatch, got {e}"),
            Ok(_) => panic!("expected RopeMismatch, got a cache"),
        }
    }
    let e = KvCache::open(open(None, false), HD, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("pre-RoPE keys (theta 100000, 64 rotary dims, interleaved)"),
        "{e}"
    );
    // A rotary width beyond head_dim is refused at open.
    let wide = RopeSpec::new(1e4, 128, RopePairing::Neox).unwrap();
    let geo = CollectionConfig {
        rope: Some(wide),
        ..CollectionConfig::kv_cache(HD).unwrap()
    };
    let e = KvCache::open(store(geo), HD, Some(wide)).err().unwrap();
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "rope.rotary_dims",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn header_bytes_of_rope_and_key_widths() {
    let spec = smollm_rope();
    let c = CollectionConfig {
        rope: Some(spec),
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    };
    c.validate().unwrap();
    let h = encode_header(&c, 7);
    assert_eq!((h[H_CODEC], H_CODEC), (CODEC_V4, 48));
    assert_eq!((&h[52..55], H_KEY_BITS), (&[8u8, 5, 4][..], 52));
    assert_eq!((h[55], H_ROPE_PAIRING), (2, 55));
    assert_eq!((&h[56..58], H_ROPE_DIMS), (&64u16.to_le_bytes()[..], 56));
    assert_eq!(H_KEY_GROUP_SIZE, 58);
    for i in 0..3 {
        assert_eq!(&h[58 + 4 * i..62 + 4 * i], &128u32.to_le_bytes());
    }
    assert_eq!(
        (&h[70..78], H_ROPE_THETA),
        (&100_000f64.to_le_bytes()[..], 70)
    );
    assert_eq!((H_FLAGS2, H_RESERVED), (78, 79));
    assert!(h[78..120].iter().all(|&b| b == 0));
    assert_eq!(decode_header(&h).unwrap(), (c, 7));
    // A codec v2 header without RoPE keeps these bytes zero (what older builds wrote).
    let old = encode_header(&CollectionConfig::kv_cache(HD).unwrap(), 0);
    assert!(old[52..120].iter().all(|&b| b == 0));
}

fn reseal(mut h: [u8; 128], at: usize, v: &[u8]) -> [u8; 128] {
    h[at..at + v.len()].copy_from_slice(v);
    resealed(h)
}

fn rejected(b: &[u8; 128], field: &str, at: usize) {
    match decode_header(b) {
        Err(StoreErr::BadHeader {
            field: f, offset, ..
        }) => {
            assert_eq!((f, offset), (field, at as u64));
        }
        other => panic!("expected BadHeader {field}, got {other:?}"),
    }
}

#[test]
fn crafted_headers_are_refused_naming_the_field() {
    let spec = smollm_rope();
    let c = CollectionConfig {
        rope: Some(spec),
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    };
    let h = encode_header(&c, 0);
    rejected(
        &reseal(h, H_ROPE_PAIRING, &[3]),
        "rope_pairing",
        H_ROPE_PAIRING,
    );
    rejected(
        &reseal(h, H_ROPE_DIMS, &63u16.to_le_bytes()),
        "rope.rotary_dims",
        H_ROPE_DIMS,
    );
    rejected(
        &reseal(h, H_ROPE_DIMS, &0u16.to_le_bytes()),
        "rope.rotary_dims",
        H_ROPE_DIMS,
    );
    rejected(
        &reseal(h, H_ROPE_THETA, &f64::NAN.to_le_bytes()),
        "rope.theta",
        H_ROPE_THETA,
    );
    rejected(
        &reseal(h, H_ROPE_THETA, &0.5f64.to_le_bytes()),
        "rope.theta",
        H_ROPE_THETA,
    );
    // Dims or theta without a pairing.
    let plain = encode_header(&CollectionConfig::kv_cache(HD).unwrap(), 0);
    rejected(
        &reseal(plain, H_ROPE_DIMS, &64u16.to_le_bytes()),
        "rope",
        H_ROPE_DIMS,
    );
    rejected(
        &reseal(plain, H_ROPE_THETA, &1e4f64.to_le_bytes()),
        "rope",
        H_ROPE_THETA,
    );
    // Key widths: out of range in codec v4, present in codec v2.
    rejected(
        &reseal(h, H_KEY_BITS + 2, &[9]),
        "key_bits/key_group_size",
        H_KEY_BITS,
    );
    rejected(
        &reseal(h, H_KEY_GROUP_SIZE, &48u32.to_le_bytes()),
        "key_bits/key_group_size",
        H_KEY_BITS,
    );
    rejected(
        &reseal(plain, H_KEY_BITS, &[4]),
        "key_bits/key_group_size",
        H_KEY_BITS,
    );
    // Codec v4 without key widths is a collection whose keys use the tier widths (e.g.
    // weights, tests/codec_v4_weights.rs); one of the two key fields alone is refused.
    let (v4, _) = decode_header(&reseal(plain, H_CODEC, &[CODEC_V4])).unwrap();
    assert_eq!(v4.bits_for(Tier::Tier3, TensorKind::KvKey), Some(3));
    assert!(!v4.per_kind_keys() && c.per_kind_keys());
    let v4_plain = reseal(plain, H_CODEC, &[CODEC_V4]);
    rejected(
        &reseal(v4_plain, H_KEY_BITS, &[4, 4, 4]),
        "key_bits/key_group_size",
        H_KEY_BITS,
    );
    rejected(&reseal(h, H_RESERVED, &[1]), "reserved", H_RESERVED);
}

#[test]
fn codec_v4_keys_and_values_use_their_own_widths() {
    let geo = CollectionConfig::kv_cache(HD).unwrap().with_codec_v4();
    // Tier 3's slot fits a 4-bit key segment (the wider kind): header, the sink row
    // in f16, 16384 / 128 groups of 2 bytes (the bound counts every value), 4-bit codes.
    let keys_len = 32 + 64 * 2 + 16384 / 128 * 2 + 16384 * 4 / 8;
    assert_eq!(geo.max_payload_len(Tier::Tier3), keys_len as u64);
    assert_eq!(geo.bits_for(Tier::Tier3, TensorKind::KvKey), Some(4));
    assert_eq!(geo.bits_for(Tier::Tier3, TensorKind::KvValue), Some(3));
    assert_eq!(geo.bits_for(Tier::Tier0, TensorKind::KvKey), None);
    let s = store(geo);
    let tokens = 256u32;
    let vals: Vec<f16> = (0..u64::from(tokens)).flat_map(pre_key).collect();
    let data: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut err = Vec::new();
    for (name, kind, bits) in [("k", TensorKind::KvKey, 4), ("v", TensorKind::KvValue, 3)] {
        let shape = [tokens, HD];
        let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
        s.put_tensor_with(name, &info, &data, Tier::Tier3).unwrap();
        let m = s
            .blocks()
            .unwrap()
            .into_iter()
            .find(|m| m.key.tensor_id == s.tensor_id_of(name))
            .unwrap();
        assert_eq!((m.bits, m.tier), (bits, Tier::Tier3), "{name}");
        let back: Vec<f32> = s
            .get_tensor(name)
            .unwrap()
            .data
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        err.push(rel_rmse(
            &vals.iter().map(|x| x.to_f32()).collect::<Vec<_>>(),
            &back,
        ));
    }
    // 4-bit per-channel keys beat 3-bit per-token values on the same data.
    assert!(err[0] < err[1] * 0.6, "{err:?}");
    // Values at tier 3 are rotated per token (TQTC version 3: one scale byte per token,
    // 2 bytes of min/scale per 64 values in v2): header + sink row + 255 scale bytes +
    // 255 x 64 x 3 / 8 code bytes.
    let v = s
        .meta(&tensorvault_store::BlockKey::new(s.tensor_id_of("v"), 0))
        .unwrap()
        .unwrap();
    let k = s
        .meta(&tensorvault_store::BlockKey::new(s.tensor_id_of("k"), 0))
        .unwrap()
        .unwrap();
    assert_eq!(k.data_len, 32 + 128 + 2 * 2 * 64 + 255 * 64 / 2);
    let v2_len = 32 + 128 + 255 * 2 + 255 * 64 * 3 / 8;
    assert!(v.data_len < v2_len, "{} vs v2 {v2_len}", v.data_len);
    // Key widths outside codec v4 are refused.
    let bad = CollectionConfig {
        key_bits: [8, 5, 4],
        ..CollectionConfig::kv_cache(HD).unwrap()
    };
    let e = bad.validate().unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "key_bits/key_group_size",
                ..
            }
        ),
        "{e}"
    );
}
