//! `tensorvault store`: the temporal tensor store (ADR-018) on a local directory
//! `ROOT/<tenant>/<collection>/`, or (feature `s3`) on an object store when ROOT is an
//! `s3://bucket/prefix` URL. This module holds the command line and picks the backend
//! (store_backend.rs, store_s3_cmd.rs); each subcommand is written once over it
//! (store_ops.rs, store_maintain_cmd.rs).
//!
//! Exit codes: 0 success; 1 `verify` found corruption; 2 any error (one line on stderr).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::error::CliError;
pub use crate::store_args::KindArg;
use crate::store_args::{pair, PutArgs};
use crate::store_backend::{Backend, Local};
use crate::store_maintain_cmd;
use crate::store_metrics_cmd;
use crate::store_ops;
use crate::store_report_cmd;

/// Temporal tensor store commands.
#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Store a .npy array (float32, float16, float64 -> float32, int8, uint8; any shape up
    /// to 8 dimensions) as a tensor, split into blocks in one tier. Creates the
    /// collection if needed.
    Put(PutArgs),
    /// Read a tensor back into a .npy file (its stored dtype; dequantized if its blocks
    /// are in a quantized tier).
    Get {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
        /// Output .npy file (written atomically).
        out: PathBuf,
    },
    /// List the collections under ROOT, or the tensors of one collection.
    Ls {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant (with COLLECTION: list that collection's tensors).
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Blocks and bytes per tier, compression, log size and replay time, per collection
    /// and in total.
    Stats {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print the Prometheus text exposition of every collection instead.
        #[arg(long, conflicts_with = "json")]
        prometheus: bool,
    },
    /// Serve `GET /metrics` (Prometheus text format) for every collection under ROOT,
    /// refreshed on each scrape, until killed.
    ServeMetrics(store_metrics_cmd::ServeMetricsArgs),
    /// Write a self-contained HTML report with SVG charts: blocks and bytes per tier, the
    /// migration score distribution and, with --history, a KV-cache simulation over time.
    Report(store_report_cmd::ReportArgs),
    /// Read and checksum every block (of every collection under ROOT when none is named).
    /// Exit code 1 if anything is corrupt.
    Verify {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant.
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move a tensor's blocks to another tier (re-quantizing them).
    Migrate {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
        /// Target tier: 0 raw, 1 8-bit, 2 5-bit, 3 3-bit.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
        tier: u8,
    },
    /// Run the tiering scheduler (of every collection under ROOT when none is named):
    /// demote cold blocks, promote hot ones, and with --max-blocks evict the coldest
    /// blocks of full tiers; prints what moved and why, and the blocks held in their
    /// tier because a colder tier cannot encode their values (NaN, infinity). --watch
    /// repeats it.
    Maintain(store_maintain_cmd::MaintainArgs),
    /// Rewrite the metadata log as a snapshot of the live index (of every collection
    /// under ROOT when none is named).
    Compact {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant.
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
    },
    /// Delete a tensor.
    Rm {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
    },
}

/// `tensorvault store`: a subcommand, plus the object-store options (feature `s3`).
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    cmd: StoreCmd,
    #[cfg(feature = "s3")]
    #[command(flatten)]
    s3: crate::store_s3_cmd::S3Args,
}

/// Run `tensorvault store ...`: on the object store when ROOT is an `s3://` URL
/// (feature `s3`), else on the local directory ROOT.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run_args(a: StoreArgs, quiet: bool) -> Result<i32, CliError> {
    let root = root_of(&a.cmd).to_path_buf();
    if !root.to_str().is_some_and(|s| s.starts_with("s3://")) {
        return run(&Local { root }, a.cmd, quiet);
    }
    #[cfg(feature = "s3")]
    return run(
        &crate::store_s3_cmd::ObjectRoot::new(&root, &a.s3)?,
        a.cmd,
        quiet,
    );
    #[cfg(not(feature = "s3"))]
    Err(CliError::Usage {
        arg: "ROOT",
        reason: "s3:// stores need a tensorvault built with `--features s3`".into(),
    })
}

fn root_of(cmd: &StoreCmd) -> &Path {
    match cmd {
        StoreCmd::Put(p) => &p.root,
        StoreCmd::Get { root, .. }
        | StoreCmd::Ls { root, .. }
        | StoreCmd::Stats { root, .. }
        | StoreCmd::Verify { root, .. }
        | StoreCmd::Migrate { root, .. }
        | StoreCmd::Compact { root, .. }
        | StoreCmd::Rm { root, .. } => root,
        StoreCmd::ServeMetrics(a) => &a.root,
        StoreCmd::Report(a) => &a.root,
        StoreCmd::Maintain(a) => &a.root,
    }
}

/// The commands that read a local directory themselves (metrics and the HTML report):
/// refused on other backends.
fn local_only<B: Backend>(_: &B, what: &str) -> Result<(), CliError> {
    if B::LOCAL {
        return Ok(());
    }
    Err(CliError::Usage {
        arg: "ROOT",
        reason: format!("{what} needs a local store root"),
    })
}

/// Run a store subcommand on backend `b`; returns the exit code.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run<B: Backend>(b: &B, cmd: StoreCmd, quiet: bool) -> Result<i32, CliError> {
    match cmd {
        StoreCmd::Put(a) => store_ops::put(b, &a, &crate::report::Ctx { quiet }),
        StoreCmd::Get {
            tenant,
            collection,
            name,
            out,
            ..
        } => store_ops::get(b, &tenant, &collection, &name, &out),
        StoreCmd::Ls {
            tenant,
            collection,
            json,
            ..
        } => store_ops::ls(b, pair(tenant, collection)?, json),
        StoreCmd::Stats {
            root,
            prometheus: true,
            ..
        } => {
            local_only(b, "stats --prometheus")?;
            store_metrics_cmd::stats_prometheus(&root)
        }
        StoreCmd::Stats { json, .. } => store_ops::stats(b, json),
        StoreCmd::ServeMetrics(a) => {
            local_only(b, "serve-metrics")?;
            store_metrics_cmd::serve(&a)
        }
        StoreCmd::Report(a) => {
            local_only(b, "report")?;
            store_report_cmd::run(&a)
        }
        StoreCmd::Maintain(a) => store_maintain_cmd::run(b, &a),
        StoreCmd::Verify {
            tenant,
            collection,
            json,
            ..
        } => store_ops::verify(b, pair(tenant, collection)?, json, quiet),
        StoreCmd::Migrate {
            tenant,
            collection,
            name,
            tier,
            ..
        } => store_ops::migrate(b, &tenant, &collection, &name, tier),
        StoreCmd::Compact {
            tenant, collection, ..
        } => store_ops::compact(b, pair(tenant, collection)?),
        StoreCmd::Rm {
            tenant,
            collection,
            name,
            ..
        } => store_ops::rm(b, &tenant, &collection, &name),
    }
}
