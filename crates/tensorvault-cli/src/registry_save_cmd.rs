//! `tensorvault registry save`: a new version from a checkpoint (`--from PATH`: this
//! registry's own FuseMoE checkpoint layout or any safetensors model) or from the
//! registry's active weights. The version is the one asked for (the library refuses a taken
//! or invalid one); saving never changes the current version (`registry activate` does).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use serde_json::json;
use tensorvault_registry::checkpoint::{
    load_checkpoint_dir, read_metadata, verify_checkpoint, LoadOptions, METADATA_FILE, WEIGHTS_FILE,
};
use tensorvault_registry::model::{checkpoint_format, read_model_metadata, MODEL_FORMAT_NAME};
use tensorvault_registry::registry::MANIFEST_FILE;
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, InitializationStrategy, RegistryError,
    TrainingMetrics, WeightRegistry,
};
use tensorvault_registry::{ModelRegistry, Preset, SaveOptions};

use crate::registry_open::{existing, open};
use crate::report::{Ctx, Table, Unit};

/// What a safetensors model given to `--from` must hold.
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
    /// Registry root (must exist unless `--from` names a safetensors model or a checkpoint
    /// directory, which creates it).
    pub root: PathBuf,
    /// Version string of the new version, used as given: a version that exists or an
    /// invalid string (not semver, path characters) is an error. Default: the highest
    /// existing version with its patch number bumped.
    #[arg(value_name = "VERSION")]
    pub version: Option<String>,
    /// The same as VERSION, as an option.
    #[arg(long = "version", value_name = "VERSION", conflicts_with = "version")]
    pub version_opt: Option<String>,
    /// Metric `KEY=VALUE` stored in the version's metadata; VALUE is parsed as JSON, else
    /// kept as a string. `epoch`, `loss`, `validation_loss` and `learning_rate` fill the
    /// typed fields (0 when not given); other keys are stored as they are. Repeatable.
    #[arg(long = "metric", value_name = "KEY=VALUE", value_parser = parse_metric)]
    pub metrics: Vec<(String, serde_json::Value)>,
    /// What to save. Either a checkpoint directory of this registry's FuseMoE layout
    /// (`metadata.json` + `weights.safetensors`, e.g. another registry's
    /// `versions/<V>`: verified and loaded strictly against ROOT's shapes), or any
    /// safetensors model, copied byte for byte with its SHA-256 and per-chunk digests: a
    /// `.safetensors` file, a sharded checkpoint's `*.index.json`, a Hugging Face model
    /// directory (`model.safetensors.index.json`, else `model.safetensors`) or a model
    /// version directory. Without it: the registry's active weights (the current version,
    /// through the load fallback chain). `--from-safetensors` is an alias.
    #[arg(long = "from", visible_alias = "from-safetensors", value_name = "PATH")]
    pub from: Option<PathBuf>,
    /// For a safetensors model: what the tensors must be (`fusemoe`: the FuseMoE layout of
    /// the registry's newest FuseMoE version, else the default shapes).
    #[arg(long, value_enum, default_value = "any", requires = "from")]
    pub preset: PresetArg,
    /// The version's source id (default: PATH).
    #[arg(long, requires = "from")]
    pub source_id: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl SaveArgs {
    fn version(&self) -> Option<String> {
        self.version.clone().or_else(|| self.version_opt.clone())
    }
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

/// Whether `path` is a checkpoint directory of the FuseMoE layout (`metadata.json` whose
/// format is not the model registry's), rather than a safetensors model.
fn is_fusemoe_checkpoint(path: &Path) -> Result<bool, RegistryError> {
    if !path.is_dir() || !path.join(METADATA_FILE).is_file() {
        return Ok(false);
    }
    Ok(checkpoint_format(path)? != MODEL_FORMAT_NAME)
}

/// The shapes of the registry's current (else newest) FuseMoE version. The current
/// version's metadata must read: an invalid one is that error, not "no version found".
fn registry_config(probe: &WeightRegistry) -> Result<FusionConfig, RegistryError> {
    if let Some(v) = probe.current_pointer() {
        if let Preset::FuseMoe(c) = read_model_metadata(&probe.version_dir(&v)?)?.preset {
            return Ok(c);
        }
    }
    newest_fusemoe_config(probe)?.ok_or_else(|| RegistryError::VersionNotFound {
        version: "<any FuseMoE version>".into(),
    })
}

/// Runs `registry save`, with a bar over the bytes written and hashed (hidden by `-q` and
/// `--json`).
///
/// # Errors
/// Registry errors (the version taken or invalid, a bad checkpoint, I/O).
pub fn save(a: &SaveArgs, ctx: &Ctx) -> Result<(), RegistryError> {
    // The library reports (done, total) in bytes; the total is known once the source is read.
    let pb = ctx.bar(0, "saving", Unit::Bytes, a.json);
    let r = match &a.from {
        Some(src) if !is_fusemoe_checkpoint(src)? => save_safetensors(a, src, &pb),
        from => save_fusemoe(a, from.as_deref(), &pb),
    };
    pb.finish_and_clear();
    r
}

/// A FuseMoE checkpoint directory, or (`from` absent) the registry's active weights.
fn save_fusemoe(a: &SaveArgs, from: Option<&Path>, pb: &ProgressBar) -> Result<(), RegistryError> {
    let (config, current) = match (from, a.root.join(MANIFEST_FILE).is_file()) {
        // A new registry takes the checkpoint's own shapes.
        (Some(dir), false) => (read_metadata(dir)?.config, None),
        _ => {
            let probe = existing(&a.root)?;
            (registry_config(&probe)?, probe.current_pointer())
        }
    };
    let (mut weights, source) = if let Some(dir) = from {
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
    // Empty: no version asked for (the library picks the next one).
    weights.version.version = a.version().unwrap_or_default();
    if let Some(id) = &a.source_id {
        weights.version.source_id.clone_from(id);
    }
    let reg = open(&a.root, config, 42)?;
    let progress = Ctx::sized_callback(pb);
    let v =
        reg.save_checkpoint_progress(&weights, training_metrics(&a.metrics), Some(&progress))?;
    pb.finish_and_clear();
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

/// Any safetensors model, copied verbatim.
fn save_safetensors(a: &SaveArgs, src: &Path, pb: &ProgressBar) -> Result<(), RegistryError> {
    let preset = match a.preset {
        PresetArg::Any => Preset::Any,
        PresetArg::Fusemoe => {
            let cfg = if a.root.join(MANIFEST_FILE).is_file() {
                newest_fusemoe_config(&existing(&a.root)?)?
            } else {
                None
            };
            Preset::FuseMoe(cfg.unwrap_or_default())
        }
    };
    let reg = ModelRegistry::open(&a.root, preset)?;
    let t = std::time::Instant::now();
    let v = reg.save_from_path_progress(
        src,
        SaveOptions {
            version: a.version(),
            source_id: a.source_id.clone(),
            metrics: training_metrics(&a.metrics),
        },
        Some(&Ctx::sized_callback(pb)),
    )?;
    pb.finish_and_clear();
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

/// The FuseMoE shapes of the newest version that has them (`None`: no version has).
///
/// # Errors
/// The first (newest) version whose metadata does not read: whether it holds FuseMoE
/// shapes cannot be known, so its error is reported rather than skipped (skipping would
/// say "no FuseMoE version" or take an older version's shapes).
pub fn newest_fusemoe_config(reg: &WeightRegistry) -> Result<Option<FusionConfig>, RegistryError> {
    for v in reg.list_versions().iter().rev() {
        if let Preset::FuseMoe(c) = read_model_metadata(&reg.version_dir(&v.version)?)?.preset {
            return Ok(Some(c));
        }
    }
    Ok(None)
}
