//! The KV prefix cache (issue 24): round trips, prefix semantics, model isolation and
//! mismatch, budget eviction order, damaged chunks, bad inputs, tiers by idle time,
//! several processes and a process killed mid-store.

use std::path::Path;

use half::f16;
use tensorvault_store::prefix::{AgeTiers, KvData, LoadedKv, PrefixConfig};
use tensorvault_store::{ManualClock, PrefixCache, StoreErr, Tier};

const L: u32 = 2;
const H: u32 = 2;
const D: u32 = 8;

/// A value that depends only on where it is and which token is there, so the same
/// prefix always produces the same KV (as a real model would).
fn val(kind: u32, layer: u32, head: u32, pos: usize, tok: u32, d: u32) -> f32 {
    let x = (kind * 7919 + layer * 131 + head * 17 + d) as f32;
    ((x * 0.37 + pos as f32 * 0.011 + tok as f32 * 0.13).sin() * 4.0).round() / 8.0
}

fn kv(tokens: &[u32]) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    let t = tokens.len();
    let mk = |kind| {
        (0..L)
            .map(|l| {
                let mut v = Vec::with_capacity((H * D) as usize * t);
                for h in 0..H {
                    for (p, &tok) in tokens.iter().enumerate() {
                        v.extend((0..D).map(|d| f16::from_f32(val(kind, l, h, p, tok, d))));
                    }
                }
                v
            })
            .collect::<Vec<_>>()
    };
    (mk(0), mk(1))
}

fn views(a: &[Vec<f16>]) -> Vec<KvData<'_>> {
    a.iter().map(|v| KvData::F16(v)).collect()
}

fn cfg(chunk: u32) -> PrefixConfig {
    PrefixConfig {
        chunk_tokens: chunk,
        ..PrefixConfig::default()
    }
}

fn open(root: &Path, model: &str, chunk: u32) -> PrefixCache<ManualClock> {
    PrefixCache::open_with_clock(root, model, L, H, D, cfg(chunk), ManualClock::new(1000)).unwrap()
}

fn store(c: &PrefixCache<ManualClock>, tokens: &[u32]) -> u64 {
    let (k, v) = kv(tokens);
    c.store(tokens, &views(&k), &views(&v)).unwrap()
}

/// The expected KV of the first `n` tokens, cut out of the full arrays.
fn expect(tokens: &[u32], n: usize) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    kv(&tokens[..n])
}

fn assert_exact(got: &LoadedKv, tokens: &[u32], n: usize) {
    assert_eq!(got.tokens, n);
    let (k, v) = expect(tokens, n);
    assert_eq!(got.keys, k);
    assert_eq!(got.values, v);
}

fn toks(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ salt)
        .collect()
}

#[test]
fn tier0_round_trip_is_exact_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let t = toks(70, 1);
    {
        let c = open(dir.path(), "model-a", 16);
        assert_eq!(c.lookup(&t).unwrap(), 0);
        assert_eq!(store(&c, &t), 64); // 4 full chunks; the 6 trailing tokens are not kept
        assert_eq!(store(&c, &t), 0); // already there
        assert_eq!(c.lookup(&t).unwrap(), 64);
        assert_exact(&c.load(&t, None).unwrap(), &t, 64);
        assert_exact(&c.load(&t, Some(40)).unwrap(), &t, 40);
        let s = c.stats().unwrap();
        assert_eq!((s.chunks, s.tokens, s.stored_chunks), (4, 64, 4));
        assert_eq!(s.tier_chunks, [4, 0, 0, 0]);
        assert_eq!(s.stored_bytes, s.f16_bytes);
        let e = c.load(&t, Some(65)).unwrap_err();
        assert!(
            matches!(e, StoreErr::InvalidArgument { field: "n", .. }),
            "{e}"
        );
        c.close().unwrap();
    }
    let c = open(dir.path(), "model-a", 16);
    assert_eq!(c.lookup(&t).unwrap(), 64);
    assert_exact(&c.load(&t, None).unwrap(), &t, 64);
    // A longer prompt with the same start reuses the stored chunks and adds one.
    let mut longer = t.clone();
    longer.extend(toks(30, 9));
    assert_eq!(c.lookup(&longer).unwrap(), 64);
    assert_eq!(store(&c, &longer), 32);
    assert_eq!(c.lookup(&longer).unwrap(), 96);
    assert_exact(&c.load(&longer, None).unwrap(), &longer, 96);
}

#[test]
fn f32_input_is_stored_as_f16_rounded_to_nearest() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), "m", 4);
    let t = toks(4, 3);
    let n = (H * 4 * D) as usize;
    let k32: Vec<Vec<f32>> = (0..L)
        .map(|l| (0..n).map(|i| (i as f32 + l as f32) / 3.0).collect())
        .collect();
    let kd: Vec<KvData> = k32.iter().map(|v| KvData::F32(v)).collect();
    c.store(&t, &kd, &kd).unwrap();
    let got = c.load(&t, None).unwrap();
    for (l, k) in k32.iter().enumerate() {
        let want: Vec<f16> = k.iter().map(|x| f16::from_f32(*x)).collect();
        assert_eq!(got.keys[l], want);
        assert_eq!(
            got.values_f32(l).unwrap(),
            want.iter().map(|x| x.to_f32()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_changed_token_finds_only_the_chunks_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), "m", 8);
    let t = toks(64, 5);
    store(&c, &t);
    for p in [0usize, 1, 7, 8, 9, 33, 63] {
        let mut u = t.clone();
        u[p] ^= 0x5555;
        assert_eq!(
            c.lookup(&u).unwrap(),
            (p / 8 * 8) as u64,
            "changed token {p}"
        );
        let got = c.load(&u, None).unwrap();
        assert_eq!(got.tokens, p / 8 * 8);
    }
    // Same chunk contents at another place in the prompt are a different chunk.
    let shifted: Vec<u32> = t[8..].to_vec();
    assert_eq!(c.lookup(&shifted).unwrap(), 0);
    let s = c.stats().unwrap();
    assert!(s.miss_chunks > 0 && s.hit_chunks > 0);
}

#[test]
fn models_are_isolated_and_a_geometry_mismatch_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let t = toks(32, 7);
    {
        let a = open(dir.path(), "model-a", 16);
        store(&a, &t);
        let b = open(dir.path(), "model-b", 16);
        assert_eq!(b.lookup(&t).unwrap(), 0);
        b.close().unwrap();
        a.close().unwrap();
    }
    let err = |layers, heads, dim, chunk| {
        PrefixCache::open_with_clock(
            dir.path(),
            "model-a",
            layers,
            heads,
            dim,
            cfg(chunk),
            ManualClock::new(0),
        )
        .err()
        .expect("mismatch must fail")
    };
    for (e, field) in [
        (err(L + 1, H, D, 16), "layers"),
        (err(L, H + 1, D, 16), "kv_heads"),
        (err(L, H, D * 2, 16), "head_dim"),
        (err(L, H, D, 32), "chunk_tokens"),
    ] {
        assert!(
            matches!(&e, StoreErr::ModelMismatch { field: f, .. } if *f == field),
            "{e}"
        );
    }
    let e = err(0, H, D, 16);
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "layers",
                ..
            }
        ),
        "{e}"
    );
    let e = PrefixCache::open(dir.path(), "", L, H, D, cfg(16))
        .err()
        .unwrap();
    assert!(
        matches!(e, StoreErr::InvalidArgument { field: "model", .. }),
        "{e}"
    );
}

#[test]
fn bad_inputs_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), "m", 4);
    let t = toks(8, 1);
    let (k, v) = kv(&t);
    let e = c.store(&t, &views(&k[..1]), &views(&v)).unwrap_err();
    assert!(
        matches!(e, StoreErr::InvalidArgument { field: "keys", .. }),
        "{e}"
    );
    let e = c.store(&t[..7], &views(&k), &views(&v)).unwrap_err();
    assert!(
        matches!(e, StoreErr::InvalidArgument { field: "keys", .. }),
        "{e}"
    );
    let mut bad = v.clone();
    // layer 1, head 1, token 5, channel 3
    bad[1][((8 + 5) * D + 3) as usize] = f16::NAN;
    let e = c.store(&t, &views(&k), &views(&bad)).unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::NonFiniteKv {
                field: "values",
                layer: 1,
                head: 1,
                token: 5
            }
        ),
        "{e}"
    );
    bad[1][0] = f16::INFINITY;
    assert!(matches!(
        c.store(&t, &views(&k), &views(&bad)).unwrap_err(),
        StoreErr::NonFiniteKv {
            token: 0,
            head: 0,
            ..
        }
    ));
    // An f32 beyond f16's range would be stored as infinity: refused the same way.
    let mut big: Vec<Vec<f32>> = k
        .iter()
        .map(|l| l.iter().map(|x| x.to_f32()).collect())
        .collect();
    big[1][((8 + 6) * D) as usize] = 70_000.0;
    let kd: Vec<KvData> = big.iter().map(|x| KvData::F32(x)).collect();
    assert!(matches!(
        c.store(&t, &kd, &views(&v)).unwrap_err(),
        StoreErr::NonFiniteKv {
            field: "keys",
            layer: 1,
            head: 1,
            token: 6
        }
    ));
    assert_eq!(
        c.stats().unwrap().chunks,
        0,
        "nothing stored from a refused call"
    );
}

#[test]
fn budget_evicts_least_recently_used_suffixes_first() {
    let dir = tempfile::tempdir().unwrap();
    let chunk_bytes = u64::from(2 * L * H * 4 * D * 2);
    let clock = ManualClock::new(100);
    let mut pc = cfg(4);
    pc.budget_bytes = Some(5 * chunk_bytes);
    let c = PrefixCache::open_with_clock(dir.path(), "m", L, H, D, pc, clock).unwrap();
    let a = toks(12, 1); // 3 chunks
    let b = toks(8, 2); // 2 chunks
    store(&c, &a);
    c.clock().advance(10);
    store(&c, &b);
    c.clock().advance(10);
    // Use prompt a: it becomes the most recently used.
    assert_eq!(c.load(&a, None).unwrap().tokens, 12);
    c.clock().advance(10);
    assert_eq!(c.stats().unwrap().chunks, 5);
    // One more chunk: over budget by one: b's last chunk (the LRU leaf) goes.
    let d = toks(4, 3);
    store(&c, &d);
    assert_eq!(c.lookup(&b).unwrap(), 4);
    assert_eq!(c.lookup(&a).unwrap(), 12);
    assert_eq!(c.lookup(&d).unwrap(), 4);
    // Two more: b's first chunk (now a leaf, still the LRU) then a's suffix end.
    c.clock().advance(10);
    store(&c, &toks(8, 4));
    assert_eq!(c.lookup(&b).unwrap(), 0);
    assert_eq!(
        c.lookup(&a).unwrap(),
        8,
        "a's last chunk goes before its prefix"
    );
    let s = c.stats().unwrap();
    assert_eq!(s.chunks, 5);
    assert!(s.stored_bytes <= 5 * chunk_bytes);
    assert_eq!(s.evicted_chunks, 3);
}

#[test]
fn a_flipped_byte_is_a_miss_never_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let t = toks(32, 11);
    let c = open(dir.path(), "m", 8);
    store(&c, &t);
    // Damage chunk 2 (tokens 16..24): flip one byte of its block 3's slot.
    let chunk2 = {
        let ids = tensorvault_store::prefix::chain::chunk_ids("m", 8, &t);
        let (id, parent) = ids[2];
        c.tensor_store()
            .unwrap()
            .tensor_id_of(&tensorvault_store::prefix::chain::chunk_name(id, parent))
    };
    let meta = c
        .tensor_store()
        .unwrap()
        .meta(&tensorvault_store::BlockKey::new(chunk2, 3))
        .unwrap()
        .unwrap();
    c.close().unwrap();
    let coll = tensorvault_store::prefix::collection_name("m");
    let file = dir
        .path()
        .join("prefix")
        .join(coll)
        .join(meta.tier.file_name());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[meta.data_offset as usize + 5] ^= 0x40;
    std::fs::write(&file, bytes).unwrap();

    let c = open(dir.path(), "m", 8);
    assert_eq!(c.lookup(&t).unwrap(), 32, "lookup reads no KV data");
    let got = c.load(&t, None).unwrap();
    assert_exact(&got, &t, 16);
    let s = c.stats().unwrap();
    assert_eq!(s.damaged_chunks, 1);
    // The damaged chunk and the one after it are gone; storing again repairs them.
    assert_eq!(c.lookup(&t).unwrap(), 16);
    assert_eq!(store(&c, &t), 16);
    assert_exact(&c.load(&t, None).unwrap(), &t, 32);
}

#[test]
fn read_only_caches_share_and_refuse_writes() {
    let dir = tempfile::tempdir().unwrap();
    let t = toks(16, 2);
    {
        let c = open(dir.path(), "m", 8);
        store(&c, &t);
        c.close().unwrap();
    }
    let ro = || {
        let mut pc = cfg(8);
        pc.read_only = true;
        PrefixCache::open(dir.path(), "m", L, H, D, pc).unwrap()
    };
    let (r1, r2) = (ro(), ro());
    assert_eq!(r1.lookup(&t).unwrap(), 16);
    assert_exact(&r2.load(&t, None).unwrap(), &t, 16);
    let (k, v) = kv(&t);
    assert!(matches!(
        r1.store(&t, &views(&k), &views(&v)).unwrap_err(),
        StoreErr::ReadOnly { op: "store" }
    ));
    assert!(matches!(
        r1.maintain().unwrap_err(),
        StoreErr::ReadOnly { .. }
    ));
    let mut pc = cfg(8);
    pc.read_only = true;
    let e = PrefixCache::open(dir.path(), "never-stored", L, H, D, pc)
        .err()
        .unwrap();
    assert!(matches!(e, StoreErr::CollectionNotFound { .. }), "{e}");
}

#[test]
fn maintain_demotes_idle_chunks_and_loads_stay_close() {
    let dir = tempfile::tempdir().unwrap();
    let (l, h, d, chunk) = (2u32, 1u32, 64u32, 128u32);
    let mut pc = cfg(chunk);
    pc.age_tiers = AgeTiers {
        tier0: 10,
        tier1: 10,
        tier2: 10,
    };
    let c =
        PrefixCache::open_with_clock(dir.path(), "q", l, h, d, pc, ManualClock::new(50)).unwrap();
    let t = toks(256, 4);
    let n = (h * 256 * d) as usize;
    let mk = |s: f32| -> Vec<Vec<f32>> {
        (0..l)
            .map(|li| {
                (0..n)
                    .map(|i| ((i as f32 * 0.013 + li as f32 + s).sin()) * 2.0)
                    .collect()
            })
            .collect()
    };
    let (k32, v32) = (mk(0.0), mk(1.0));
    let kd: Vec<KvData> = k32.iter().map(|v| KvData::F32(v)).collect();
    let vd: Vec<KvData> = v32.iter().map(|v| KvData::F32(v)).collect();
    assert_eq!(c.store(&t, &kd, &vd).unwrap(), 256);
    let f16_bytes = c.stats().unwrap().f16_bytes;
    let mut errs = Vec::new();
    // Each load is a use, so the idle time counts from it: 10, then 20, then 30 ticks.
    for (advance, tier) in [(10, Tier::Tier1), (20, Tier::Tier2), (30, Tier::Tier3)] {
        c.clock().advance(advance);
        let r = c.maintain().unwrap();
        assert_eq!(r.demoted[tier.index()], 2, "{tier}");
        let s = c.stats().unwrap();
        assert_eq!(s.tier_chunks[tier.index()], 2);
        assert!(s.stored_bytes < f16_bytes);
        let got = c.load(&t, None).unwrap();
        assert_eq!(got.tokens, 256);
        let mut err = 0.0f32;
        for li in 0..l as usize {
            for (want, got) in [
                (&k32[li], got.keys_f32(li).unwrap()),
                (&v32[li], got.values_f32(li).unwrap()),
            ] {
                for (a, b) in want.iter().zip(got) {
                    err = err.max((a - b).abs());
                }
            }
        }
        errs.push(err);
    }
    // Values in [-2, 2]: 8 bits within 0.03, 5 within 0.2, 3 within 0.8; colder is worse.
    assert!(errs[0] < 0.03 && errs[1] < 0.2 && errs[2] < 0.8, "{errs:?}");
    assert!(errs[0] < errs[1] && errs[1] < errs[2], "{errs:?}");
    assert_eq!(c.stats().unwrap().tier_chunks, [0, 0, 0, 2]);
    assert_eq!(
        c.maintain().unwrap(),
        tensorvault_store::prefix::PrefixMaintainReport::default()
    );
}

#[test]
fn verify_reports_damage_without_touching_access_and_drops_it_when_writable() {
    let dir = tempfile::tempdir().unwrap();
    let t = toks(32, 21);
    let ids = tensorvault_store::prefix::chain::chunk_ids("m", 8, &t);
    let c = open(dir.path(), "m", 8);
    store(&c, &t);
    let tid =
        c.tensor_store()
            .unwrap()
            .tensor_id_of(&tensorvault_store::prefix::chain::chunk_name(
                ids[1].0, ids[1].1,
            ));
    let meta = c
        .tensor_store()
        .unwrap()
        .meta(&tensorvault_store::BlockKey::new(tid, 5))
        .unwrap()
        .unwrap();
    let clean = c.verify().unwrap();
    assert_eq!(
        (clean.chunks, clean.blocks, clean.dropped),
        (4, 4 * 2 * u64::from(L * H), 0)
    );
    assert!(clean.damaged.is_empty());
    c.close().unwrap();
    let coll = tensorvault_store::prefix::collection_name("m");
    let file = dir
        .path()
        .join("prefix")
        .join(coll)
        .join(meta.tier.file_name());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[meta.data_offset as usize] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();

    let mut pc = cfg(8);
    pc.read_only = true;
    let ro = PrefixCache::open(dir.path(), "m", L, H, D, pc).unwrap();
    let r = ro.verify().unwrap();
    assert_eq!((r.damaged.clone(), r.dropped), (vec![ids[1].0], 0));
    assert_eq!(
        ro.lookup(&t).unwrap(),
        32,
        "read-only: reported, not dropped"
    );
    let before = ro
        .tensor_store()
        .unwrap()
        .meta(&tensorvault_store::BlockKey::new(tid, 0))
        .unwrap()
        .unwrap();
    ro.verify().unwrap();
    let after = ro
        .tensor_store()
        .unwrap()
        .meta(&tensorvault_store::BlockKey::new(tid, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        before.access_count, after.access_count,
        "verify is not an access"
    );
    drop(ro);

    let c = open(dir.path(), "m", 8);
    let r = c.verify().unwrap();
    assert_eq!(
        (r.damaged.len(), r.dropped),
        (1, 3),
        "chunk 1 and the two after it"
    );
    assert_eq!(c.lookup(&t).unwrap(), 8);
    assert_exact(&c.load(&t, None).unwrap(), &t, 8);
    let s = c.stats().unwrap();
    assert_eq!((s.damaged_chunks, s.evicted_chunks, s.chunks), (1, 3, 1));
}
