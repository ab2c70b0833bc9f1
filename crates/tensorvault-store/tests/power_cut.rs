//! Power-cut suite (issue 15, item 1): the crash suite's seeded workload (puts,
//! put_tensor batches, migrations, deletes, compactions, reads that log access records)
//! runs in this process over a directory store under `Durability::EveryWrite`, every file
//! operation going through `tensorvault_core::fsio`. A [`PowerCut`] counts the operations
//! and cuts the power before operation `N + 1`, for every `N` of the workload: the disk
//! then keeps only what completed syncs covered (file data and directory entries), and in
//! the random-loss rounds also an arbitrary subset of the unsynced 512-byte sectors
//! (torn and reordered writes) and either length of each file.
//!
//! The disk image is written to a fresh directory and reopened (open must succeed), then
//! checked against the model of acknowledged operations exactly as after a SIGKILL
//! (`workload::check_after_kill`): every acknowledged write reads back bit for bit (the
//! codec's decode in quantized tiers), acknowledged deletes stay deleted, the operation
//! in flight at the cut happened per key wholly or not at all, nothing else is corrupt
//! (`verify` clean, no record skipped in the middle of the log, every tier's live slots
//! match the index), names survive, and the store accepts a new write.
//!
//! Default: >= 200 cut points (two workloads, every cut point of each, alternating
//! loss models). `TV_STORE_LONG=1`: >= 5,000. `TV_STORE_SEED` overrides the seeds.
#![cfg(feature = "mmap")]

mod common;
mod workload;

use std::collections::BTreeMap;
use std::path::Path;

use common::{long_mode, mix, seed_or, store_config, Oracle, Rng};
use tensorvault_core::fsio::power_cut::{Loss, PowerCut};
use tensorvault_store::DirStore;
use workload::{apply, check_after_kill, choose, effect, perform, Mode, Model, Op, Step, COLL};
use workload::{Tally, TENANT};

/// What one run of the workload left: the model of acknowledged operations and the
/// operation in flight when the power went.
struct Outcome {
    model: Model,
    pending: Option<Op>,
    acked: u64,
    /// Log bytes (header + records) after the last acknowledged operation.
    acked_log_bytes: u64,
}

/// Run `steps` workload steps of `mode` against a new store under `root`, until they are
/// done or an operation fails (after the cut, every one does).
fn run_workload(root: &Path, seed: u64, mode: Mode, steps: u64, oracle: &mut Oracle) -> Outcome {
    let mut out = Outcome {
        model: Model::new(),
        pending: None,
        acked: 0,
        acked_log_bytes: 128,
    };
    let Ok(store) = DirStore::open_path(root, TENANT, COLL, store_config(), true) else {
        return out;
    };
    let mut rng = Rng::new(mix(seed ^ 0x0070_C0DE));
    let mut buf = Vec::new();
    for id in 1..=steps {
        let Ok(step) = choose(&store, &mut rng, mode, id) else {
            break;
        };
        match step {
            Step::Read(None) => {}
            Step::Read(Some(key)) => {
                // A read may log access records: after the cut it fails, which ends the run.
                if store.get_block(&key, &mut buf).is_err() {
                    break;
                }
            }
            Step::Write(op) => match perform(&store, &op, seed) {
                Ok(()) => {
                    let ch = effect(&out.model, &op, seed, oracle);
                    apply(&mut out.model, ch);
                    out.acked += 1;
                    if let Ok(n) = store.log_records() {
                        out.acked_log_bytes = (n + 1) * 128;
                    }
                }
                Err(_) => {
                    out.pending = Some(op);
                    break;
                }
            },
        }
    }
    // Dropping flushes; after a cut that fails quietly, as a real process would.
    drop(store);
    out
}

/// Totals over the cut points of a suite.
#[derive(Debug, Default)]
struct Totals {
    cut_points: u64,
    cut_in_flight: BTreeMap<&'static str, u64>,
    acked_ops_checked: u64,
    runs_without_cut: u64,
    lost_tail_records: u64,
    /// Records open ignored: blocks of an unfinished last commit rolled back (and
    /// records made stale by them).
    ignored_at_open: u64,
    by_loss: BTreeMap<&'static str, u64>,
}

fn loss_for(point: u64, seed: u64) -> (Loss, &'static str) {
    match point % 3 {
        0 => (Loss::AllUnsynced, "unsynced lost"),
        1 => (
            Loss::Random {
                seed: mix(seed ^ point),
            },
            "random sectors",
        ),
        _ => (Loss::Nothing, "nothing lost"),
    }
}

/// Walk every cut point (or every `stride`-th) of one seeded workload.
fn walk(mode: Mode, seed: u64, steps: u64, stride: u64, totals: &mut Totals) {
    let mut oracle = Oracle::new();
    // A run without a cut counts the operations.
    let scratch = common::scratch_dir("power-cut-count");
    let (pc, guard) = PowerCut::start(scratch.path(), None, Loss::AllUnsynced).expect("observe");
    let full = run_workload(scratch.path(), seed, mode, steps, &mut oracle);
    assert!(full.pending.is_none(), "the uncut workload failed");
    let ops = pc.ops();
    let kinds = pc.op_kinds();
    drop(guard);
    eprintln!(
        "power cut {}: seed {seed:#x}: {steps} steps, {} acknowledged writes, {ops} file operations {kinds:?}",
        mode.name(),
        full.acked
    );
    let mut point = 0;
    while point <= ops {
        let (loss, loss_name) = loss_for(point, seed);
        let ctx = format!(
            "{} seed {seed:#x} cut after op {point} of {ops} ({loss_name})",
            mode.name()
        );
        let work = common::scratch_dir("power-cut");
        let (pc, guard) = PowerCut::start(work.path(), Some(point), loss).expect("observe");
        let mut out = run_workload(work.path(), seed, mode, steps, &mut oracle);
        let image = pc.cut_now().expect("disk image");
        if !pc.was_cut() || (point == ops && out.pending.is_none()) {
            totals.runs_without_cut += 1;
        }
        drop(guard);
        let after = common::scratch_dir("power-cut-after");
        PowerCut::write_image(&image, after.path()).expect("write the disk image");
        if let Some(op) = &out.pending {
            *totals.cut_in_flight.entry(op.kind()).or_default() += 1;
        }
        let mut tally = Tally {
            acked_log_bytes: Some(out.acked_log_bytes),
            ..Tally::default()
        };
        check_after_kill(
            after.path(),
            &mut out.model,
            out.pending.as_ref(),
            seed,
            point,
            &mut oracle,
            &mut tally,
            &ctx,
        );
        totals.lost_tail_records += tally.lost_tail_records;
        totals.ignored_at_open += tally.ignored_at_open;
        totals.cut_points += 1;
        totals.acked_ops_checked += out.acked;
        *totals.by_loss.entry(loss_name).or_default() += 1;
        point += stride;
    }
}

fn suite(mode: Mode, default_seed: u64, workloads: u64, steps: u64, min_points: u64) {
    let seed = seed_or(default_seed);
    let mut totals = Totals::default();
    for w in 0..workloads {
        walk(mode, mix(seed ^ w), steps, 1, &mut totals);
    }
    eprintln!("power cut {}: {totals:?}", mode.name());
    assert!(
        totals.cut_points >= min_points,
        "only {} cut points (want >= {min_points})",
        totals.cut_points
    );
}

#[test]
fn power_cut_at_every_operation_of_mixed_writes_loses_nothing_acknowledged() {
    if long_mode() {
        suite(Mode::Mixed, 0x9C07_0001, 12, 60, 2500);
    } else {
        suite(Mode::Mixed, 0x9C07_0001, 1, 30, 100);
    }
}

#[test]
fn power_cut_during_migrations_and_compactions_keeps_every_block_in_one_tier() {
    if long_mode() {
        suite(Mode::Migrate, 0x9C07_0002, 6, 60, 1250);
        suite(Mode::Compact, 0x9C07_0003, 6, 60, 1250);
    } else {
        suite(Mode::Migrate, 0x9C07_0002, 1, 25, 50);
        suite(Mode::Compact, 0x9C07_0003, 1, 25, 50);
    }
}

/// The extent allocator under power cuts at every operation: acknowledged data
/// survives, each block keeps its own extent (see `check_after_kill`).
#[test]
fn power_cut_with_extents_loses_nothing_and_shares_no_extent() {
    common::with_extents(|| {
        if long_mode() {
            suite(Mode::Mixed, 0x9C07_0011, 6, 60, 1250);
            suite(Mode::Migrate, 0x9C07_0012, 6, 60, 600);
        } else {
            suite(Mode::Mixed, 0x9C07_0011, 1, 30, 100);
            suite(Mode::Migrate, 0x9C07_0012, 1, 25, 50);
        }
    });
}

/// The commit whose records reached the disk without its data (the two are synced
/// together) is rolled back at open: the block reads as it was before. After a clean
/// close (a commit mark ends the log) the same damage is reported as corruption instead.
#[test]
fn a_last_commit_without_its_data_is_rolled_back_and_a_confirmed_one_is_not() {
    use tensorvault_store::{BlockInfo, BlockKey, DType, StoreErr, Tier};
    for clean_close in [false, true] {
        let dir = common::scratch_dir("tail-rollback");
        let root = dir.path();
        let key = BlockKey::new(7, 0);
        let (old, new) = (common::block_data(1, 64), common::block_data(2, 64));
        let info = BlockInfo::new(DType::F32, &[64]);
        let s = DirStore::open_path(root, TENANT, COLL, store_config(), true).unwrap();
        s.put_block(key, Tier::Tier0, &info, &old).unwrap();
        s.flush().unwrap();
        s.put_block(key, Tier::Tier0, &info, &new).unwrap();
        let meta = s.meta(&key).unwrap().unwrap();
        if clean_close {
            s.close().unwrap();
        }
        // The files as a crash would leave them (no flush, no commit mark after the last
        // put), or as the clean close did.
        let after = common::scratch_dir("tail-rollback-after");
        let from = common::coll_dir(root, TENANT, COLL);
        let to = common::coll_dir(after.path(), TENANT, COLL);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(&from).unwrap() {
            let e = e.unwrap();
            if e.file_name() != "LOCK" {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
        let root = after.path();
        let tier_file = to.join("tier0.dat");
        // The new block's bytes never reached the disk.
        let mut bytes = std::fs::read(&tier_file).unwrap();
        let at = meta.data_offset as usize;
        bytes[at..at + meta.data_len as usize].fill(0);
        std::fs::write(&tier_file, &bytes).unwrap();
        let s = DirStore::open_path(root, TENANT, COLL, store_config(), true).unwrap();
        let mut out = Vec::new();
        if clean_close {
            assert!(
                matches!(
                    s.get_block(&key, &mut out),
                    Err(StoreErr::Corruption { .. })
                ),
                "damage to a confirmed block must be reported"
            );
        } else {
            s.get_block(&key, &mut out).unwrap();
            assert_eq!(out, old, "the unfinished commit was not rolled back");
            assert_eq!(s.replay_stats().1, 1, "the rollback is counted as ignored");
            assert!(s.verify().unwrap().problems.is_empty());
        }
    }
}

/// KV appends under power cuts: decode steps append one token to every head (all slots in
/// one batch); tail blocks are rewritten in place and full ones written. After any cut,
/// every slot holds at least the acknowledged tokens, bit for bit, and at most the
/// in-flight step on top (all slots alike: a batch is all or nothing per block).
#[test]
fn power_cut_during_kv_appends_keeps_every_acknowledged_token() {
    use half::f16;
    use tensorvault_store::{CollectionConfig, KvCache, KvKind, KvSlot, StoreConfig};
    const HEAD_DIM: u32 = 8;
    let steps: u64 = if long_mode() { 160 } else { 25 };
    let cfg = StoreConfig {
        collection: CollectionConfig::kv_cache_tokens(HEAD_DIM, 16).unwrap(),
        access_flush_every: 4,
        lock_wait: std::time::Duration::from_millis(200),
        ..StoreConfig::default()
    };
    let slots: Vec<KvSlot> = (0..2)
        .flat_map(|l| [KvKind::Key, KvKind::Value].map(|k| KvSlot::new(l, 0, k)))
        .collect();
    let token = |slot: &KvSlot, t: u64| -> Vec<f16> {
        (0..HEAD_DIM)
            .map(|j| {
                let x = mix(u64::from(slot.layer) * 7 + slot.kind as u64 + t * 131 + u64::from(j));
                f16::from_f32((x % 2000) as f32 / 1000.0 - 1.0)
            })
            .collect()
    };
    // Returns the acknowledged steps.
    let run = |root: &Path| -> u64 {
        let Ok(store) = DirStore::open_path(root, TENANT, "kv", cfg.clone(), true) else {
            return 0;
        };
        let Ok(kv) = KvCache::new(store, HEAD_DIM) else {
            return 0;
        };
        let mut acked = 0;
        for t in 0..steps {
            let vals: Vec<Vec<f16>> = slots.iter().map(|s| token(s, t)).collect();
            let items: Vec<(KvSlot, &[f16])> = slots
                .iter()
                .zip(&vals)
                .map(|(s, v)| (*s, v.as_slice()))
                .collect();
            if kv.append_batch(&items).is_err() {
                break;
            }
            acked += 1;
            // Now and then a reader looks at old tokens (access records in the log).
            if t % 7 == 3 && kv.read(slots[0], 0..1).is_err() {
                break;
            }
        }
        acked
    };
    let scratch = common::scratch_dir("power-cut-kv-count");
    let (pc, guard) = PowerCut::start(scratch.path(), None, Loss::AllUnsynced).unwrap();
    assert_eq!(run(scratch.path()), steps);
    let ops = pc.ops();
    drop(guard);
    let mut points = 0;
    for point in 0..=ops {
        let (loss, loss_name) = loss_for(point, 0x4B56);
        let ctx = format!("kv: cut after op {point} of {ops} ({loss_name})");
        let work = common::scratch_dir("power-cut-kv");
        let (pc, guard) = PowerCut::start(work.path(), Some(point), loss).unwrap();
        let acked = run(work.path());
        let image = pc.cut_now().unwrap();
        drop(guard);
        let after = common::scratch_dir("power-cut-kv-after");
        PowerCut::write_image(&image, after.path()).unwrap();
        let store = DirStore::open_path(after.path(), TENANT, "kv", cfg.clone(), true)
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let kv = KvCache::new(store, HEAD_DIM).unwrap_or_else(|e| panic!("{ctx}: KvCache: {e}"));
        let counts: Vec<u64> = slots.iter().map(|s| kv.tokens(*s).unwrap_or(0)).collect();
        for (s, &n) in slots.iter().zip(&counts) {
            assert!(
                n == acked || n == acked + 1,
                "{ctx}: {} holds {n} tokens, {acked} acknowledged",
                s.name()
            );
            let got = kv
                .read(*s, 0..n)
                .unwrap_or_else(|e| panic!("{ctx}: read {}: {e}", s.name()));
            let want: Vec<f16> = (0..n).flat_map(|t| token(s, t)).collect();
            assert!(
                got.iter()
                    .map(|v| v.to_bits())
                    .eq(want.iter().map(|v| v.to_bits())),
                "{ctx}: {} reads back different tokens",
                s.name()
            );
        }
        assert!(
            kv.store().verify().unwrap().problems.is_empty(),
            "{ctx}: verify"
        );
        // The cache takes the next step.
        let next: Vec<Vec<f16>> = slots.iter().map(|s| token(s, 999)).collect();
        let items: Vec<(KvSlot, &[f16])> = slots
            .iter()
            .zip(&next)
            .map(|(s, v)| (*s, v.as_slice()))
            .collect();
        kv.append_batch(&items)
            .unwrap_or_else(|e| panic!("{ctx}: append after reopen: {e}"));
        points += 1;
    }
    eprintln!(
        "power cut kv: {points} cut points over {steps} decode steps ({ops} file operations)"
    );
    assert!(points >= 50);
}

/// Lineage repairs under power cuts: a `Delta` tensor whose block was damaged is read
/// (healed from its parent and delta, rewritten in place, logged as a same-tier Migrate),
/// then a second `Delta` tensor is put (delta.dat appends). After every cut the damaged
/// tensor reads back as the heal gives it, an acknowledged second tensor reads back, and
/// once read the store verifies clean.
#[test]
fn power_cut_during_lineage_repair_and_delta_puts() {
    use tensorvault_store::{
        BlockIO, BlockInfo, BlockKey, DType, ReconstructPolicy, TensorKind, Tier,
    };
    let n = 3 * common::BLOCK_ELEMS as usize;
    let f32s = |seed: u64, scale: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|i| ((mix(seed ^ i as u64) % 1000) as f32 * scale / 1000.0).to_le_bytes())
            .collect()
    };
    let shape = [n as u32];
    let setup = |root: &Path| -> (u128, u128) {
        let s = DirStore::open_path(root, TENANT, COLL, store_config(), true).unwrap();
        let base = s
            .put_tensor("base", DType::F32, &shape, &f32s(1, 1.0), Tier::Tier1)
            .unwrap();
        let info = |parent| BlockInfo {
            dtype: DType::F32,
            shape: &shape,
            lineage_parent: parent,
            reconstruct: ReconstructPolicy::Delta,
            kind: TensorKind::Generic,
        };
        let child = s
            .put_tensor_with("child", &info(base.tensor_id), &f32s(2, 1.1), Tier::Tier1)
            .unwrap();
        // Damage block 1 of the child.
        let key = BlockKey::new(child.tensor_id, 1);
        let m = s.meta(&key).unwrap().unwrap();
        let mut p = vec![0u8; m.data_len as usize];
        s.block_io()
            .read_block(m.tier, key, m.data_offset, m.data_len, &mut p)
            .unwrap();
        p[3] ^= 0x5A;
        s.block_io()
            .rewrite_block(m.tier, m.data_offset, &p)
            .unwrap();
        s.close().unwrap();
        (base.tensor_id, child.tensor_id)
    };
    // The walked phase: heal by reading, then a second delta tensor.
    let work = |root: &Path, (base, child): (u128, u128)| -> (Option<Vec<u8>>, bool) {
        let Ok(s) = DirStore::open_path(root, TENANT, COLL, store_config(), true) else {
            return (None, false);
        };
        let healed = match s.get_tensor_by_id(child) {
            Ok(t) => t,
            Err(_) => return (None, false),
        };
        let info = BlockInfo {
            dtype: DType::F32,
            shape: &shape,
            lineage_parent: base,
            reconstruct: ReconstructPolicy::Delta,
            kind: TensorKind::Generic,
        };
        let put = s.put_tensor_with("child2", &info, &f32s(3, 0.9), Tier::Tier2);
        (Some(healed.data), put.is_ok() && s.close().is_ok())
    };
    let scratch = common::scratch_dir("power-cut-lineage-count");
    let ids = setup(scratch.path());
    let (pc, guard) = PowerCut::start(scratch.path(), None, Loss::AllUnsynced).unwrap();
    let (healed, done) = work(scratch.path(), ids);
    let (healed, ops) = (healed.expect("uncut heal"), pc.ops());
    assert!(done, "the uncut phase failed");
    drop(guard);
    // What child2 reads back as after an acknowledged put.
    let child2 = {
        let s = DirStore::open_path(scratch.path(), TENANT, COLL, store_config(), false).unwrap();
        let id = tensorvault_store::tensor_id(TENANT, COLL, "child2", ids.0);
        s.get_tensor_by_id(id).unwrap().data
    };
    let mut points = 0;
    for (point, k) in (0..=ops).flat_map(|p| (0..3).map(move |k| (p, k))) {
        let (loss, loss_name) = loss_for(k, 0x11EA ^ point);
        let ctx = format!("lineage: cut after op {point} of {ops} ({loss_name})");
        let dir = common::scratch_dir("power-cut-lineage");
        let ids = setup(dir.path());
        let (pc, guard) = PowerCut::start(dir.path(), Some(point), loss).unwrap();
        let (_, acked) = work(dir.path(), ids);
        let image = pc.cut_now().unwrap();
        drop(guard);
        let after = common::scratch_dir("power-cut-lineage-after");
        PowerCut::write_image(&image, after.path()).unwrap();
        let s = DirStore::open_path(after.path(), TENANT, COLL, store_config(), true)
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let got = s
            .get_tensor_by_id(ids.1)
            .unwrap_or_else(|e| panic!("{ctx}: child: {e}"));
        assert!(
            got.data == healed,
            "{ctx}: child reads differently from the heal"
        );
        match s.get_tensor_by_id(tensorvault_store::tensor_id(TENANT, COLL, "child2", ids.0)) {
            Ok(t) => assert!(t.data == child2, "{ctx}: child2 differs"),
            Err(e) => assert!(!acked, "{ctx}: acknowledged child2 is gone: {e}"),
        }
        let report = s.verify().unwrap();
        assert!(report.problems.is_empty(), "{ctx}: {:?}", report.problems);
        points += 1;
    }
    eprintln!("power cut lineage: {points} cut points ({ops} file operations)");
}
