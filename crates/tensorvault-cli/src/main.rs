//! `tensorvault`: store embeddings, weights and tensor streams small, fast and verifiably.
//!
//! Every error is printed as one line on stderr with exit code 2, and no partial output
//! file is left behind (outputs are written to a temporary file and renamed).

mod cgeb_cmd;
mod cvc_cmd;
mod cvc_quality;
mod demo;
mod demo_common;
mod demo_store;
mod error;
mod kv_cmd;
mod mobi_cmd;
mod mobi_convert_cmd;
mod mobi_run_cmd;
mod npy;
mod npy_header;
mod quant_cmd;
mod registry_cmd;
mod registry_open;
mod registry_save_cmd;
mod report;
mod signals;
mod store_args;
mod store_backend;
mod store_cmd;
mod store_maintain_cmd;
mod store_metrics_cmd;
mod store_ops;
mod store_print;
mod store_report_cmd;
#[cfg(feature = "s3")]
mod store_s3_cmd;
mod svg_charts;

use clap::{Parser, Subcommand};

/// tensorvault: compressed vector collections (CVC) and more, byte-compatible with the
/// Python reference `decompressed`. Format specs: docs/formats/.
#[derive(Debug, Parser)]
#[command(name = "tensorvault", version, about, long_about = None)]
struct Cli {
    /// Hide progress bars and step messages.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Fused embedding records (.cgeb + .cgei batches): pack, inspect, get, verify.
    #[command(subcommand)]
    Cgeb(cgeb_cmd::CgebCmd),
    /// Compressed vector collections (.cvc): pack, load, inspect, verify.
    #[command(subcommand)]
    Cvc(cvc_cmd::CvcCmd),
    /// Run the main workload end to end: 100,000 x 768 embeddings packed as fp16, int8 and
    /// bf16, loaded back, with sizes, ratios, throughput and reconstruction error.
    Demo(demo::DemoArgs),
    /// KV prefix caches (prompt KV reused across requests and processes): ls, stats,
    /// verify, evict.
    #[command(subcommand)]
    Kv(kv_cmd::KvCmd),
    /// Compact mobile model files (.mobi): inspect, validate, quantize, graph, example.
    #[command(subcommand)]
    Mobi(mobi_cmd::MobiCmd),
    /// Quantization codec (groupwise 2..8-bit): evaluate size, error and speed per width.
    #[command(subcommand)]
    Quant(quant_cmd::QuantCmd),
    /// Weight registry (safetensors checkpoints): init, ls, verify, rollback, inspect.
    #[command(subcommand)]
    Registry(registry_cmd::RegistryCmd),
    /// Temporal tensor store: tensors in quantized tiers (raw, 8, 5, 3 bits) with a
    /// CRC-protected metadata log and crash recovery.
    Store(store_cmd::StoreArgs),
}

fn main() {
    signals::watch_termination_signals();
    signals::quiet_broken_pipe();
    let cli = Cli::parse();
    // The one context (progress on or off) every command gets.
    let ctx = report::Ctx { quiet: cli.quiet };
    let result = match cli.cmd {
        Cmd::Cgeb(c) => cgeb_cmd::run(c, &ctx),
        Cmd::Cvc(c) => cvc_cmd::run(c, ctx.quiet),
        Cmd::Demo(a) => demo::run(&a, ctx.quiet).map(|()| 0),
        Cmd::Kv(c) => kv_cmd::run(c),
        Cmd::Mobi(c) => mobi_cmd::run(c, &ctx),
        Cmd::Quant(c) => quant_cmd::run(c, &ctx),
        Cmd::Registry(c) => registry_cmd::run(c, &ctx),
        Cmd::Store(c) => store_cmd::run_args(c, ctx.quiet),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
