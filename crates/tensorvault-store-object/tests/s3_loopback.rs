//! The object-store backend against a real S3 API (moto_server on loopback): round
//! trips, reopen, the local cache, conditional-put conflicts between two writers, and
//! objects deleted or damaged behind the store's back.

mod common;

use bytes::Bytes;
use common::{block_on, client, f32_bytes, location, open, server_or_skip};
use object_store::path::Path as OsPath;
use object_store::ObjectStore;
use tensorvault_store::{DType, Durability, StoreConfig, StoreErr, Tier};
use tensorvault_store_object::manifest::Layout;
use tensorvault_store_object::{
    block_location, is_conflict, object_err, requests, ObjectErr, ObjectOptions, MANIFEST,
};

const N: usize = 3 * 4096 + 100; // four blocks, the last one short

#[test]
fn round_trip_reopen_and_cache_objects() {
    round_trip(Layout::Objects, "blocks");
}

#[test]
fn round_trip_reopen_and_cache_packs() {
    round_trip(Layout::Packs, "packs");
}

fn round_trip(layout: Layout, blocks_dir: &str) {
    let test = format!("round_trip_reopen_and_cache ({layout:?})");
    let Some(srv) = server_or_skip(&test, None) else {
        return;
    };
    let loc = location(&srv, "round-trip");
    let cache = tempfile::tempdir().unwrap();
    let opts = ObjectOptions {
        cache_dir: Some(cache.path().to_owned()),
        layout,
        ..srv.options()
    };
    let a = f32_bytes(N, 1);
    let b = f32_bytes(5000, 2);
    {
        let s = open(&srv, &loc, "emb", &opts, StoreConfig::default()).unwrap();
        s.put_tensor("a", DType::F32, &[N as u32], &a, Tier::Tier0)
            .unwrap();
        s.put_tensor("b", DType::F32, &[50, 100], &b, Tier::Tier1)
            .unwrap();
        assert_eq!(s.get_tensor("a").unwrap().data, a);
        s.close().unwrap();
    }
    // Reopen without a cache: everything comes from the object store.
    let plain = ObjectOptions {
        create: false,
        ..srv.options()
    };
    let s = open(&srv, &loc, "emb", &plain, StoreConfig::default()).unwrap();
    let opened = requests(&s);
    let segments = s.block_io().collection().manifest().segments.len() as u64;
    assert_eq!(
        opened.gets,
        3 + segments,
        "manifest + snapshot + names + segments: {opened:?}"
    );
    assert_eq!(s.get_tensor("a").unwrap().data, a);
    let r = requests(&s);
    assert_eq!(r.gets - opened.gets, 4, "one GET per block");
    let got = s.get_tensor("b").unwrap();
    assert_eq!(got.info.shape, vec![50, 100]);
    let max_err = got
        .data
        .chunks_exact(4)
        .zip(b.chunks_exact(4))
        .map(|(x, y)| {
            let x = f32::from_le_bytes(x.try_into().unwrap());
            let y = f32::from_le_bytes(y.try_into().unwrap());
            (x - y).abs()
        })
        .fold(0f32, f32::max);
    assert!(max_err < 0.01, "8-bit tier error {max_err}");
    let mut names: Vec<_> = s
        .tensors()
        .unwrap()
        .into_iter()
        .filter_map(|t| t.name)
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"], "names persist in the names object");
    let v = s.verify().unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(v.checked, 6);
    drop(s);
    // Reopen with the cache written through on put: reads need no block GET.
    let ro = ObjectOptions {
        read_only: true,
        ..opts.clone()
    };
    let s = open(&srv, &loc, "emb", &ro, StoreConfig::default()).unwrap();
    let before = requests(&s);
    assert_eq!(s.get_tensor("a").unwrap().data, a);
    assert_eq!(
        requests(&s).gets,
        before.gets,
        "served from the local cache"
    );
    let cs = s.block_io().cache().unwrap().stats();
    assert_eq!(cs.hits, 4);
    // A cold cache: packs read ahead (one GET for the 4 blocks of a pack), objects
    // fetch each block.
    let cold = tempfile::tempdir().unwrap();
    let ro_cold = ObjectOptions {
        cache_dir: Some(cold.path().to_owned()),
        ..ro.clone()
    };
    let s2 = open(&srv, &loc, "emb", &ro_cold, StoreConfig::default()).unwrap();
    let before = requests(&s2);
    assert_eq!(s2.get_tensor("a").unwrap().data, a);
    let want = if layout == Layout::Packs { 1 } else { 4 };
    assert_eq!(requests(&s2).gets - before.gets, want, "{layout:?}");
    assert_eq!(s2.get_tensor("a").unwrap().data, a);
    assert_eq!(
        requests(&s2).gets - before.gets,
        want,
        "second read from the cache"
    );
    drop(s2);
    // Read-only: writes are refused with a typed error, reads still work.
    let e = s
        .put_tensor("c", DType::F32, &[4], &f32_bytes(4, 3), Tier::Tier0)
        .unwrap_err();
    assert!(
        matches!(object_err(&e), Some(ObjectErr::ReadOnly { .. })),
        "{e}"
    );
    drop(s);
    // Replace and delete: freed block objects are removed after the commit.
    let s = open(&srv, &loc, "emb", &plain, StoreConfig::default()).unwrap();
    s.put_tensor("a", DType::F32, &[4096], &a[..4096 * 4], Tier::Tier0)
        .unwrap();
    assert_eq!(s.delete_tensor("b").unwrap(), 2);
    s.flush().unwrap();
    s.compact().unwrap();
    s.close().unwrap();
    let raw = client(&srv, &loc);
    let blocks = block_on(async {
        use futures::TryStreamExt;
        raw.list(Some(&OsPath::from(format!("stores/acme/emb/{blocks_dir}"))))
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
    });
    assert_eq!(
        blocks.len(),
        1,
        "only the live block object is left: {blocks:?}"
    );
    let logs = block_on(async {
        use futures::TryStreamExt;
        raw.list(Some(&OsPath::from("stores/acme/emb/log")))
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
    });
    assert_eq!(
        logs.len(),
        1,
        "compaction left one snapshot and no segment: {logs:?}"
    );
    let s = open(&srv, &loc, "emb", &plain, StoreConfig::default()).unwrap();
    assert_eq!(s.get_tensor("a").unwrap().data, &a[..4096 * 4]);
    assert!(matches!(
        s.get_tensor("b"),
        Err(StoreErr::TensorNotFound { .. })
    ));
    let cols = tensorvault_store_object::list_collections(&raw, &loc).unwrap();
    assert_eq!(cols, vec![("acme".to_string(), "emb".to_string())]);
}

#[test]
fn two_writers_one_loses_cleanly_and_retries() {
    let Some(srv) = server_or_skip("two_writers_one_loses_cleanly_and_retries", None) else {
        return;
    };
    let loc = location(&srv, "conflict");
    let opts = srv.options();
    let x = f32_bytes(4096, 10);
    let y = f32_bytes(8192, 11);
    // Create the collection, then open two writers on the same state.
    open(&srv, &loc, "c", &opts, StoreConfig::default())
        .unwrap()
        .close()
        .unwrap();
    let w1 = open(&srv, &loc, "c", &opts, StoreConfig::default()).unwrap();
    let w2 = open(&srv, &loc, "c", &opts, StoreConfig::default()).unwrap();
    w1.put_tensor("x", DType::F32, &[4096], &x, Tier::Tier0)
        .unwrap();
    let e = w2
        .put_tensor("y", DType::F32, &[8192], &y, Tier::Tier0)
        .unwrap_err();
    assert!(is_conflict(&e), "expected a conflict, got {e}");
    drop(w2);
    w1.close().unwrap();
    // The loser re-reads (reopens) and retries.
    let w2 = open(&srv, &loc, "c", &opts, StoreConfig::default()).unwrap();
    assert_eq!(w2.get_tensor("x").unwrap().data, x);
    w2.put_tensor("y", DType::F32, &[8192], &y, Tier::Tier0)
        .unwrap();
    w2.close().unwrap();
    let r = open(&srv, &loc, "c", &opts, StoreConfig::default()).unwrap();
    assert_eq!(r.get_tensor("x").unwrap().data, x);
    assert_eq!(r.get_tensor("y").unwrap().data, y);
    assert!(r.verify().unwrap().problems.is_empty());
    // Creating a collection concurrently: both opens succeed on one manifest.
    let c1 = open(&srv, &loc, "fresh", &opts, StoreConfig::default()).unwrap();
    let c2 = open(&srv, &loc, "fresh", &opts, StoreConfig::default()).unwrap();
    assert_eq!(
        c1.block_io().collection().requests().puts + c2.block_io().collection().requests().puts,
        2,
        "one creator (snapshot + manifest); the other found it"
    );
}

fn damage(raw: &dyn ObjectStore, key: &str, how: impl FnOnce(&mut Vec<u8>)) {
    block_on(async {
        let p = OsPath::from(key);
        let mut b = raw.get(&p).await.unwrap().bytes().await.unwrap().to_vec();
        how(&mut b);
        raw.put(&p, Bytes::from(b).into()).await.unwrap();
    });
}

#[test]
fn objects_damaged_or_deleted_behind_the_stores_back_objects() {
    damaged(Layout::Objects);
}

#[test]
fn objects_damaged_or_deleted_behind_the_stores_back_packs() {
    damaged(Layout::Packs);
}

fn damaged(layout: Layout) {
    let test = format!("objects_damaged_or_deleted_behind_the_stores_back ({layout:?})");
    let Some(srv) = server_or_skip(&test, None) else {
        return;
    };
    let loc = location(&srv, "damage");
    let opts = ObjectOptions {
        create: false,
        layout,
        ..srv.options()
    };
    let a = f32_bytes(3 * 4096, 5);
    {
        let create = ObjectOptions {
            create: true,
            ..opts.clone()
        };
        let s = open(&srv, &loc, "d", &create, StoreConfig::default()).unwrap();
        s.put_tensor("a", DType::F32, &[3 * 4096], &a, Tier::Tier0)
            .unwrap();
        s.put_tensor("b", DType::F32, &[16], &f32_bytes(16, 6), Tier::Tier0)
            .unwrap();
        s.close().unwrap();
    }
    let raw = client(&srv, &loc);
    let dir = "stores/acme/d";
    let blocks = {
        let s = open(&srv, &loc, "d", &opts, StoreConfig::default()).unwrap();
        let id = s.tensor_id_of("a");
        let mut m: Vec<_> = s
            .blocks()
            .unwrap()
            .into_iter()
            .filter(|m| m.key.tensor_id == id)
            .collect();
        m.sort_by_key(|m| m.key.block_index);
        m
    };
    let loc_of = |i: usize| {
        let m = &blocks[i];
        let sl = StoreConfig::default().collection.slot_len(m.tier);
        let (key, at) = block_location(layout, m.tier, m.data_offset / u64::from(sl), sl);
        (format!("{dir}/{key}"), at as usize)
    };
    let key_of = |i: usize| loc_of(i).0;
    // A flipped bit in block 1: a Corruption error for exactly that block.
    let (k1, at1) = loc_of(1);
    damage(raw.as_ref(), &k1, |b| b[at1 + 100] ^= 0x08);
    let s = open(&srv, &loc, "d", &opts, StoreConfig::default()).unwrap();
    let e = s.get_tensor("a").unwrap_err();
    match e {
        StoreErr::Corruption { key, .. } => assert_eq!(key, blocks[1].key),
        other => panic!("expected Corruption, got {other}"),
    }
    let v = s.verify().unwrap();
    assert_eq!(v.problems.len(), 1);
    assert_eq!(v.problems[0].key, blocks[1].key);
    drop(s);
    // A deleted block object: a typed NotFound naming the object.
    block_on(raw.delete(&OsPath::from(key_of(2)))).unwrap();
    let s = open(&srv, &loc, "d", &opts, StoreConfig::default()).unwrap();
    let mut out = Vec::new();
    let e = s.get_block(&blocks[2].key, &mut out).unwrap_err();
    match object_err(&e) {
        Some(ObjectErr::NotFound { path }) => assert!(path.ends_with(&key_of(2)), "{path}"),
        _ => panic!("expected NotFound, got {e}"),
    }
    // The undamaged tensor still reads.
    assert_eq!(s.get_tensor("b").unwrap().data, f32_bytes(16, 6));
    drop(s);
    // A damaged log object: open fails with a typed checksum error.
    let m = block_on(async {
        let b = raw
            .get(&OsPath::from(format!("{dir}/{MANIFEST}")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        tensorvault_store_object::manifest::Manifest::decode(&b, "m").unwrap()
    });
    let seg = format!("{dir}/{}", m.segments[0].key);
    damage(raw.as_ref(), &seg, |b| b[10] ^= 1);
    let e = open(&srv, &loc, "d", &opts, StoreConfig::default())
        .err()
        .expect("open must fail");
    assert!(
        matches!(object_err(&e), Some(ObjectErr::Checksum { path, .. }) if path.ends_with(&m.segments[0].key)),
        "{e}"
    );
    // Undo the damage; then a deleted snapshot: typed NotFound.
    damage(raw.as_ref(), &seg, |b| b[10] ^= 1);
    open(&srv, &loc, "d", &opts, StoreConfig::default()).expect("repaired segment opens");
    block_on(raw.delete(&OsPath::from(format!("{dir}/{}", m.snapshot.key)))).unwrap();
    let e = open(&srv, &loc, "d", &opts, StoreConfig::default())
        .err()
        .expect("open must fail");
    assert!(
        matches!(object_err(&e), Some(ObjectErr::NotFound { .. })),
        "{e}"
    );
    // A missing collection without create: typed NotFound, nothing created.
    let e = open(&srv, &loc, "nope", &opts, StoreConfig::default())
        .err()
        .expect("no such collection");
    assert!(
        matches!(object_err(&e), Some(ObjectErr::NotFound { .. })),
        "{e}"
    );
}

#[test]
fn many_syncs_merge_segments_and_reopen_bounded() {
    let Some(srv) = server_or_skip("many_syncs_merge_segments_and_reopen_bounded", None) else {
        return;
    };
    let loc = location(&srv, "merge");
    let opts = ObjectOptions {
        max_segments: 4,
        ..srv.options()
    };
    let cfg = StoreConfig {
        durability: Durability::EveryWrite,
        collection: tensorvault_store::CollectionConfig::with_block_elems(64),
        ..StoreConfig::default()
    };
    {
        let s = open(&srv, &loc, "m", &opts, cfg.clone()).unwrap();
        for i in 0..20u32 {
            s.put_tensor(
                &format!("t{i}"),
                DType::F32,
                &[64],
                &f32_bytes(64, i),
                Tier::Tier0,
            )
            .unwrap();
        }
        s.close().unwrap();
    }
    let s = open(&srv, &loc, "m", &opts, cfg).unwrap();
    let segs = s.block_io().collection().requests().gets - 3; // manifest, snapshot, names
    assert!(segs <= 5, "{segs} segment GETs on open");
    for i in 0..20u32 {
        assert_eq!(
            s.get_tensor(&format!("t{i}")).unwrap().data,
            f32_bytes(64, i)
        );
    }
    assert_eq!(s.tensors().unwrap().len(), 20);
}
