//! `tensorvault registry`: create and manage a weight registry directory (seed 003).
//!
//! Every subcommand takes ROOT first, then VERSION where it names one. Errors are printed
//! here as one line on stderr with exit code 2, like every other subcommand.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_registry::checkpoint::{read_metadata, METADATA_FILE};
use tensorvault_registry::model::{checkpoint_format, resolve_source, MODEL_FORMAT_NAME};
use tensorvault_registry::model_tensor::{load_model_dir, open_source};
use tensorvault_registry::{
    FusionConfig, InitializationStrategy, KaimingMode, Nonlinearity, RegistryError,
    WeightInitializer, WeightRegistry,
};
use tensorvault_registry::{LoadedModel, ModelRegistry, Preset, Verify};

use crate::registry_open::{existing, open};
use crate::registry_save_cmd::{save, SaveArgs};
use crate::report::Table;

/// Weight registry commands.
#[derive(Debug, Subcommand)]
pub enum RegistryCmd {
    /// Create a registry and save freshly initialized weights as its first version.
    Init(InitArgs),
    /// List versions with checksum, date, metrics and golden/current markers.
    Ls {
        /// Registry root.
        root: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Verify a version: every file's SHA-256 (and per-chunk digests), every safetensors
    /// header and the index of a sharded version. Exit 1 on damage.
    Verify {
        /// Registry root.
        root: PathBuf,
        /// Version string.
        version: String,
    },
    /// Save a new version (ROOT [VERSION] --from PATH): a FuseMoE checkpoint directory or
    /// any safetensors model (`--from`), or the registry's active weights. VERSION is used
    /// as given (taken or invalid: an error). Never changes the current version: see
    /// `registry activate`.
    Save(SaveArgs),
    /// Make an existing version the current one, newer or older than the current (loaded
    /// and verified first; a process serving the registry through the library swaps it in
    /// atomically with its own `activate`). The only command besides `rollback` that moves
    /// the current pointer.
    Activate {
        /// Registry root.
        root: PathBuf,
        /// Version string.
        version: String,
    },
    /// Make an existing version the current one (the same as `activate`, under the name
    /// used for going back).
    Rollback {
        /// Registry root.
        root: PathBuf,
        /// Version string.
        version: String,
    },
    /// Tensors of a registry version (ROOT VERSION, or its directory), a .safetensors
    /// file, an index JSON or a Hugging Face model directory: dtype, shape,
    /// mean/std/min/max (float dtypes). A version's files are first checked against the
    /// SHA-256 digests in its metadata.json (a mismatch is an error); a bare checkpoint has
    /// no checksum to check, which is said on stderr.
    Inspect {
        /// Registry root (with VERSION), version directory, .safetensors file, index JSON
        /// or model directory.
        ckpt: PathBuf,
        /// A version of the registry at the first argument.
        version: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Skip the SHA-256 check of a checkpoint directory (says so on stderr).
        #[arg(long)]
        no_verify: bool,
    },
}

/// Initialization strategy on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StrategyArg {
    /// Kaiming uniform, fan-in, ReLU gain.
    KaimingUniform,
    /// Kaiming normal, fan-in, ReLU gain.
    KaimingNormal,
    /// Xavier uniform.
    XavierUniform,
    /// Xavier normal.
    XavierNormal,
    /// Orthogonal, gain 1.
    Orthogonal,
}

/// Arguments of `registry init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Registry root (created if missing; must not hold versions yet).
    pub root: PathBuf,
    /// Seed of the deterministic initializer.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Strategy for weight matrices (biases are zero, the temperature one).
    #[arg(long, value_enum, default_value = "kaiming-uniform")]
    pub strategy: StrategyArg,
    /// Version string of the first version (default `0.0.0-init`).
    #[arg(value_name = "VERSION")]
    pub version: Option<String>,
    /// The same as VERSION, as an option.
    #[arg(long = "version", value_name = "VERSION", conflicts_with = "version")]
    pub version_opt: Option<String>,
    /// Use a tiny FusionConfig (a few KB) instead of the full ~312 MB shapes.
    #[arg(long)]
    pub tiny: bool,
}

impl StrategyArg {
    fn strategy(self) -> InitializationStrategy {
        let (mode, nonlinearity) = (KaimingMode::FanIn, Nonlinearity::ReLU);
        match self {
            Self::KaimingUniform => InitializationStrategy::KaimingUniform { mode, nonlinearity },
            Self::KaimingNormal => InitializationStrategy::KaimingNormal { mode, nonlinearity },
            Self::XavierUniform => InitializationStrategy::XavierUniform,
            Self::XavierNormal => InitializationStrategy::XavierNormal,
            Self::Orthogonal => InitializationStrategy::Orthogonal { gain: 1.0 },
        }
    }
}

/// Run a `registry` subcommand; errors are printed here (one line, exit code 2).
///
/// # Errors
/// Never: the `Result` matches the other subcommands' signature.
pub fn run(cmd: RegistryCmd, ctx: &crate::report::Ctx) -> Result<i32, crate::error::CliError> {
    let verifying = matches!(cmd, RegistryCmd::Verify { .. });
    let r = match cmd {
        RegistryCmd::Init(a) => init(&a),
        RegistryCmd::Ls { root, json } => ls(&root, json),
        RegistryCmd::Verify { root, version } => verify(&root, &version),
        RegistryCmd::Save(a) => save(&a, ctx),
        RegistryCmd::Activate { root, version } => activate(&root, &version, false),
        RegistryCmd::Rollback { root, version } => activate(&root, &version, true),
        RegistryCmd::Inspect {
            ckpt,
            version,
            json,
            no_verify,
        } => match version {
            Some(v) => existing(&ckpt)
                .and_then(|reg| listed_dir(&reg, &v))
                .and_then(|dir| inspect(&dir, json, no_verify)),
            None => inspect(&ckpt, json, no_verify),
        },
    };
    Ok(match r {
        Ok(()) => 0,
        // `verify` found damage (the weights' or the manifest's checksum): 1, like every
        // other verify command; 2 stays for errors that stop the check itself.
        Err(
            e @ (RegistryError::ChecksumMismatch { .. }
            | RegistryError::ChunkChecksumMismatch { .. }
            | RegistryError::ListedChecksumMismatch { .. }
            | RegistryError::ManifestChecksum { .. }),
        ) if verifying => {
            eprintln!("CORRUPT: {e}");
            1
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    })
}

fn init(a: &InitArgs) -> Result<(), RegistryError> {
    let fusion = if a.tiny {
        FusionConfig::tiny()
    } else {
        FusionConfig::default()
    };
    let version = a
        .version
        .clone()
        .or_else(|| a.version_opt.clone())
        .unwrap_or_else(|| "0.0.0-init".into());
    tensorvault_registry::validate_version(&version)?;
    let reg = open(&a.root, fusion.clone(), a.seed)?;
    if let Some(v) = reg.list_versions().first() {
        return Err(RegistryError::VersionExists {
            version: v.version.clone(),
        });
    }
    let t = std::time::Instant::now();
    let mut w =
        WeightInitializer::with_strategy(a.seed, a.strategy.strategy()).init_all(&fusion, true)?;
    let init_s = t.elapsed().as_secs_f64();
    w.version.version = version;
    let t = std::time::Instant::now();
    let v = reg.save_checkpoint(&w, None)?;
    let save_s = t.elapsed().as_secs_f64();
    reg.load_checkpoint(&v.version)?;
    let mb = fusion.total_bytes() as f64 / 1e6;
    println!(
        "created {} version {} ({mb:.1} MB, init {init_s:.2} s, save {save_s:.2} s)\n{}",
        a.root.display(),
        v.version,
        v.checksum
    );
    Ok(())
}

fn ls(root: &Path, as_json: bool) -> Result<(), RegistryError> {
    let reg = existing(root)?;
    let (golden, current) = (reg.golden(), reg.current_pointer());
    let versions = reg.list_versions();
    if as_json {
        let v = json!({ "golden": golden, "current": current, "versions": versions });
        println!("{v:#}");
        return Ok(());
    }
    let mut t = Table::new(&["version", "created", "checksum", "metrics", "marks"]);
    for v in &versions {
        let metrics = v.metrics.as_ref().map_or_else(String::new, |m| {
            let mut s = format!(
                "epoch {} loss {:.4} lr {:.1e}",
                m.epoch, m.loss, m.learning_rate
            );
            for (k, v) in &m.extra {
                s.push_str(&format!(" {k}={v}"));
            }
            s
        });
        let mut marks = Vec::new();
        if golden.as_deref() == Some(v.version.as_str()) {
            marks.push("golden");
        }
        if current.as_deref() == Some(v.version.as_str()) {
            marks.push("current");
        }
        t.row(vec![
            v.version.clone(),
            v.created_at.clone(),
            v.checksum.get(..23).unwrap_or(&v.checksum).to_owned(),
            metrics,
            marks.join(","),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

/// Whether `version` of the registry at `root` is a model version (any safetensors
/// checkpoint) rather than a native FuseMoE checkpoint.
fn is_model_version(reg: &WeightRegistry, version: &str) -> Result<bool, RegistryError> {
    Ok(checkpoint_format(&listed_dir(reg, version)?)? == MODEL_FORMAT_NAME)
}

fn verify(root: &Path, version: &str) -> Result<(), RegistryError> {
    let reg = existing(root)?;
    if is_model_version(&reg, version)? {
        drop(reg);
        let meta = ModelRegistry::open(root, Preset::Any)?.verify_version(version)?;
        let bytes: u64 = meta.files.iter().map(|f| f.bytes).sum();
        let chunks: usize = meta
            .files
            .iter()
            .map(|f| f.chunks.as_ref().map_or(0, |c| c.blake3.len()))
            .sum();
        println!(
            "OK {version} {} ({} files, {bytes} bytes, {chunks} chunk digests)",
            meta.version.checksum,
            meta.files.len()
        );
        return Ok(());
    }
    let meta = reg.verify_version(version)?;
    println!("OK {version} {}", meta.version.checksum);
    Ok(())
}

/// `registry activate` and `registry rollback`: make `version` current.
fn activate(root: &Path, version: &str, rollback: bool) -> Result<(), RegistryError> {
    let probe = existing(root)?;
    if is_model_version(&probe, version)? {
        drop(probe);
        let reg = ModelRegistry::open(root, Preset::Any)?;
        let m = if rollback {
            reg.rollback(version)?
        } else {
            reg.activate(version)?
        };
        println!(
            "current version is now {} ({} tensors, {} verified)",
            m.version.version,
            m.tensors().len(),
            crate::report::size(m.total_bytes())
        );
        return Ok(());
    }
    let config = read_metadata(&probe.version_dir(version)?)?.config;
    drop(probe);
    let reg = open(root, config, 42)?;
    let w = if rollback {
        reg.rollback(version)?
    } else {
        reg.activate(version)?
    };
    println!("current version is now {}", w.version.version);
    Ok(())
}

/// The directory of `version`, which `reg` must list.
fn listed_dir(reg: &WeightRegistry, version: &str) -> Result<PathBuf, RegistryError> {
    let dir = reg.version_dir(version)?;
    if !reg.list_versions().iter().any(|v| v.version == version) {
        return Err(RegistryError::VersionNotFound {
            version: version.to_owned(),
        });
    }
    Ok(dir)
}

fn inspect(ckpt: &Path, as_json: bool, no_verify: bool) -> Result<(), RegistryError> {
    let model: LoadedModel = if ckpt.is_dir() && ckpt.join(METADATA_FILE).is_file() {
        // A registry version (FuseMoE or any safetensors checkpoint). What is shown must be
        // what its checksums vouch for: a tampered header or tensor is an error here, not
        // a table.
        let mode = if no_verify {
            eprintln!(
                "note: --no-verify: {} not checked against its SHA-256",
                ckpt.display()
            );
            Verify::None
        } else {
            Verify::Both
        };
        load_model_dir(ckpt, mode)?
    } else {
        // Opened first, so a path that cannot be read gets its one error line alone.
        let model = open_source(&resolve_source(ckpt)?)?;
        eprintln!(
            "note: {} is a bare checkpoint; no checksum covers it (inspect a registry version directory to verify)",
            ckpt.display()
        );
        model
    };
    let rows: Vec<_> = model
        .tensors()
        .iter()
        .map(|(name, t)| {
            let stats = t.to_f32(name).ok().map(|v| stats(&v));
            (
                name.clone(),
                format!("{:?}", t.dtype()),
                t.shape().to_vec(),
                stats,
            )
        })
        .collect();
    if as_json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, d, s, st)| {
                json!({ "name": n, "dtype": d, "shape": s,
                    "stats": st.map(|[mean, std, min, max]| json!({"mean": mean, "std": std, "min": min, "max": max})) })
            })
            .collect();
        println!("{:#}", json!(v));
        return Ok(());
    }
    let mut t = Table::new(&["tensor", "dtype", "shape", "mean", "std", "min", "max"]);
    for (n, d, s, st) in rows {
        let cells = st.map_or_else(
            || vec![String::from("-"); 4],
            |a| a.iter().map(|x| format!("{x:.5}")).collect(),
        );
        let mut row = vec![n, d, format!("{s:?}")];
        row.extend(cells);
        t.row(row);
    }
    print!("{}", t.render());
    Ok(())
}

/// `[mean, std, min, max]` over finite values (f64 accumulation).
fn stats(x: &[f32]) -> [f64; 4] {
    let (mut n, mut sum, mut sq) = (0f64, 0f64, 0f64);
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for &v in x.iter().filter(|v| v.is_finite()) {
        let v = f64::from(v);
        n += 1.0;
        sum += v;
        sq += v * v;
        min = min.min(v);
        max = max.max(v);
    }
    if n == 0.0 {
        return [f64::NAN; 4];
    }
    let mean = sum / n;
    [mean, (sq / n - mean * mean).max(0.0).sqrt(), min, max]
}
