//! Centred embedding tensors (`CollectionConfig::centre`, MetaLog header flags bit 5): a
//! 2-D `embedding` tensor's mean row is kept as its side record (block `u32::MAX`, raw f32
//! at Tier0), its quantized blocks code `x - m` with row gains against the original rows,
//! and every read adds `m` back. The side record survives reopen, compaction and
//! migration, is replaced by an overwrite and removed with the tensor; a block coded
//! against another mean, and a crafted side record, are typed errors, never wrong values.

mod mem;
mod values;

use mem::{dir_store, mem_store};
use values::{assert_migrated_equals_direct, f32_bytes as bytes, f32_floats as floats, rel_rmse};

use std::io::Write;

use tensorvault_core::checksum::crc32c;
use tensorvault_store::centre::CENTRE_BLOCK_INDEX;
use tensorvault_store::meta_log::layout::{CRC_OFFSET, C_CENTRE, C_CENTRE_FP, H_FLAGS};
use tensorvault_store::meta_log::{decode_header, decode_record, encode_header, encode_record};
use tensorvault_store::{
    BlockInfo, BlockKey, CollectionConfig, DType, MetaRecord, StoreErr, TensorKind, Tier,
};

const WIDTH: usize = 576;

/// Unit-norm rows of `WIDTH` sharing a large common row (as a token-embedding table): the
/// mean holds most of each row's energy.
fn table(rows: usize, seed: u64) -> Vec<f32> {
    values::embedding_rows(rows, WIDTH, seed, 4.0)
}

fn geo(centre: bool, ecsq: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: ecsq,
        ecsq,
        row_gains: true,
        centre,
        ..CollectionConfig::default().with_codec_v4()
    }
}

fn emb(rows: usize) -> [u32; 2] {
    [rows as u32, WIDTH as u32]
}

fn side(s: &mem::Mem, name: &str) -> BlockKey {
    BlockKey::new(s.tensor_id_of(name), CENTRE_BLOCK_INDEX)
}

#[test]
fn centring_lowers_the_error_at_every_tier_and_reads_add_the_mean_back() {
    let x = table(64, 1); // 9 blocks of 4096, the last one short
    let data = bytes(&x);
    let shape = emb(64);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    for (ecsq, tiers) in [
        (
            false,
            &[Tier::Tier0, Tier::Tier1, Tier::Tier2, Tier::Tier3][..],
        ),
        (true, &[Tier::Tier2, Tier::Tier3][..]),
    ] {
        for &tier in tiers {
            let (plain, centred) = (
                mem_store("c", geo(false, ecsq)),
                mem_store("c", geo(true, ecsq)),
            );
            plain.put_tensor_with("e", &info, &data, tier).unwrap();
            centred.put_tensor_with("e", &info, &data, tier).unwrap();
            let a = floats(&plain.get_tensor("e").unwrap().data);
            let b = floats(&centred.get_tensor("e").unwrap().data);
            // The side record: raw f32 at Tier0, one value per column.
            let m = centred.meta(&side(&centred, "e")).unwrap().unwrap();
            assert_eq!(
                (m.tier, m.dtype, m.data_len),
                (Tier::Tier0, DType::F32, 4 * WIDTH as u32)
            );
            assert_eq!(m.centre, Some(m.checksum));
            let b0 = centred
                .meta(&BlockKey::new(centred.tensor_id_of("e"), 0))
                .unwrap()
                .unwrap();
            assert_eq!(b0.centre, Some(m.checksum));
            // The listing counts data blocks only.
            let t = &centred.tensors().unwrap()[0];
            assert_eq!((t.blocks, t.expected_blocks), (9, 9));
            // Its stored bytes count the side record.
            let blocks: u64 = centred
                .blocks()
                .unwrap()
                .iter()
                .map(|m| u64::from(m.data_len))
                .sum();
            assert_eq!(t.stored_bytes, blocks);
            if tier == Tier::Tier0 {
                assert_eq!(b, x, "Tier0 keeps the original values");
                continue;
            }
            // stats() counts the side record's bytes in Tier0.
            let st = centred.stats().unwrap();
            assert_eq!((st.blocks[0], st.payload_bytes[0]), (1, 4 * WIDTH as u64));
            assert_eq!(st.tensors, 1);
            let (ea, eb) = (rel_rmse(&x, &a), rel_rmse(&x, &b));
            assert!(
                eb < 0.8 * ea,
                "{tier} ecsq {ecsq}: centred {eb} vs plain {ea}"
            );
        }
    }
}

#[test]
fn reopen_compaction_and_migration_keep_the_side_record() {
    let dir = tempfile::tempdir().unwrap();
    let x = table(40, 2);
    let data = bytes(&x);
    let shape = emb(40);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let want = {
        let s = dir_store(dir.path(), 1, geo(true, true), true);
        s.put_tensor_with("e", &info, &data, Tier::Tier1).unwrap();
        s.migrate_tensor("e", Tier::Tier2).unwrap();
        let side = BlockKey::new(s.tensor_id_of("e"), CENTRE_BLOCK_INDEX);
        assert_eq!(
            s.meta(&side).unwrap().unwrap().tier,
            Tier::Tier0,
            "never migrated"
        );
        let y = floats(&s.get_tensor("e").unwrap().data);
        assert!(rel_rmse(&x, &y) < 0.05);
        s.compact().unwrap();
        y
    };
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(
        s.geometry().centre,
        "the header's flag wins over the caller's"
    );
    assert_eq!(floats(&s.get_tensor("e").unwrap().data), want);
    // Migration decodes with the mean and re-centres with the same one.
    s.migrate_tensor("e", Tier::Tier3).unwrap();
    let y = floats(&s.get_tensor("e").unwrap().data);
    assert!(rel_rmse(&x, &y) < 0.15, "{}", rel_rmse(&x, &y));
    s.migrate_tensor("e", Tier::Tier0).unwrap();
    assert_eq!(
        floats(&s.get_tensor("e").unwrap().data),
        y,
        "Tier0 holds the decoded values"
    );
    assert_eq!(s.verify().unwrap().defects(), 0);
}

#[test]
fn migration_from_tier0_equals_a_direct_put() {
    let x = table(30, 3);
    let shape = emb(30);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
        assert_migrated_equals_direct(geo(true, true), "e", &info, &bytes(&x), tier);
    }
}

#[test]
fn a_crash_between_the_side_record_and_the_blocks_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let shape = emb(40);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let log = dir.path().join("t/c/meta.log");
    let before = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("e", &info, &bytes(&table(40, 4)), Tier::Tier1)
            .unwrap();
        s.close().unwrap();
        std::fs::metadata(&log).unwrap().len()
    };
    {
        let s = dir_store(dir.path(), 2, geo(true, false), false);
        s.put_tensor_with("e", &info, &bytes(&table(40, 5)), Tier::Tier1)
            .unwrap();
        s.close().unwrap();
    }
    // The new version's first record is its side record: keep it, lose its blocks (what
    // a power cut after the side record's commit leaves).
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(before + 128).unwrap();
    drop(f);
    let s = dir_store(dir.path(), 3, geo(true, false), false);
    // verify reports every quantized block of the earlier version.
    let v = s.verify().unwrap();
    assert_eq!(v.problems.len(), 6, "{:?}", v.problems); // 40 x 576 values: 6 blocks
    assert!(v
        .problems
        .iter()
        .all(|p| p.error.contains("coded against mean row")));
    // Reported as corrupt data (Python CorruptionError), not as bad input.
    assert!(s.get_tensor("e").unwrap_err().is_corruption());
    match s.get_tensor("e") {
        Err(StoreErr::CentreMismatch {
            tensor,
            block,
            found: Some(_),
            ..
        }) => assert_eq!((tensor.as_str(), block), ("e", 0)),
        other => panic!("expected CentreMismatch, got {other:?}"),
    }
    let mut out = Vec::new();
    let key = BlockKey::new(s.tensor_id_of("e"), 3);
    assert!(matches!(
        s.get_block(&key, &mut out),
        Err(StoreErr::CentreMismatch { block: 3, .. })
    ));
    // A new put repairs it.
    let x = table(40, 6);
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier1)
        .unwrap();
    assert!(rel_rmse(&x, &floats(&s.get_tensor("e").unwrap().data)) < 0.02);
}

#[test]
fn a_crash_after_a_first_puts_side_record_is_reported_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let shape = emb(16);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let log = dir.path().join("t/c/meta.log");
    let before = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.flush().unwrap();
        let n = std::fs::metadata(&log).unwrap().len();
        s.put_tensor_with("e", &info, &bytes(&table(16, 14)), Tier::Tier1)
            .unwrap();
        s.close().unwrap();
        n
    };
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(before + 128).unwrap();
    drop(f);
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    assert!(s.tensors().unwrap().is_empty(), "nothing to read");
    let v = s.verify().unwrap();
    assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
    assert!(
        v.problems[0].error.contains("without block 0"),
        "{:?}",
        v.problems
    );
    assert_eq!(v.problems[0].key.block_index, CENTRE_BLOCK_INDEX);
    assert!(matches!(
        s.get_tensor("e"),
        Err(StoreErr::TensorNotFound { .. })
    ));
    assert_eq!(s.delete_tensor("e").unwrap(), 1);
    assert!(s.blocks().unwrap().is_empty());
    assert_eq!(s.verify().unwrap().problems.len(), 0);
}

#[test]
fn overwrite_and_delete_leave_no_orphan() {
    let s = mem_store("c", geo(true, true));
    let (s64, s20) = (emb(64), emb(20));
    let big = BlockInfo::new(DType::F32, &s64).with_kind(TensorKind::Embedding);
    let small = BlockInfo::new(DType::F32, &s20).with_kind(TensorKind::Embedding);
    s.put_tensor_with("e", &big, &bytes(&table(64, 7)), Tier::Tier2)
        .unwrap();
    let first = s.meta(&side(&s, "e")).unwrap().unwrap().checksum;
    let x = table(20, 8);
    s.put_tensor_with("e", &small, &bytes(&x), Tier::Tier2)
        .unwrap();
    let second = s.meta(&side(&s, "e")).unwrap().unwrap();
    assert_ne!(second.checksum, first, "the overwrite's own mean");
    assert_eq!(
        s.blocks().unwrap().len(),
        3 + 1,
        "3 blocks and the side record"
    );
    assert!(rel_rmse(&x, &floats(&s.get_tensor("e").unwrap().data)) < 0.05);
    // A version that is not centred (a generic tensor) drops the side record.
    let flat = [20 * WIDTH as u32];
    s.put_tensor("e", DType::F32, &flat, &bytes(&x), Tier::Tier2)
        .unwrap();
    assert!(s.meta(&side(&s, "e")).unwrap().is_none());
    assert!(s.blocks().unwrap().iter().all(|m| m.centre.is_none()));
    s.put_tensor_with("e", &small, &bytes(&x), Tier::Tier1)
        .unwrap();
    assert_eq!(s.delete_tensor("e").unwrap(), 4);
    assert!(s.blocks().unwrap().is_empty(), "no orphan");
}

#[test]
fn tensors_that_do_not_fit_are_stored_uncentred() {
    // Rows wider than a block: no side record, blocks as without the flag.
    let small = CollectionConfig {
        block_elems: 512,
        ..geo(true, false)
    };
    let plain_geo = CollectionConfig {
        centre: false,
        ..small
    };
    let x = table(8, 9);
    let shape = emb(8);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let (s, plain) = (mem_store("c", small), mem_store("c", plain_geo));
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier1)
        .unwrap();
    plain
        .put_tensor_with("e", &info, &bytes(&x), Tier::Tier1)
        .unwrap();
    assert!(s.meta(&side(&s, "e")).unwrap().is_none());
    assert!(s.blocks().unwrap().iter().all(|m| m.centre.is_none()));
    assert_eq!(
        s.get_tensor("e").unwrap().data,
        plain.get_tensor("e").unwrap().data
    );
    // A 1-D embedding and a weight are not centred either.
    let s = mem_store("c", geo(true, false));
    let flat = [8 * WIDTH as u32];
    let one_d = BlockInfo::new(DType::F32, &flat).with_kind(TensorKind::Embedding);
    s.put_tensor_with("v", &one_d, &bytes(&x), Tier::Tier1)
        .unwrap();
    let w = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Weight);
    s.put_tensor_with("w", &w, &bytes(&x), Tier::Tier1).unwrap();
    assert!(s.blocks().unwrap().iter().all(|m| m.centre.is_none()));
    // The reserved index is refused to callers.
    let key = BlockKey::new(7, CENTRE_BLOCK_INDEX);
    let e = s
        .put_block(key, Tier::Tier0, &info, &bytes(&x[..WIDTH]))
        .unwrap_err();
    assert!(
        matches!(e, StoreErr::InvalidArgument { field: "key", .. }),
        "{e}"
    );
}

/// Append a Create for the side record of `e` built by `f` from the live one to the log
/// of the closed collection under `root`, whose tier 0 payload it reads back through `s`.
fn craft_side(root: &std::path::Path, f: impl Fn(&mut tensorvault_store::BlockMeta, &[u8])) {
    let mut meta;
    let mut payload = Vec::new();
    {
        let s = dir_store(root, 1, geo(true, false), false);
        let key = BlockKey::new(s.tensor_id_of("e"), CENTRE_BLOCK_INDEX);
        meta = s.get_payload(&key, &mut payload).unwrap();
        s.close().unwrap();
    }
    f(&mut meta, &payload);
    let rec = encode_record(&MetaRecord::Create { meta });
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("t/c/meta.log"))
        .unwrap();
    log.write_all(&rec).unwrap();
}

#[test]
fn a_crafted_side_record_is_a_typed_error_naming_the_field() {
    let shape = emb(16);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    type Craft = fn(&mut tensorvault_store::BlockMeta, &[u8]);
    let cases: [(&str, Craft); 3] = [
        ("side.data_len", |m, p| {
            m.data_len -= 4;
            m.checksum = crc32c(&p[..p.len() - 4]);
            m.centre = Some(m.checksum);
        }),
        ("side.centre_fp", |m, _| m.centre = Some(m.checksum ^ 1)),
        ("side.dtype", |m, _| m.dtype = DType::U8),
    ];
    for (field, craft) in cases {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = dir_store(dir.path(), 1, geo(true, false), true);
            s.put_tensor_with("e", &info, &bytes(&table(16, 10)), Tier::Tier1)
                .unwrap();
            s.close().unwrap();
        }
        craft_side(dir.path(), craft);
        let s = dir_store(dir.path(), 2, geo(true, false), false);
        match s.get_tensor("e") {
            Err(StoreErr::BadCentre {
                tensor, field: f, ..
            }) => {
                assert_eq!((tensor.as_str(), f), ("e", field));
            }
            other => panic!("{field}: expected BadCentre, got {other:?}"),
        }
    }
}

#[test]
fn a_block_without_its_side_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shape = emb(16);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let id = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("e", &info, &bytes(&table(16, 11)), Tier::Tier2)
            .unwrap();
        let id = s.tensor_id_of("e");
        s.close().unwrap();
        id
    };
    let rec = encode_record(&MetaRecord::Delete {
        key: BlockKey::new(id, CENTRE_BLOCK_INDEX),
    });
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("t/c/meta.log"))
        .unwrap();
    log.write_all(&rec).unwrap();
    drop(log);
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    assert!(matches!(
        s.get_tensor("e"),
        Err(StoreErr::CentreMismatch {
            found: None,
            block: 0,
            ..
        })
    ));
}

#[test]
fn the_flag_needs_codec_4_with_row_gains_and_sits_in_bit_5() {
    for (bad, why) in [
        (
            CollectionConfig {
                row_gains: false,
                ..geo(true, false)
            },
            "without row_gains",
        ),
        (
            CollectionConfig {
                centre: true,
                ..CollectionConfig::default()
            },
            "codec 2",
        ),
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("centre"), "{why}: {e}");
    }
    let h = encode_header(&geo(true, false), 0);
    assert_eq!(h[H_FLAGS] & 0x20, 0x20);
    assert!(decode_header(&h).unwrap().0.centre);
    assert_eq!(encode_header(&geo(false, false), 0)[H_FLAGS] & 0x20, 0);
    // Bit 5 without row_gains (bit 6) is refused at open, naming the flag and byte 49.
    let mut forged = encode_header(&geo(false, false), 0);
    forged[H_FLAGS] = (forged[H_FLAGS] & !0x40) | 0x20;
    let crc = crc32c(&forged[..CRC_OFFSET]);
    forged[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
    let e = decode_header(&forged).unwrap_err().to_string();
    assert!(e.contains("centre") && e.contains("49"), "{e}");
}

#[test]
fn the_create_record_carries_the_fingerprint_at_bytes_113_to_118() {
    let s = mem_store("c", geo(true, false));
    let shape = emb(8);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    s.put_tensor_with("e", &info, &bytes(&table(8, 12)), Tier::Tier1)
        .unwrap();
    let meta = s
        .meta(&BlockKey::new(s.tensor_id_of("e"), 0))
        .unwrap()
        .unwrap();
    let fp = meta.centre.unwrap();
    let mut b = encode_record(&MetaRecord::Create { meta });
    assert_eq!(b[C_CENTRE], 1);
    assert_eq!(b[C_CENTRE_FP..C_CENTRE_FP + 4], fp.to_le_bytes());
    match decode_record(&b, 128).unwrap() {
        MetaRecord::Create { meta: m } => assert_eq!(m.centre, Some(fp)),
        other => panic!("{other:?}"),
    }
    let reseal = |b: &mut [u8; 128]| {
        let crc = crc32c(&b[..CRC_OFFSET]);
        b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
    };
    b[C_CENTRE] = 2;
    reseal(&mut b);
    assert!(decode_record(&b, 128)
        .unwrap_err()
        .to_string()
        .contains("create.centre"));
    b[C_CENTRE] = 0;
    reseal(&mut b);
    assert!(decode_record(&b, 128)
        .unwrap_err()
        .to_string()
        .contains("create.centre_fp"));
}

#[test]
fn maintain_demotes_the_blocks_and_leaves_the_side_record_at_tier0() {
    use std::sync::Arc;
    use tensorvault_store::tiering::TierPolicy;
    use tensorvault_store::{BufferBlockIO, Catalog, Durability, ManualClock, MemMetaLog};
    use tensorvault_store::{StoreConfig, TensorStore};
    let g = geo(true, true);
    let clock = Arc::new(ManualClock::new(1));
    let cfg = StoreConfig {
        collection: g,
        durability: Durability::Os,
        tiering: TierPolicy {
            min_tier_age: 0,
            demote_tier0: true,
            ..TierPolicy::default()
        },
        ..StoreConfig::default()
    };
    let s = TensorStore::open(
        "t",
        "c",
        Arc::clone(&clock),
        BufferBlockIO::new(&g),
        MemMetaLog::new(g),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap();
    let x = table(20, 13);
    let shape = emb(20);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier0)
        .unwrap();
    let side = BlockKey::new(s.tensor_id_of("e"), CENTRE_BLOCK_INDEX);
    for _ in 0..8 {
        clock.advance(1000);
        let plan = s.plan_maintain(1024).unwrap();
        assert!(plan.moves.iter().all(|m| m.key != side), "{plan:?}");
        s.maintain(1024).unwrap();
    }
    let metas = s.blocks().unwrap();
    assert!(metas
        .iter()
        .filter(|m| m.key != side)
        .all(|m| m.tier == Tier::Tier3));
    assert_eq!(s.meta(&side).unwrap().unwrap().tier, Tier::Tier0);
    let y = floats(&s.get_tensor("e").unwrap().data);
    assert!(rel_rmse(&x, &y) < 0.15, "{}", rel_rmse(&x, &y));
}

mod prop {
    use super::*;
    use proptest::prelude::*;
    use values::{f16_bytes, f16_floats};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Any table shape (rows of 1..=700 values, so rows that split across blocks and
        /// blocks that hold several rows), f32 or f16, any tier: the read has the
        /// tensor's shape, Tier0 is exact, quantized tiers stay close, and the blocks
        /// carry the side record's fingerprint.
        #[test]
        fn centred_round_trip(rows in 1usize..40, d in 1usize..700, seed in any::<u64>(),
                              tier in 0u8..4, half in any::<bool>()) {
            let mut st = seed | 1;
            let mean: Vec<f32> = (0..d).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1).collect();
            let x: Vec<f32> = (0..rows * d)
                .map(|i| {
                    st ^= st << 13;
                    st ^= st >> 7;
                    st ^= st << 17;
                    mean[i % d] + ((st >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.05
                })
                .collect();
            let (dtype, data) = if half {
                (DType::F16, f16_bytes(&x))
            } else {
                (DType::F32, bytes(&x))
            };
            let x = if half { f16_floats(&data) } else { x };
            let tier = Tier::from_u8(tier).unwrap();
            let s = mem_store("c", geo(true, true));
            let shape = [rows as u32, d as u32];
            let info = BlockInfo::new(dtype, &shape).with_kind(TensorKind::Embedding);
            s.put_tensor_with("e", &info, &data, tier).unwrap();
            let got = s.get_tensor("e").unwrap();
            prop_assert_eq!(got.data.len(), data.len());
            let y = if half { f16_floats(&got.data) } else { floats(&got.data) };
            let side = s.meta(&side(&s, "e")).unwrap().unwrap();
            prop_assert!(s
                .blocks()
                .unwrap()
                .iter()
                .all(|m| m.centre == Some(side.checksum)));
            if tier == Tier::Tier0 {
                prop_assert_eq!(y, x);
            } else {
                let e = rel_rmse(&x, &y);
                prop_assert!(e < 0.05, "{} at {}: {}", d, tier, e);
            }
        }
    }
}

#[test]
fn centring_combines_with_model_coded_ecsq() {
    let x = table(64, 15);
    let data = bytes(&x);
    let shape = emb(64);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let model = |centre| CollectionConfig {
        ecsq_model: true,
        ..geo(centre, true)
    };
    for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
        let (plain, centred) = (mem_store("c", model(false)), mem_store("c", model(true)));
        plain.put_tensor_with("e", &info, &data, tier).unwrap();
        centred.put_tensor_with("e", &info, &data, tier).unwrap();
        let a = floats(&plain.get_tensor("e").unwrap().data);
        let b = floats(&centred.get_tensor("e").unwrap().data);
        let (ea, eb) = (rel_rmse(&x, &a), rel_rmse(&x, &b));
        assert!(eb < 0.8 * ea, "{tier}: centred {eb} vs plain {ea}");
        let h = encode_header(&model(true), 0);
        assert_eq!(
            h[H_FLAGS], 0b1110_1001,
            "ecsq_model, row_gains, centre, ecsq, entropy"
        );
    }
}

/// review14: rows near the f32 range whose centred values `x - m` would overflow (the mean
/// of +-3e38 columns is 1e38, and -3e38 - 1e38 is beyond f32). Such a finite table is
/// stored uncentred, exactly as without the flag (it failed with `NonFinite` before).
#[test]
fn a_table_whose_centred_values_overflow_is_stored_uncentred() {
    let big = 3.0e38f32;
    let mut x = Vec::with_capacity(3 * WIDTH);
    for r in 0..3 {
        let sign = if r == 1 { -1.0 } else { 1.0 };
        x.extend((0..WIDTH).map(|c| sign * big * (1.0 - c as f32 / 4096.0)));
    }
    let shape = [3u32, WIDTH as u32];
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    for tier in [Tier::Tier0, Tier::Tier1, Tier::Tier2] {
        let s = mem_store("c", geo(true, false));
        let plain = mem_store("c", geo(false, false));
        let got = s.put_tensor_with("e", &info, &bytes(&x), tier);
        let want = plain.put_tensor_with("e", &info, &bytes(&x), tier);
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{tier}");
        assert!(s.meta(&side(&s, "e")).unwrap().is_none());
        if got.is_ok() {
            let y = s.get_tensor("e").unwrap().data;
            assert_eq!(y, plain.get_tensor("e").unwrap().data);
        }
    }
}

/// review14: a block claiming `centre` 1 in a collection without flags bit 5, with a
/// crafted "side record" at `u32::MAX` (an ordinary block index there), is refused: it
/// is never decoded with that block's values added as a mean.
#[test]
fn a_centred_block_in_a_collection_without_bit_5_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shape = emb(16);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let plain = geo(false, false);
    let id = {
        let s = dir_store(dir.path(), 1, plain, true);
        s.put_tensor_with("e", &info, &bytes(&table(16, 12)), Tier::Tier2)
            .unwrap();
        let id = s.tensor_id_of("e");
        // An ordinary block at the index a centred collection reserves: a mean row of
        // ones, raw f32 at tier 0.
        let ones = vec![1.0f32; WIDTH];
        s.put_block(
            BlockKey::new(id, CENTRE_BLOCK_INDEX),
            Tier::Tier0,
            &info,
            &bytes(&ones),
        )
        .unwrap();
        s.close().unwrap();
        id
    };
    // Rewrite both Creates with centre 1 and the payload's fingerprint.
    let (side_meta, blk_meta) = {
        let s = dir_store(dir.path(), 2, plain, false);
        let mut p = Vec::new();
        let sm = s
            .get_payload(&BlockKey::new(id, CENTRE_BLOCK_INDEX), &mut p)
            .unwrap();
        let bm = s.get_payload(&BlockKey::new(id, 0), &mut p).unwrap();
        s.close().unwrap();
        (sm, bm)
    };
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("t/c/meta.log"))
        .unwrap();
    for mut meta in [side_meta, blk_meta] {
        meta.centre = Some(side_meta.checksum);
        log.write_all(&encode_record(&MetaRecord::Create { meta }))
            .unwrap();
    }
    drop(log);
    let s = dir_store(dir.path(), 3, plain, false);
    let mut out = Vec::new();
    match s.get_block(&BlockKey::new(id, 0), &mut out) {
        Err(StoreErr::BadCentre { field, offset, .. }) => {
            assert_eq!((field, offset), ("centre", C_CENTRE as u64));
        }
        other => panic!("expected BadCentre centre, got {other:?}"),
    }
}

/// review14: a log whose side record's Create comes after its blocks' Creates (replay
/// order is not the write order) reads the same: reads look the side record up by key.
#[test]
fn a_side_record_created_after_its_blocks_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let shape = emb(16);
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    let want = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("e", &info, &bytes(&table(16, 13)), Tier::Tier2)
            .unwrap();
        let d = s.get_tensor("e").unwrap().data;
        s.close().unwrap();
        d
    };
    craft_side(dir.path(), |_, _| {});
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    // verify is read-only: the log does not grow under it.
    let log_len = || {
        std::fs::metadata(dir.path().join("t/c/meta.log"))
            .unwrap()
            .len()
    };
    let before = log_len();
    assert!(s.verify().unwrap().problems.is_empty());
    assert_eq!(log_len(), before);
    assert_eq!(s.get_tensor("e").unwrap().data, want);
}
