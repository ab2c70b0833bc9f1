//! `tensorvault store ... s3://bucket/prefix ...` (cargo feature `s3`): the same store
//! commands on an S3-compatible object store (tensorvault-store-object). ROOT is the
//! `s3://bucket/prefix` URL; credentials come from the usual AWS environment variables;
//! `--endpoint` names a self-hosted S3, `--cache-dir` a local block cache.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use tensorvault_store::{CollectionConfig, Durability, StoreConfig, SystemClock};
use tensorvault_store_object::{
    connect_s3, list_collections, open_store, ObjectLocation, ObjectOptions, ObjectTensorStore,
};

use crate::error::CliError;
use crate::npy;
use crate::report::{self, Table};
use crate::store_cmd::{DurabilityArg, PutArgs, StoreCmd};

/// Options of the object-store backend (used when ROOT is an `s3://` URL).
#[derive(Debug, Args)]
pub struct S3Args {
    /// Endpoint of a self-hosted S3 (e.g. http://127.0.0.1:9000) for an s3:// ROOT.
    #[arg(long, global = true)]
    pub endpoint: Option<String>,
    /// Local block cache directory for an s3:// ROOT (bounded by --cache-mb).
    #[arg(long, global = true)]
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the local block cache in MiB.
    #[arg(long, global = true, default_value_t = 1024)]
    pub cache_mb: u64,
}

fn obj(e: tensorvault_store_object::ObjectErr) -> CliError {
    CliError::Store(e.into_store("s3"))
}

struct Target {
    loc: ObjectLocation,
    opts: ObjectOptions,
}

impl Target {
    fn new(root: &Path, a: &S3Args) -> Result<Self, CliError> {
        let url = root.to_str().unwrap_or_default();
        Ok(Self {
            loc: ObjectLocation::parse(url).map_err(obj)?,
            opts: ObjectOptions {
                endpoint: a.endpoint.clone(),
                cache_dir: a.cache_dir.clone(),
                cache_bytes: a.cache_mb.saturating_mul(1 << 20),
                ..ObjectOptions::default()
            },
        })
    }

    fn open(
        &self,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
        write: bool,
    ) -> Result<ObjectTensorStore, CliError> {
        let opts = ObjectOptions {
            read_only: !write,
            create: write,
            ..self.opts.clone()
        };
        let s3 = connect_s3(&self.loc, &opts).map_err(obj)?;
        Ok(open_store(
            s3,
            &self.loc,
            tenant,
            collection,
            SystemClock::new(),
            cfg,
            &opts,
        )?)
    }

    fn collections(
        &self,
        one: Option<(String, String)>,
    ) -> Result<Vec<(String, String)>, CliError> {
        if let Some(p) = one {
            return Ok(vec![p]);
        }
        let s3 = connect_s3(&self.loc, &self.opts).map_err(obj)?;
        list_collections(&s3, &self.loc).map_err(obj)
    }
}

/// Run `cmd` against the object store its ROOT names.
///
/// # Errors
/// Any [`CliError`].
pub fn run(cmd: StoreCmd, a: &S3Args) -> Result<i32, CliError> {
    match cmd {
        StoreCmd::Put(p) => put(&p, a),
        StoreCmd::Get {
            root,
            tenant,
            collection,
            name,
            out,
        } => {
            let s =
                Target::new(&root, a)?.open(&tenant, &collection, StoreConfig::default(), false)?;
            let t = s.get_tensor(&name)?;
            let shape: Vec<u64> = t.info.shape.iter().map(|&d| u64::from(d)).collect();
            npy::write_tensor(&out, t.info.dtype, &shape, &t.data)?;
            println!(
                "{name}: {} {:?} ({}) -> {}",
                t.info.dtype,
                t.info.shape,
                report::size(t.data.len() as u64),
                out.display()
            );
            Ok(0)
        }
        StoreCmd::Ls {
            root,
            tenant,
            collection,
            json,
        } => ls(&Target::new(&root, a)?, tenant.zip(collection), json),
        StoreCmd::Verify {
            root,
            tenant,
            collection,
            json,
        } => verify(&Target::new(&root, a)?, tenant.zip(collection), json),
        StoreCmd::Stats { root, json, .. } => stats(&Target::new(&root, a)?, json),
        StoreCmd::Rm {
            root,
            tenant,
            collection,
            name,
        } => {
            let s =
                Target::new(&root, a)?.open(&tenant, &collection, StoreConfig::default(), true)?;
            let n = s.delete_tensor(&name)?;
            s.close()?;
            if n == 0 {
                return Err(tensorvault_store::StoreErr::TensorNotFound { name }.into());
            }
            println!("{name}: {n} blocks deleted");
            Ok(0)
        }
        StoreCmd::Compact {
            root,
            tenant,
            collection,
        } => {
            let t = Target::new(&root, a)?;
            for (tn, c) in t.collections(tenant.zip(collection))? {
                let s = t.open(&tn, &c, StoreConfig::default(), true)?;
                let before = s.log_records()?;
                s.compact()?;
                println!("{tn}/{c}: log {before} -> {} records", s.log_records()?);
                s.close()?;
            }
            Ok(0)
        }
        StoreCmd::Migrate {
            root,
            tenant,
            collection,
            name,
            tier,
        } => {
            let s =
                Target::new(&root, a)?.open(&tenant, &collection, StoreConfig::default(), true)?;
            let moved = s.migrate_tensor(
                &name,
                tensorvault_store::Tier::from_u8(tier).unwrap_or(tensorvault_store::Tier::Tier1),
            )?;
            s.close()?;
            println!("{name}: {moved} blocks moved to tier {tier}");
            Ok(0)
        }
        StoreCmd::ServeMetrics(_) => Err(CliError::Usage {
            arg: "ROOT",
            reason: "serve-metrics needs a local store root".into(),
        }),
        StoreCmd::Report(_) => Err(CliError::Usage {
            arg: "ROOT",
            reason: "report needs a local store root".into(),
        }),
        StoreCmd::Maintain(_) => Err(CliError::Usage {
            arg: "ROOT",
            reason: "maintain needs a local store root".into(),
        }),
    }
}

fn put(p: &PutArgs, a: &S3Args) -> Result<i32, CliError> {
    let (dtype, shape, data) = npy::read_tensor(&p.input)?;
    let shape32: Vec<u32> = shape
        .iter()
        .map(|&d| {
            u32::try_from(d).map_err(|_| CliError::Npy {
                path: p.input.display().to_string(),
                reason: format!("dimension {d} exceeds 2^32-1"),
            })
        })
        .collect::<Result<_, _>>()?;
    let geometry = match (p.kv_head_dim, p.block_elems) {
        (Some(h), _) => CollectionConfig::kv_cache(h)?,
        (None, Some(n)) => CollectionConfig::with_block_elems(n),
        (None, None) => CollectionConfig::default(),
    };
    let cfg = StoreConfig {
        collection: geometry,
        durability: match p.durability {
            DurabilityArg::EveryWrite => Durability::EveryWrite,
            DurabilityArg::Os => Durability::Os,
        },
        ..StoreConfig::default()
    };
    let s = Target::new(&p.root, a)?.open(&p.tenant, &p.collection, cfg, true)?;
    let t = std::time::Instant::now();
    let tier = tensorvault_store::Tier::from_u8(p.tier).unwrap_or(tensorvault_store::Tier::Tier1);
    let block = tensorvault_store::BlockInfo::new(dtype, &shape32).with_kind(p.kind.kind());
    let info = s.put_tensor_with(&p.name, &block, &data, tier)?;
    s.close()?;
    println!(
        "{}: {} {:?} -> {} blocks in tier {}, {} stored, {:.0} MB/s",
        p.name,
        dtype,
        shape,
        info.blocks,
        p.tier,
        report::size(info.stored_bytes),
        info.raw_bytes as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    Ok(0)
}

fn ls(t: &Target, one: Option<(String, String)>, json: bool) -> Result<i32, CliError> {
    let Some((tenant, collection)) = one else {
        let cols = t.collections(None)?;
        if json {
            let v: Vec<_> = cols
                .iter()
                .map(|(t, c)| json!({"tenant": t, "collection": c}))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&v).expect("JSON values serialize")
            );
        } else {
            let mut table = Table::new(&["tenant", "collection"]);
            for (tn, c) in cols {
                table.row(vec![tn, c]);
            }
            print!("{}", table.render());
        }
        return Ok(0);
    };
    let s = t.open(&tenant, &collection, StoreConfig::default(), false)?;
    crate::store_cmd::print_tensors(&s.tensors()?, json);
    Ok(0)
}

fn verify(t: &Target, one: Option<(String, String)>, json: bool) -> Result<i32, CliError> {
    let mut out = Vec::new();
    let mut corrupt = 0;
    for (tn, c) in t.collections(one)? {
        let s = t.open(&tn, &c, StoreConfig::default(), false)?;
        let r = s.verify()?;
        corrupt += r.problems.len();
        if !json {
            let status = if r.problems.is_empty() {
                "ok"
            } else {
                "CORRUPT"
            };
            println!(
                "{tn}/{c}: {} blocks, {} checked: {status}",
                r.checked,
                report::size(r.bytes)
            );
            for p in &r.problems {
                println!(
                    "  block {} ({}): {}",
                    p.key,
                    p.tensor.as_deref().unwrap_or("?"),
                    p.error
                );
            }
        }
        out.push(json!({"tenant": tn, "collection": c, "blocks": r.checked, "bytes": r.bytes,
            "problems": r.problems.iter().map(|p| json!({"block": p.key.to_string(), "tensor": p.tensor, "error": p.error})).collect::<Vec<_>>()}));
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("JSON values serialize")
        );
    }
    Ok(i32::from(corrupt > 0))
}

fn stats(t: &Target, json: bool) -> Result<i32, CliError> {
    let mut out = Vec::new();
    for (tn, c) in t.collections(None)? {
        let s = t.open(&tn, &c, StoreConfig::default(), false)?;
        let st = s.stats()?;
        let m = s.block_io().collection().manifest();
        let req = tensorvault_store_object::requests(&s);
        if !json {
            println!(
                "{tn}/{c}: {} tensors, blocks {}, stored {}, log {} records in 1 snapshot + {} segments, opened with {} GETs",
                st.tensors,
                st.blocks.iter().map(u64::to_string).collect::<Vec<_>>().join("/"),
                report::size(st.payload_bytes.iter().sum()),
                st.log_records,
                m.segments.len(),
                req.gets
            );
        }
        out.push(json!({"tenant": tn, "collection": c, "tensors": st.tensors, "blocks": st.blocks,
            "payload_bytes": st.payload_bytes, "log_records": st.log_records, "segments": m.segments.len(),
            "open_gets": req.gets, "replay_ms": st.replay_nanos as f64 / 1e6}));
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("JSON values serialize")
        );
    }
    Ok(0)
}
