//! `tensorvault registry`: create and manage a weight registry directory (seed 003).
//!
//! Errors are printed here as one line on stderr with exit code 2, like every other
//! subcommand.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_registry::checkpoint::{
    load_checkpoint_dir, read_metadata, verify_checkpoint, LoadOptions, METADATA_FILE, WEIGHTS_FILE,
};
use tensorvault_registry::model::{
    checkpoint_format, read_model_metadata, resolve_source, MODEL_FORMAT_NAME,
};
use tensorvault_registry::model_tensor::{load_model_dir, open_source};
use tensorvault_registry::registry::MANIFEST_FILE;
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, InitializationStrategy, KaimingMode, Nonlinearity,
    RegistryError, TrainingMetrics, WeightInitializer, WeightRegistry,
};
use tensorvault_registry::{LoadedModel, ModelRegistry, Preset, SaveOptions, Verify};

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
    /// Save a new version: the weights of a checkpoint directory (`--from`, verified
    /// first) or the registry's active weights. Does not change the current version.
    Save(SaveArgs),
    /// Make an existing version the current one (loaded and validated first).
    Rollback {
        /// Registry root.
        root: PathBuf,
        /// Version string.
        version: String,
    },
    /// Tensors of a registry version directory, a .safetensors file, an index JSON or a
    /// Hugging Face model directory: dtype, shape, mean/std/min/max (float dtypes). A
    /// version directory's files are first checked against the SHA-256 digests in its
    /// metadata.json (a mismatch is an error); a bare checkpoint has no checksum to check,
    /// which is said on stderr.
    Inspect {
        /// Version directory, .safetensors file, index JSON or model directory.
        ckpt: PathBuf,
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
    /// Version string of the first version.
    #[arg(long, default_value = "0.0.0-init")]
    pub version: String,
    /// Use a tiny FusionConfig (a few KB) instead of the full ~312 MB shapes.
    #[arg(long)]
    pub tiny: bool,
}

/// What a `--from-safetensors` checkpoint must hold.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PresetArg {
    /// Any tensors of any dtype.
    Any,
    /// The FuseMoE layout (names, shapes; F32/F16/BF16).
    Fusemoe,
}

/// Arguments of `registry save`.
#[derive(Debug, Args)]
pub struct SaveArgs {
    /// Registry root (must exist).
    pub root: PathBuf,
    /// Version string of the new version (default: highest existing version, patch + 1).
    #[arg(long)]
    pub version: Option<String>,
    /// Metric `KEY=VALUE` stored in the version's metadata; VALUE is parsed as JSON, else
    /// kept as a string. `epoch`, `loss`, `validation_loss` and `learning_rate` fill the
    /// typed fields (0 when not given); other keys are stored as they are. Repeatable.
    #[arg(long = "metric", value_name = "KEY=VALUE", value_parser = parse_metric)]
    pub metrics: Vec<(String, serde_json::Value)>,
    /// Checkpoint directory to save (verified and loaded strictly). Without it, the
    /// registry's active weights (the current version, through the load fallback chain).
    #[arg(
        long = "from",
        value_name = "CKPT_DIR",
        conflicts_with = "from_safetensors"
    )]
    pub from: Option<PathBuf>,
    /// Any safetensors checkpoint to save as the new version, copied byte for byte with
    /// its SHA-256 and per-chunk digests: a `.safetensors` file, a sharded checkpoint's
    /// `*.index.json`, or a Hugging Face model directory (`model.safetensors.index.json`,
    /// else `model.safetensors`). ROOT is created if it is not a registry yet.
    #[arg(long = "from-safetensors", value_name = "PATH")]
    pub from_safetensors: Option<PathBuf>,
    /// With `--from-safetensors`: what the tensors must be (`fusemoe`: the FuseMoE layout
    /// of the registry's newest FuseMoE version, else the default shapes).
    #[arg(long, value_enum, default_value = "any", requires = "from_safetensors")]
    pub preset: PresetArg,
    /// With `--from-safetensors`: the version's source id (default: PATH).
    #[arg(long, requires = "from_safetensors")]
    pub source_id: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_metric(s: &str) -> Result<(String, serde_json::Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("empty metric name in {s:?}"));
    }
    let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_owned()));
    let ok = match k {
        "epoch" => v.as_u64().is_some(),
        "loss" | "learning_rate" => v.is_number(),
        "validation_loss" => v.is_number() || v.is_null(),
        _ => true,
    };
    if ok {
        Ok((k.to_owned(), v))
    } else {
        Err(format!("metric {k} has the wrong type: {v}"))
    }
}

fn training_metrics(pairs: &[(String, serde_json::Value)]) -> Option<TrainingMetrics> {
    if pairs.is_empty() {
        return None;
    }
    let mut m = TrainingMetrics {
        epoch: 0,
        loss: 0.0,
        validation_loss: None,
        learning_rate: 0.0,
        extra: std::collections::BTreeMap::new(),
    };
    // Types were checked by `parse_metric`.
    for (k, v) in pairs {
        match k.as_str() {
            "epoch" => m.epoch = v.as_u64().map_or(0, |e| e as usize),
            "loss" => m.loss = v.as_f64().unwrap_or_default(),
            "learning_rate" => m.learning_rate = v.as_f64().unwrap_or_default(),
            "validation_loss" => m.validation_loss = v.as_f64(),
            _ => {
                m.extra.insert(k.clone(), v.clone());
            }
        }
    }
    Some(m)
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
pub fn run(cmd: RegistryCmd) -> Result<i32, crate::error::CliError> {
    let verifying = matches!(cmd, RegistryCmd::Verify { .. });
    let r = match cmd {
        RegistryCmd::Init(a) => init(&a),
        RegistryCmd::Ls { root, json } => ls(&root, json),
        RegistryCmd::Verify { root, version } => verify(&root, &version),
        RegistryCmd::Save(a) => save(&a),
        RegistryCmd::Rollback { root, version } => rollback(&root, &version),
        RegistryCmd::Inspect {
            ckpt,
            json,
            no_verify,
        } => inspect(&ckpt, json, no_verify),
    };
    Ok(match r {
        Ok(()) => 0,
        // `verify` found damage (the weights' or the manifest's checksum): 1, like every
        // other verify command; 2 stays for errors that stop the check itself.
        Err(
            e @ (RegistryError::ChecksumMismatch { .. }
            | RegistryError::ChunkChecksumMismatch { .. }
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

fn open(root: &Path, fusion: FusionConfig, seed: u64) -> Result<WeightRegistry, RegistryError> {
    let init = InitializationConfig {
        seed,
        ..InitializationConfig::default()
    };
    WeightRegistry::with_config(root, Device::Cpu, init, fusion)
}

fn init(a: &InitArgs) -> Result<(), RegistryError> {
    let fusion = if a.tiny {
        FusionConfig::tiny()
    } else {
        FusionConfig::default()
    };
    tensorvault_registry::validate_version(&a.version)?;
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
    w.version.version.clone_from(&a.version);
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

/// Opens an existing registry (never creates one for a mistyped path).
fn existing(root: &Path) -> Result<WeightRegistry, RegistryError> {
    let manifest = root.join(tensorvault_registry::registry::MANIFEST_FILE);
    if !manifest.is_file() {
        return Err(RegistryError::Io {
            path: manifest,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a registry root"),
        });
    }
    open(root, FusionConfig::default(), 42)
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
    let dir = reg.version_dir(version)?;
    if !reg.list_versions().iter().any(|v| v.version == version) {
        return Err(RegistryError::VersionNotFound {
            version: version.to_owned(),
        });
    }
    Ok(checkpoint_format(&dir)? == MODEL_FORMAT_NAME)
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

/// The shapes of the registry's current (else newest) FuseMoE version.
fn registry_config(probe: &WeightRegistry) -> Result<FusionConfig, RegistryError> {
    let current = probe.current_pointer().and_then(|v| {
        match read_model_metadata(&probe.version_dir(&v).ok()?)
            .ok()?
            .preset
        {
            Preset::FuseMoe(c) => Some(c),
            Preset::Any => None,
        }
    });
    current
        .or_else(|| newest_fusemoe_config(probe))
        .ok_or_else(|| RegistryError::VersionNotFound {
            version: "<any FuseMoE version>".into(),
        })
}

fn save(a: &SaveArgs) -> Result<(), RegistryError> {
    if let Some(src) = &a.from_safetensors {
        return save_safetensors(a, src);
    }
    let probe = existing(&a.root)?;
    let config = registry_config(&probe)?;
    if let Some(v) = &a.version {
        tensorvault_registry::validate_version(v)?;
        if probe.list_versions().iter().any(|x| &x.version == v) {
            return Err(RegistryError::VersionExists { version: v.clone() });
        }
    }
    let current = probe.current_pointer();
    drop(probe);
    let (mut weights, source) = if let Some(dir) = &a.from {
        verify_checkpoint(dir)?;
        let w = load_checkpoint_dir(
            dir,
            &config,
            LoadOptions {
                strict: true,
                verify_checksum: true,
                fallback: None,
            },
        )?;
        (w, dir.display().to_string())
    } else {
        // The active weights as `load_weights` returns them, with the current version as
        // the primary source and no random-initialization fallback.
        let cur = current.ok_or_else(|| RegistryError::VersionNotFound {
            version: "<current>".into(),
        })?;
        let ckpt = InitializationStrategy::Checkpoint {
            path: PathBuf::from(tensorvault_registry::registry::VERSIONS_DIR).join(&cur),
            strict: true,
        };
        let init = InitializationConfig {
            primary: ckpt.clone(),
            fallback: ckpt,
            ..InitializationConfig::default()
        };
        let reg = WeightRegistry::with_config(&a.root, Device::Cpu, init, config.clone())?;
        let w = reg.load_weights()?;
        let src = reg
            .last_load_attempts()
            .into_iter()
            .find(|t| t.error.is_none())
            .map_or_else(|| format!("version:{cur}"), |t| t.source);
        ((*w).clone(), src)
    };
    weights.version.version = a.version.clone().unwrap_or_default();
    let reg = open(&a.root, config, 42)?;
    let v = reg.save_checkpoint(&weights, training_metrics(&a.metrics))?;
    let file = reg.version_dir(&v.version)?.join(WEIGHTS_FILE);
    let bytes = std::fs::metadata(&file)
        .map_err(|source| RegistryError::Io {
            path: file.clone(),
            source,
        })?
        .len();
    if a.json {
        let out = json!({ "version": v.version, "checksum": v.checksum, "bytes": bytes,
            "source": source, "source_id": v.source_id, "metrics": v.metrics,
            "current": reg.current_pointer() });
        println!("{out:#}");
        return Ok(());
    }
    let mut t = Table::new(&["version", "checksum", "size", "from"]);
    t.row(vec![
        v.version.clone(),
        v.checksum.clone(),
        crate::report::size(bytes),
        source,
    ]);
    print!("{}", t.render());
    Ok(())
}

/// `registry save --from-safetensors`: any checkpoint, copied verbatim.
fn save_safetensors(a: &SaveArgs, src: &Path) -> Result<(), RegistryError> {
    if let Some(v) = &a.version {
        tensorvault_registry::validate_version(v)?;
    }
    let preset = match a.preset {
        PresetArg::Any => Preset::Any,
        PresetArg::Fusemoe => {
            let cfg = if a.root.join(MANIFEST_FILE).is_file() {
                newest_fusemoe_config(&existing(&a.root)?)
            } else {
                None
            };
            Preset::FuseMoe(cfg.unwrap_or_default())
        }
    };
    let reg = ModelRegistry::open(&a.root, preset)?;
    if let Some(v) = &a.version {
        if reg.list_versions().iter().any(|x| &x.version == v) {
            return Err(RegistryError::VersionExists { version: v.clone() });
        }
    }
    let t = std::time::Instant::now();
    let v = reg.save_from_path(
        src,
        SaveOptions {
            version: a.version.clone(),
            source_id: a.source_id.clone(),
            metrics: training_metrics(&a.metrics),
        },
    )?;
    let secs = t.elapsed().as_secs_f64();
    let meta = reg.metadata(&v.version)?;
    let bytes: u64 = meta.files.iter().map(|f| f.bytes).sum();
    if a.json {
        let files: Vec<_> = meta
            .files
            .iter()
            .map(|f| json!({ "path": f.path, "bytes": f.bytes, "sha256": f.sha256, "chunks": f.chunks.as_ref().map_or(0, |c| c.blake3.len()) }))
            .collect();
        let out = json!({ "version": v.version, "checksum": v.checksum, "bytes": bytes,
            "source": src.display().to_string(), "source_id": v.source_id, "metrics": v.metrics,
            "files": files, "index": meta.index, "current": reg.current_pointer(), "seconds": secs });
        println!("{out:#}");
        return Ok(());
    }
    let mut t = Table::new(&["version", "checksum", "files", "size", "from"]);
    t.row(vec![
        v.version.clone(),
        v.checksum.clone(),
        meta.files.len().to_string(),
        crate::report::size(bytes),
        src.display().to_string(),
    ]);
    print!("{}", t.render());
    Ok(())
}

/// The FuseMoE shapes of the newest version that has them.
fn newest_fusemoe_config(reg: &WeightRegistry) -> Option<FusionConfig> {
    reg.list_versions().iter().rev().find_map(|v| {
        let meta = read_model_metadata(&reg.version_dir(&v.version).ok()?).ok()?;
        match meta.preset {
            Preset::FuseMoe(c) => Some(c),
            Preset::Any => None,
        }
    })
}

fn rollback(root: &Path, version: &str) -> Result<(), RegistryError> {
    let probe = existing(root)?;
    if is_model_version(&probe, version)? {
        drop(probe);
        let m = ModelRegistry::open(root, Preset::Any)?.rollback(version)?;
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
    let w = reg.rollback(version)?;
    println!("current version is now {}", w.version.version);
    Ok(())
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
        eprintln!(
            "note: {} is a bare checkpoint; no checksum covers it (inspect a registry version directory to verify)",
            ckpt.display()
        );
        open_source(&resolve_source(ckpt)?)?
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
