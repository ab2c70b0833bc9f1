//! The store subcommands that read or change collections, each written once over a
//! [`Backend`] (a local directory or, with feature `s3`, an object store): put, get, ls,
//! stats, verify, migrate, rm, compact. Exit codes: 0 success; 1 `verify` found
//! corruption; errors are returned (the caller prints them and exits with 2).

use std::path::Path;

use tensorvault_store::{BlockInfo, CollectionConfig, StoreConfig, StoreErr, StoreStats, CODEC_V4};

use crate::error::CliError;
use crate::npy;
use crate::report;
use crate::store_args::{tier_of, AllocationArg, PutArgs};
use crate::store_backend::{Backend, Mode};
use crate::store_print::{print_collections, print_stats, print_tensors, print_verify, Verified};

/// `store put`: a .npy file as a tensor, creating the collection if needed.
///
/// # Errors
/// .npy reading errors, a dimension over 2^32-1, the store's errors.
pub fn put<B: Backend>(b: &B, a: &PutArgs, ctx: &report::Ctx) -> Result<i32, CliError> {
    let (dtype, shape, data) = npy::read_tensor(&a.input, a.clip)?;
    let shape32: Vec<u32> = shape
        .iter()
        .map(|&d| {
            u32::try_from(d).map_err(|_| CliError::Npy {
                path: a.input.display().to_string(),
                reason: format!("dimension {d} exceeds 2^32-1"),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut geometry = match (a.kv_head_dim, a.block_elems) {
        (Some(h), _) => CollectionConfig::kv_cache(h)?,
        (None, Some(n)) => CollectionConfig::with_block_elems(n),
        (None, None) => CollectionConfig::default(),
    };
    geometry.entropy = a.entropy;
    geometry.extents = a.allocation == AllocationArg::Extent;
    if let Some(n) = a.slot_align {
        geometry.slot_align = n;
    }
    // Codec 4: a KV cache gets its key widths (tier 3 keys at 4 bits); any other
    // collection only the codec byte, as Python's `Store(codec=4)`, so its slots stay
    // sized for the tier's value bits.
    let codec_v4 = |g: CollectionConfig| match a.kv_head_dim {
        Some(_) => g.with_codec_v4(),
        None => CollectionConfig {
            codec: CODEC_V4,
            ..g
        },
    };
    if a.kv_ecsq {
        geometry = codec_v4(geometry);
        geometry.entropy = true;
        geometry.kv_ecsq = true;
        geometry.kv_ecsq_tier2 = a.kv_ecsq_tier2;
    }
    if a.kv_keys_ecsq {
        geometry = codec_v4(geometry);
        geometry.entropy = true;
        geometry.kv_keys_ecsq = true;
        geometry.kv_keys_wstep = a.kv_keys_wstep;
    }
    if a.ecsq {
        geometry = codec_v4(geometry);
        geometry.entropy = true;
        geometry.ecsq = true;
    }
    if a.row_gains {
        geometry = codec_v4(geometry);
        geometry.row_gains = true;
        geometry.centre = a.centre;
    }
    geometry.ecsq_model = a.ecsq_model;
    geometry.wide_lanes = a.wide_lanes;
    let cfg = StoreConfig {
        collection: geometry,
        durability: a.durability.durability(),
        ..StoreConfig::default()
    };
    let s = b.open(&a.tenant, &a.collection, cfg, Mode::Create)?;
    let t = std::time::Instant::now();
    let block = BlockInfo::new(dtype, &shape32).with_kind(a.kind.kind());
    let pb = ctx.bar(data.len() as u64, "storing", report::Unit::Bytes, false);
    let progress = report::Ctx::callback(&pb);
    let info = s.put_tensor_progress(&a.name, &block, &data, tier_of(a.tier), Some(&progress))?;
    pb.finish_and_clear();
    s.close()?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{}: {} {:?} -> {} blocks in tier {}, {} stored ({:.2}x smaller than {}), {:.0} MB/s",
        a.name,
        dtype,
        shape,
        info.blocks,
        a.tier,
        report::size(info.stored_bytes),
        info.raw_bytes as f64 / info.stored_bytes.max(1) as f64,
        report::size(info.raw_bytes),
        info.raw_bytes as f64 / secs / 1e6
    );
    Ok(0)
}

/// `store get`: a tensor into a .npy file (written atomically).
///
/// # Errors
/// The store's errors ([`StoreErr::TensorNotFound`]); .npy writing errors.
pub fn get<B: Backend>(
    b: &B,
    tenant: &str,
    collection: &str,
    name: &str,
    out: &Path,
) -> Result<i32, CliError> {
    let s = b.open(tenant, collection, StoreConfig::default(), Mode::Read)?;
    let t = s.get_tensor(name)?;
    s.close()?;
    let shape: Vec<u64> = t.info.shape.iter().map(|&d| u64::from(d)).collect();
    npy::write_tensor(out, t.info.dtype, &shape, &t.data)?;
    println!(
        "{name}: {} {:?} ({}) -> {}",
        t.info.dtype,
        t.info.shape,
        report::size(t.data.len() as u64),
        out.display()
    );
    Ok(0)
}

/// `store ls`: the tensors of one collection, or every collection with its counts.
///
/// # Errors
/// The store's errors.
pub fn ls<B: Backend>(b: &B, one: Option<(String, String)>, json: bool) -> Result<i32, CliError> {
    if let Some((tenant, collection)) = one {
        let s = b.open(&tenant, &collection, StoreConfig::default(), Mode::Snapshot)?;
        print_tensors(&s.tensors()?, json);
        return Ok(0);
    }
    let mut rows = Vec::new();
    for (tenant, collection) in b.collections()? {
        let s = b.open(&tenant, &collection, StoreConfig::default(), Mode::Snapshot)?;
        let st = s.stats()?;
        rows.push((tenant, collection, st));
    }
    print_collections(&rows, json);
    Ok(0)
}

/// `store stats`: blocks and bytes per tier of every collection, and in total.
///
/// # Errors
/// The store's errors.
pub fn stats<B: Backend>(b: &B, json: bool) -> Result<i32, CliError> {
    let mut per = Vec::new();
    let mut total = StoreStats::default();
    for (tenant, collection) in b.collections()? {
        let s = b.open(&tenant, &collection, StoreConfig::default(), Mode::Snapshot)?;
        let st = s.stats()?;
        total.tensors += st.tensors;
        total.log_records += st.log_records;
        for i in 0..4 {
            total.blocks[i] += st.blocks[i];
            total.payload_bytes[i] += st.payload_bytes[i];
            total.raw_bytes[i] += st.raw_bytes[i];
            total.usage[i].bytes += st.usage[i].bytes;
            total.usage[i].allocated_bytes += st.usage[i].allocated_bytes;
            total.usage[i].live_bytes += st.usage[i].live_bytes;
            total.usage[i].slots += st.usage[i].slots;
            total.usage[i].free_slots += st.usage[i].free_slots;
            // Across collections: the largest of their medians.
            total.step_median[i] = total.step_median[i].max(st.step_median[i]);
        }
        let extra = b.extra(&s);
        per.push((tenant, collection, st, extra));
    }
    print_stats(&per, &total, json);
    Ok(0)
}

/// `store verify`: read and checksum every block of the named collection or of every
/// collection; exit code 1 if anything is corrupt.
///
/// # Errors
/// The store's errors (corruption is reported, not returned).
pub fn verify<B: Backend>(
    b: &B,
    one: Option<(String, String)>,
    json: bool,
    quiet: bool,
) -> Result<i32, CliError> {
    let cols = b.collections_or(one)?;
    let bar = report::bar(cols.len() as u64, "verify", quiet || json);
    let mut results = Vec::new();
    for (tenant, collection) in cols {
        let s = b.open(&tenant, &collection, StoreConfig::default(), Mode::Inspect)?;
        let report = s.verify()?;
        let (log_skipped, log_tail) = {
            let st = s.replay_stats().0;
            (st.skipped_total, st.truncated_bytes)
        };
        results.push(Verified {
            tenant,
            collection,
            report,
            log_skipped,
            log_tail,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let corrupt: usize = results.iter().map(Verified::defects).sum();
    print_verify(&results, B::LOG_NAME, json);
    Ok(i32::from(corrupt > 0))
}

/// `store migrate`: move a tensor's blocks to `tier`.
///
/// # Errors
/// The store's errors.
pub fn migrate<B: Backend>(
    b: &B,
    tenant: &str,
    collection: &str,
    name: &str,
    tier: u8,
) -> Result<i32, CliError> {
    let s = b.open(tenant, collection, StoreConfig::default(), Mode::Write)?;
    let moved = s.migrate_tensor(name, tier_of(tier))?;
    s.close()?;
    println!("{name}: {moved} blocks moved to tier {tier}");
    Ok(0)
}

/// `store rm`: delete a tensor.
///
/// # Errors
/// [`StoreErr::TensorNotFound`] if it has no blocks; the store's errors.
pub fn rm<B: Backend>(b: &B, tenant: &str, collection: &str, name: &str) -> Result<i32, CliError> {
    let s = b.open(tenant, collection, StoreConfig::default(), Mode::Write)?;
    let n = s.delete_tensor(name)?;
    s.close()?;
    if n == 0 {
        return Err(StoreErr::TensorNotFound { name: name.into() }.into());
    }
    println!("{name}: {n} blocks deleted");
    Ok(0)
}

/// `store compact`: rewrite the metadata log of the named collection or of every
/// collection as a snapshot of its live index.
///
/// # Errors
/// The store's errors.
pub fn compact<B: Backend>(b: &B, one: Option<(String, String)>) -> Result<i32, CliError> {
    for (tenant, collection) in b.collections_or(one)? {
        let s = b.open(&tenant, &collection, StoreConfig::default(), Mode::Write)?;
        let before = s.log_records()?;
        s.compact()?;
        let after = s.log_records()?;
        s.close()?;
        println!(
            "{tenant}/{collection}: {} {before} -> {after} records",
            B::LOG_NAME
        );
    }
    Ok(0)
}
