//! `registry.json` files that are well-formed and carry a valid checksum but make no sense:
//! a repeated version, a golden or current version that is not listed, a format newer than
//! this build. Each is refused at open, nothing is deleted, and the file is left as it was.

use std::fs;
use std::path::Path;

use tensorvault_registry::registry::{MANIFEST_FILE, VERSIONS_DIR};
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, LoadedWeights, RegistryError, WeightInitializer,
    WeightRegistry,
};

fn open(root: &Path) -> Result<WeightRegistry, RegistryError> {
    WeightRegistry::with_config(
        root,
        Device::Cpu,
        InitializationConfig::default(),
        FusionConfig::tiny(),
    )
}

fn init(seed: u64, version: &str) -> LoadedWeights {
    let mut w = WeightInitializer::new(seed)
        .init_all(&FusionConfig::tiny(), true)
        .unwrap();
    w.version.version = version.into();
    w
}

/// `json` without whitespace outside strings: the compact serialization the checksum covers
/// (the registry writes members in a fixed order; a text edit keeps that order).
fn compact(json: &str) -> String {
    let (mut out, mut in_str, mut escaped) = (String::new(), false, false);
    for c in json.chars() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Rewrites `registry.json` as `edit` makes it (on the compact text, without the checksum
/// member) and seals it with a valid checksum, as a forger who read the format spec would.
fn forge(root: &Path, edit: impl FnOnce(String) -> String) -> Vec<u8> {
    let path = root.join(MANIFEST_FILE);
    let text = compact(&fs::read_to_string(&path).unwrap());
    let at = text
        .find(",\"manifest_crc32c\"")
        .expect("a sealed manifest");
    let body = edit(text[..at].to_owned() + "}");
    let crc = tensorvault_core::checksum::crc32c(body.as_bytes());
    let sealed = format!(
        "{},\"manifest_crc32c\":\"{crc:08x}\"}}",
        &body[..body.len() - 1]
    );
    fs::write(&path, &sealed).unwrap();
    sealed.into_bytes()
}

/// A registry with versions 1.0.0 ..= 1.0.3, 1.0.3 current, retention 2.
fn registry(root: &Path) {
    let reg = open(root).unwrap();
    for i in 0..4 {
        reg.save_checkpoint(&init(i, &format!("1.0.{i}")), None)
            .unwrap();
    }
    reg.load_checkpoint("1.0.3").unwrap();
    assert_eq!(reg.set_retention(Some(2)).unwrap(), ["1.0.0", "1.0.1"]);
}

fn version_dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root.join(VERSIONS_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The case the issue reported: `versions` lists 1.0.2 again at the front. Retention by
/// name used to delete 1.0.2 (inside the kept window). Now the open is refused, naming both
/// entries, and both versions' files survive.
#[test]
fn a_repeated_version_is_refused_and_nothing_is_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    let sealed = forge(&root, |body| {
        let start = body.find("{\"version\":\"1.0.2\"").unwrap();
        let end = body[start..].find("},{").unwrap() + start + 1;
        let entry = body[start..end].to_owned();
        body.replacen("\"versions\":[", &format!("\"versions\":[{entry},"), 1)
    });
    let err = open(&root).unwrap_err();
    match &err {
        RegistryError::ManifestDuplicateVersion {
            version,
            first,
            second,
            ..
        } => {
            assert_eq!(version, "1.0.2");
            assert_eq!((*first, *second), (0, 1));
        }
        other => panic!("expected ManifestDuplicateVersion, got {other:?}"),
    }
    assert!(err.to_string().contains("versions[1]"), "{err}");
    assert_eq!(version_dirs(&root), ["1.0.2", "1.0.3"]);
    assert_eq!(fs::read(root.join(MANIFEST_FILE)).unwrap(), sealed);
}

#[test]
fn golden_or_current_must_be_listed() {
    for field in ["golden", "current"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        registry(&root);
        let sealed = forge(&root, |body| {
            // 1.0.0 is a valid version string whose entry retention removed.
            let from = format!("\"{field}\":");
            let at = body.find(&from).unwrap() + from.len();
            let end = at + body[at..].find([',', '}']).unwrap();
            format!("{}\"1.0.0\"{}", &body[..at], &body[end..])
        });
        match open(&root).unwrap_err() {
            RegistryError::ManifestUnlistedVersion {
                field: f, version, ..
            } => {
                assert_eq!(f, field);
                assert_eq!(version, "1.0.0");
            }
            other => panic!("{field}: expected ManifestUnlistedVersion, got {other:?}"),
        }
        assert_eq!(version_dirs(&root), ["1.0.2", "1.0.3"]);
        assert_eq!(fs::read(root.join(MANIFEST_FILE)).unwrap(), sealed);
    }
}

/// A manifest from a newer build used to be read as format 2 and re-sealed as 2 at the
/// next save (a silent downgrade of whatever the newer format added).
#[test]
fn a_newer_format_is_refused_not_downgraded() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    let sealed = forge(&root, |body| {
        body.replacen("\"format_version\":2", "\"format_version\":3", 1)
    });
    match open(&root).unwrap_err() {
        RegistryError::ManifestFormatTooNew {
            found, supported, ..
        } => assert_eq!((found, supported), (3, 2)),
        other => panic!("expected ManifestFormatTooNew, got {other:?}"),
    }
    assert_eq!(fs::read(root.join(MANIFEST_FILE)).unwrap(), sealed);
}

/// The forging helper itself is checked: an unedited re-seal opens.
#[test]
fn forge_without_edit_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    forge(&root, |b| b);
    let reg = open(&root).unwrap();
    let listed: Vec<_> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(listed, ["1.0.2", "1.0.3"]);
}
