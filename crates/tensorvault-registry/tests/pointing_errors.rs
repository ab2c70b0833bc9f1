//! Issue 25 classes 3 and 5 in the registry library: verification compares a version's
//! checksum with the one `registry.json` lists (FuseMoE versions as model versions do), and
//! a bad source file at save is reported under its own path with the field and offset the
//! safetensors parser refused, never under the destination that is never made.

use std::fs;
use std::path::Path;

use tensorvault_registry::registry::VERSIONS_DIR;
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, ModelRegistry, Preset, RegistryError, SaveOptions,
    WeightInitializer, WeightRegistry,
};

fn fusemoe(root: &Path) -> WeightRegistry {
    WeightRegistry::with_config(
        root,
        Device::Cpu,
        InitializationConfig::default(),
        FusionConfig::tiny(),
    )
    .unwrap()
}

fn save(reg: &WeightRegistry, seed: u64, version: &str) -> String {
    let mut w = WeightInitializer::new(seed)
        .init_all(&FusionConfig::tiny(), true)
        .unwrap();
    w.version.version = version.into();
    reg.save_checkpoint(&w, None).unwrap().checksum
}

/// Replaces `versions/<to>`'s files with `versions/<from>`'s: a self-consistent checkpoint
/// (files match their own metadata) that is not the one the manifest listed.
fn swap_in(root: &Path, from: &str, to: &str) {
    let (src, dst) = (
        root.join(VERSIONS_DIR).join(from),
        root.join(VERSIONS_DIR).join(to),
    );
    for e in fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

#[test]
fn fusemoe_verify_compares_the_listed_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = fusemoe(tmp.path());
    let a = save(&reg, 1, "1.0.0");
    let b = save(&reg, 2, "1.0.1");
    assert_ne!(a, b);
    reg.verify_version("1.0.1").unwrap();
    swap_in(tmp.path(), "1.0.0", "1.0.1");
    let reg = fusemoe(tmp.path());
    match reg.verify_version("1.0.1") {
        Err(RegistryError::ListedChecksumMismatch {
            version,
            path,
            listed,
            found,
        }) => {
            assert_eq!(version, "1.0.1");
            assert!(path.ends_with("versions/1.0.1/metadata.json"), "{path:?}");
            assert_eq!((listed, found), (b, a));
        }
        other => panic!("expected ListedChecksumMismatch, got {other:?}"),
    }
    // Golden marking verifies first, so it refuses too; the untouched version still passes.
    assert!(reg.set_golden("1.0.1").is_err());
    reg.verify_version("1.0.0").unwrap();
}

#[test]
fn model_verify_names_the_version_and_both_checksums() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir(&src).unwrap();
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let mut sums = Vec::new();
    for (i, v) in ["2.0.0", "2.0.1"].iter().enumerate() {
        let f = src.join(format!("m{i}.safetensors"));
        let data = vec![i as u8 + 1; 16];
        let view =
            safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::U8, vec![16], &data)
                .unwrap();
        safetensors::serialize_to_file([("w", view)], &None, &f).unwrap();
        let opts = SaveOptions {
            version: Some((*v).into()),
            ..SaveOptions::default()
        };
        sums.push(reg.save_from_path(&f, opts).unwrap().checksum);
    }
    swap_in(&tmp.path().join("reg"), "2.0.0", "2.0.1");
    match reg.verify_version("2.0.1") {
        Err(RegistryError::ListedChecksumMismatch {
            version,
            listed,
            found,
            ..
        }) => {
            assert_eq!(version, "2.0.1");
            assert_eq!((listed, found), (sums[1].clone(), sums[0].clone()));
        }
        other => panic!("expected ListedChecksumMismatch, got {other:?}"),
    }
}

#[test]
fn bad_source_file_is_named_with_field_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    // A header length far past the end of a 12-byte file.
    let bad = tmp.path().join("bad.safetensors");
    let mut b = 1_000_000u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}  ");
    fs::write(&bad, &b).unwrap();
    let opts = SaveOptions {
        version: Some("1.0.0".into()),
        ..SaveOptions::default()
    };
    match reg.save_from_path(&bad, opts) {
        Err(RegistryError::Safetensors {
            path,
            field,
            offset,
            ..
        }) => {
            assert_eq!(path, bad);
            assert_eq!((field.as_str(), offset), ("header length", 0));
        }
        other => panic!("expected Safetensors naming the source, got {other:?}"),
    }
    assert!(reg.list_versions().is_empty());
    assert!(!tmp.path().join("reg/versions/1.0.0").exists());
}

#[test]
fn bad_shard_of_a_sharded_source_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("model");
    fs::create_dir(&src).unwrap();
    let data = [0u8; 8];
    let view = safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::U8, vec![8], &data)
        .unwrap();
    safetensors::serialize_to_file([("a", view)], &None, &src.join("s1.safetensors")).unwrap();
    // The second shard's data section has 4 bytes nobody's data_offsets cover.
    let h = br#"{"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(h);
    b.extend_from_slice(&[0u8; 8]);
    fs::write(src.join("s2.safetensors"), &b).unwrap();
    fs::write(
        src.join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}"#,
    )
    .unwrap();
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    match reg.save_from_path(&src, SaveOptions::default()) {
        Err(RegistryError::Safetensors {
            path,
            field,
            offset,
            ..
        }) => {
            assert_eq!(path, src.join("s2.safetensors"));
            assert_eq!(
                (field.as_str(), offset),
                ("data_offsets", 8 + h.len() as u64)
            );
        }
        other => panic!("expected Safetensors naming the shard, got {other:?}"),
    }
}

/// A FuseMoE checkpoint's `metadata.json` with a newer `format_version` is refused naming
/// the field (it was read as format 1), like the manifest's and model versions'.
#[test]
fn a_newer_checkpoint_format_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = fusemoe(tmp.path());
    save(&reg, 1, "1.0.0");
    let meta = tmp
        .path()
        .join(VERSIONS_DIR)
        .join("1.0.0")
        .join("metadata.json");
    let text = fs::read_to_string(&meta).unwrap();
    assert!(text.contains("\"format_version\": 1"));
    fs::write(
        &meta,
        text.replacen("\"format_version\": 1", "\"format_version\": 9", 1),
    )
    .unwrap();
    match fusemoe(tmp.path()).verify_version("1.0.0") {
        Err(RegistryError::InvalidMetadata {
            path,
            field,
            reason,
        }) => {
            assert_eq!((path, field), (meta, "format_version"));
            assert!(reason.starts_with("9 is newer"), "{reason}");
        }
        other => panic!("expected InvalidMetadata, got {other:?}"),
    }
}
