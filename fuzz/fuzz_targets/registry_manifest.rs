//! Fuzz the registry's JSON documents: arbitrary `registry.json` bytes must open to a
//! typed error or a registry whose every named version is a valid version string (never
//! a path), listed once, with golden and current among the listed versions, and whose
//! manifest file is left byte for byte as it was (opening never re-seals, so a newer
//! `format_version` is never downgraded); and arbitrary `metadata.json` bytes must read to a typed error or metadata
//! whose `config` fits the weights file, without a panic or an allocation sized by a
//! claimed count. The same bytes also go through the model registry's readers: as a
//! sharded checkpoint's `model.safetensors.index.json` (shard names must never resolve
//! outside the checkpoint directory) and as a model version's `metadata.json`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_registry::checkpoint::{read_metadata, WEIGHTS_FILE};
use tensorvault_registry::model::{read_model_metadata, resolve_source, INDEX_FILE};
use tensorvault_registry::registry::MANIFEST_FILE;
use tensorvault_registry::{
    validate_version, Device, FusionConfig, InitializationConfig, WeightRegistry,
};

fuzz_target!(|data: &[u8]| {
    let root = std::env::temp_dir().join(format!("tv-fuzz-registry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    if std::fs::create_dir_all(&root).is_err()
        || std::fs::write(root.join(MANIFEST_FILE), data).is_err()
    {
        return;
    }
    if let Ok(reg) = WeightRegistry::with_config(
        &root,
        Device::Cpu,
        InitializationConfig::default(),
        FusionConfig::tiny(),
    ) {
        let listed = reg.list_versions();
        let mut names = std::collections::HashSet::new();
        for v in &listed {
            assert!(validate_version(&v.version).is_ok(), "{:?}", v.version);
            assert!(
                names.insert(v.version.clone()),
                "{:?} listed twice",
                v.version
            );
        }
        for v in reg.golden().iter().chain(reg.current_pointer().iter()) {
            assert!(validate_version(v).is_ok(), "{v:?}");
            assert!(names.contains(v), "{v:?} named but not listed");
        }
        assert_eq!(
            std::fs::read(root.join(MANIFEST_FILE)).ok().as_deref(),
            Some(data)
        );
    }
    // The same bytes as a checkpoint's metadata.json, next to a 1 KiB weights file.
    let ckpt = root.join("ckpt");
    if std::fs::create_dir_all(&ckpt).is_ok()
        && std::fs::write(ckpt.join("metadata.json"), data).is_ok()
        && std::fs::write(ckpt.join(WEIGHTS_FILE), [0u8; 1024]).is_ok()
    {
        let _ = read_metadata(&ckpt);
    }
    // The same bytes as a sharded checkpoint's index and as a model version's metadata.
    let hf = root.join("hf");
    if std::fs::create_dir_all(&hf).is_ok() && std::fs::write(hf.join(INDEX_FILE), data).is_ok() {
        let _ = resolve_source(&hf);
    }
    let mv = root.join("mv");
    if std::fs::create_dir_all(&mv).is_ok()
        && std::fs::write(mv.join("metadata.json"), data).is_ok()
    {
        let _ = read_model_metadata(&mv);
    }
});
