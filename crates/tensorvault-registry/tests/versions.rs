//! Issue 26 item 1: a version is what the caller asked for. An explicit version that is
//! taken is `VersionExists`, an invalid one `InvalidVersion` (both before anything is
//! written); only "no version" picks the next patch number. Saving never makes a version
//! current; `activate` does, forward or back, swapping it in for this process's readers.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use tensorvault_registry::registry::{MANIFEST_FILE, VERSIONS_DIR};
use tensorvault_registry::safetensors_dtype::Dtype;
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, LoadedModel, ModelRegistry, ModelTensor, Preset,
    RegistryError, SaveOptions, WeightInitializer, WeightRegistry, WeightVersion,
};

fn model(seed: u8) -> LoadedModel {
    let bytes: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(seed)).collect();
    let t = ModelTensor::from_bytes("w", Dtype::F32, vec![2, 4], bytes).unwrap();
    let v = WeightVersion {
        version: String::new(),
        source_id: String::new(),
        created_at: String::new(),
        checksum: String::new(),
        metrics: None,
    };
    LoadedModel::new(v, BTreeMap::from([("w".to_owned(), t)]))
}

fn opts(v: Option<&str>) -> SaveOptions {
    SaveOptions {
        version: v.map(str::to_owned),
        ..SaveOptions::default()
    }
}

fn listed(reg: &ModelRegistry) -> Vec<String> {
    reg.list_versions().into_iter().map(|v| v.version).collect()
}

fn dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root.join(VERSIONS_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn model_registry_uses_the_version_asked_for_or_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let reg = ModelRegistry::open(&root, Preset::Any).unwrap();
    assert_eq!(
        reg.save_model(&model(1), opts(None)).unwrap().version,
        "0.0.1"
    );
    assert_eq!(
        reg.save_model(&model(2), opts(Some("1.0.0")))
            .unwrap()
            .version,
        "1.0.0"
    );
    let manifest = fs::read(root.join(MANIFEST_FILE)).unwrap();
    // Taken: refused, named, nothing written (the source of issue 26: it used to be saved
    // silently as another version).
    match reg.save_model(&model(3), opts(Some("1.0.0"))) {
        Err(RegistryError::VersionExists { version }) => assert_eq!(version, "1.0.0"),
        other => panic!("expected VersionExists, got {other:?}"),
    }
    // Invalid: refused with the string, never replaced by the next number.
    for bad in ["../../etc", "bad version", "", "1.0", "/abs"] {
        match reg.save_model(&model(3), opts(Some(bad))) {
            Err(RegistryError::InvalidVersion { version, .. }) => assert_eq!(version, bad),
            other => panic!("{bad:?}: expected InvalidVersion, got {other:?}"),
        }
    }
    // The same through save_from_path.
    let src = tmp.path().join("m.safetensors");
    fs::write(&src, model(4).to_safetensors().unwrap()).unwrap();
    assert!(matches!(
        reg.save_from_path(&src, opts(Some("0.0.1"))),
        Err(RegistryError::VersionExists { .. })
    ));
    assert!(matches!(
        reg.save_from_path(&src, opts(Some("../x"))),
        Err(RegistryError::InvalidVersion { .. })
    ));
    assert_eq!(fs::read(root.join(MANIFEST_FILE)).unwrap(), manifest);
    assert_eq!(dirs(&root), ["0.0.1", "1.0.0"]);
    assert!(!tmp.path().join("etc").exists() && !root.join("x").exists());
    // No version: the highest listed one with its patch bumped.
    assert_eq!(
        reg.save_from_path(&src, opts(None)).unwrap().version,
        "1.0.1"
    );
    assert_eq!(listed(&reg), ["0.0.1", "1.0.0", "1.0.1"]);
}

#[test]
fn saving_never_changes_current_and_activate_does() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let reg = ModelRegistry::open(&root, Preset::Any).unwrap();
    reg.save_model(&model(1), opts(Some("1.0.0"))).unwrap();
    assert_eq!(reg.current_pointer(), None, "a save is not an activation");
    reg.activate("1.0.0").unwrap();
    reg.save_model(&model(2), opts(Some("2.0.0"))).unwrap();
    assert_eq!(reg.current_pointer().as_deref(), Some("1.0.0"));
    assert_eq!(reg.current().unwrap().version.version, "1.0.0");
    // A reader holding the active model keeps it across the swap.
    let held = reg.current().unwrap();
    // Forward.
    let m = reg.activate("2.0.0").unwrap();
    assert_eq!(m.version.version, "2.0.0");
    assert_eq!(reg.current().unwrap().version.version, "2.0.0");
    assert_eq!(held.version.version, "1.0.0");
    assert_eq!(held.tensors()["w"].bytes(), model(1).tensors()["w"].bytes());
    // Persisted.
    let reopened = ModelRegistry::open(&root, Preset::Any).unwrap();
    assert_eq!(reopened.current_pointer().as_deref(), Some("2.0.0"));
    // Back, and errors change nothing.
    reg.activate("1.0.0").unwrap();
    assert!(matches!(
        reg.activate("9.9.9"),
        Err(RegistryError::VersionNotFound { .. })
    ));
    assert!(matches!(
        reg.activate("../x"),
        Err(RegistryError::InvalidVersion { .. })
    ));
    assert_eq!(reg.current_pointer().as_deref(), Some("1.0.0"));
    assert_eq!(reg.current().unwrap().version.version, "1.0.0");
}

#[test]
fn weight_registry_uses_the_version_asked_for_or_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = WeightRegistry::with_config(
        tmp.path(),
        Device::Cpu,
        InitializationConfig::default(),
        FusionConfig::tiny(),
    )
    .unwrap();
    let mut w = WeightInitializer::new(1)
        .init_all(&FusionConfig::tiny(), true)
        .unwrap();
    w.version.version = "1.0.0".into();
    reg.save_checkpoint(&w, None).unwrap();
    assert!(matches!(
        reg.save_checkpoint(&w, None),
        Err(RegistryError::VersionExists { version }) if version == "1.0.0"
    ));
    w.version.version = "bad version".into();
    assert!(matches!(
        reg.save_checkpoint(&w, None),
        Err(RegistryError::InvalidVersion { .. })
    ));
    w.version.version = String::new();
    assert_eq!(reg.save_checkpoint(&w, None).unwrap().version, "1.0.1");
    assert_eq!(reg.current_pointer(), None);
    reg.activate("1.0.1").unwrap();
    assert_eq!(reg.current_pointer().as_deref(), Some("1.0.1"));
    reg.activate("1.0.0").unwrap();
    assert_eq!(reg.current().unwrap().version.version, "1.0.0");
    let v: Vec<String> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(v, ["1.0.0", "1.0.1"]);
}
