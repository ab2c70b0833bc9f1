//! Registry: persistence, versions, rollback, golden, retention, fallback chain, hot swap.

use std::fs;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tensorvault_registry::checkpoint::WEIGHTS_FILE;
use tensorvault_registry::registry::{MANIFEST_FILE, VERSIONS_DIR};
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, InitializationStrategy, LoadedWeights,
    RegistryError, TrainingMetrics, WeightInitializer, WeightRegistry, WeightTensor,
};

fn config(primary: &str) -> InitializationConfig {
    InitializationConfig {
        primary: InitializationStrategy::Checkpoint {
            path: primary.into(),
            strict: true,
        },
        ..InitializationConfig::default()
    }
}

fn open(root: &std::path::Path) -> WeightRegistry {
    WeightRegistry::with_config(root, Device::Cpu, config("golden"), FusionConfig::tiny()).unwrap()
}

fn init(seed: u64, version: &str) -> LoadedWeights {
    let mut w = WeightInitializer::new(seed)
        .init_all(&FusionConfig::tiny(), true)
        .unwrap();
    w.version.version = version.into();
    w
}

fn metrics(epoch: usize) -> Option<TrainingMetrics> {
    Some(TrainingMetrics {
        epoch,
        loss: 0.5 / (epoch as f64 + 1.0),
        validation_loss: None,
        learning_rate: 1e-3,
        extra: Default::default(),
    })
}

#[test]
fn versions_persist_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = open(tmp.path());
    let a = reg.save_checkpoint(&init(1, "0.0.0-init"), None).unwrap();
    assert_eq!(a.version, "0.0.0-init");
    // A version that is taken is refused (never silently renamed); no version picks the
    // next patch number.
    assert!(matches!(
        reg.save_checkpoint(&init(2, "0.0.0-init"), metrics(1)),
        Err(RegistryError::VersionExists { version }) if version == "0.0.0-init"
    ));
    let b = reg.save_checkpoint(&init(2, ""), metrics(1)).unwrap();
    assert_eq!(b.version, "0.0.1", "no version: the next patch number");
    let c = reg.save_checkpoint(&init(3, "1.2.0"), metrics(2)).unwrap();
    reg.load_checkpoint("0.0.1").unwrap();
    reg.set_golden("0.0.0-init").unwrap();
    drop(reg);

    let reg = open(tmp.path());
    let listed: Vec<_> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(listed, ["0.0.0-init", "0.0.1", "1.2.0"]);
    assert_eq!(reg.list_versions()[2], c);
    assert_eq!(reg.golden().as_deref(), Some("0.0.0-init"));
    assert_eq!(reg.current_pointer().as_deref(), Some("0.0.1"));
    assert!(reg.current_version().is_none(), "nothing loaded yet");
    // Chain: primary "golden" dir is absent -> golden version.
    let w = reg.load_weights().unwrap();
    assert_eq!(w.version.version, "0.0.0-init");
    let at = reg.last_load_attempts();
    assert!(at[0].error.is_some() && at[1].error.is_none(), "{at:?}");
    // Rollback.
    let r = reg.rollback("1.2.0").unwrap();
    assert_eq!(r.version.version, "1.2.0");
    assert_eq!(reg.current_version().unwrap().version, "1.2.0");
    assert_eq!(r.output.data(), init(3, "x").output.data());
    assert!(matches!(
        reg.rollback("9.9.9"),
        Err(RegistryError::VersionNotFound { .. })
    ));
}

#[test]
fn path_tricks_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = open(tmp.path());
    for v in ["../../etc", "../x", "1.0.0/../../x", "/etc/passwd"] {
        assert!(matches!(
            reg.load_checkpoint(v),
            Err(RegistryError::InvalidVersion { .. })
        ));
        assert!(matches!(
            reg.verify_version(v),
            Err(RegistryError::InvalidVersion { .. })
        ));
    }
    // An invalid version in the weights is refused before anything is written, never used
    // as a path and never replaced by another name.
    assert!(matches!(
        reg.save_checkpoint(&init(1, "../../etc"), None),
        Err(RegistryError::InvalidVersion { version, .. }) if version == "../../etc"
    ));
    assert!(!tmp.path().join("etc").exists());
    assert!(reg.list_versions().is_empty());
}

#[test]
fn checksum_mismatch_falls_through_the_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = open(tmp.path());
    reg.save_checkpoint(&init(1, "1.0.0"), None).unwrap();
    reg.save_checkpoint(&init(2, "1.1.0"), None).unwrap();
    drop(reg);
    // Flip one byte of the newest version.
    let p = tmp
        .path()
        .join(VERSIONS_DIR)
        .join("1.1.0")
        .join(WEIGHTS_FILE);
    let mut b = fs::read(&p).unwrap();
    let i = b.len() - 1;
    b[i] ^= 0x80;
    fs::write(&p, &b).unwrap();

    let reg = open(tmp.path());
    assert!(matches!(
        reg.verify_version("1.1.0"),
        Err(RegistryError::ChecksumMismatch { .. })
    ));
    let w = reg.load_weights().unwrap();
    assert_eq!(w.version.version, "1.0.0");
    let at = reg.last_load_attempts();
    assert_eq!(at.len(), 3, "{at:?}");
    assert!(at[1].source.contains("1.1.0") && at[1].error.as_ref().unwrap().contains("checksum"));
    // Cached afterwards.
    assert!(Arc::ptr_eq(&w, &reg.load_weights().unwrap()));
}

#[test]
fn empty_registry_initializes_deterministically() {
    let tmp = tempfile::tempdir().unwrap();
    let w1 = open(tmp.path()).load_weights().unwrap();
    let w2 = open(tmp.path()).load_weights().unwrap();
    assert_eq!(w1.version.version, "0.0.0-init");
    assert_eq!(w1.version.source_id, "zero-shot-seed-42");
    for ((_, a), (_, b)) in w1.named_tensors().iter().zip(w2.named_tensors()) {
        assert_eq!(a.data(), b.data());
    }
    // Primary checkpoint path that exists wins.
    let reg = open(tmp.path());
    tensorvault_registry::write_checkpoint(
        &tmp.path().join("golden"),
        &init(5, "3.0.0"),
        &FusionConfig::tiny(),
    )
    .unwrap();
    assert_eq!(reg.load_weights().unwrap().version.version, "3.0.0");
}

#[test]
fn cuda_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(
        WeightRegistry::new(tmp.path(), Device::Cuda(0)),
        Err(RegistryError::Unsupported { .. })
    ));
}

#[test]
fn retention_keeps_golden_and_current() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = open(tmp.path());
    for i in 0..6 {
        reg.save_checkpoint(&init(i, &format!("1.0.{i}")), None)
            .unwrap();
    }
    reg.set_golden("1.0.0").unwrap();
    reg.load_checkpoint("1.0.1").unwrap();
    let removed = reg.set_retention(Some(2)).unwrap();
    assert_eq!(removed, ["1.0.2", "1.0.3"]);
    let listed: Vec<_> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(listed, ["1.0.0", "1.0.1", "1.0.4", "1.0.5"]);
    assert!(!tmp.path().join(VERSIONS_DIR).join("1.0.2").exists());
    // New saves prune the oldest unprotected one.
    reg.save_checkpoint(&init(9, "2.0.0"), None).unwrap();
    let listed: Vec<_> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(listed, ["1.0.0", "1.0.1", "1.0.5", "2.0.0"]);
    drop(reg);
    let listed: Vec<_> = open(tmp.path())
        .list_versions()
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(listed, ["1.0.0", "1.0.1", "1.0.5", "2.0.0"]);
}

/// A crafted `registry.json` naming `../../victim` with retention 1 used to make the next
/// save delete a directory outside the registry. Opening such a manifest is now refused with
/// the field named, and the victim survives.
#[test]
fn crafted_manifest_version_cannot_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a").join("reg");
    let victim = tmp.path().join("victim");
    fs::create_dir_all(&victim).unwrap();
    fs::write(victim.join("precious"), b"user data").unwrap();
    let reg = open(&root);
    reg.save_checkpoint(&init(1, "1.0.0"), None).unwrap();
    drop(reg);
    let mpath = root.join(MANIFEST_FILE);
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&mpath).unwrap()).unwrap();
    assert_eq!(m["format_version"], 2);
    let mut forged = m["versions"][0].clone();
    forged["version"] = "../../../victim".into();
    m["versions"].as_array_mut().unwrap().insert(0, forged);
    m["retention"] = 1.into();
    // A hand edit leaves the checksum stale: refused before anything is read from it.
    fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    let err =
        WeightRegistry::with_config(&root, Device::Cpu, config("golden"), FusionConfig::tiny())
            .unwrap_err();
    assert!(
        matches!(err, RegistryError::ManifestChecksum { .. }),
        "{err:?}"
    );
    // A checksum is no authority (anyone can recompute it; here: a format-1 manifest,
    // which has none): the version strings are still validated.
    m["format_version"] = 1.into();
    m.as_object_mut().unwrap().remove("manifest_crc32c");
    fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    let err =
        WeightRegistry::with_config(&root, Device::Cpu, config("golden"), FusionConfig::tiny())
            .unwrap_err();
    match &err {
        RegistryError::ManifestInvalidVersion { field, version, .. } => {
            assert_eq!(field, "versions[0].version");
            assert_eq!(version, "../../../victim");
        }
        other => panic!("expected ManifestInvalidVersion, got {other:?}"),
    }
    assert!(victim.join("precious").exists());
    m["versions"].as_array_mut().unwrap().remove(0);
    for field in ["golden", "current"] {
        let mut m2 = m.clone();
        m2[field] = "/etc".into();
        fs::write(&mpath, serde_json::to_vec(&m2).unwrap()).unwrap();
        let e =
            WeightRegistry::with_config(&root, Device::Cpu, config("golden"), FusionConfig::tiny())
                .unwrap_err();
        assert!(
            matches!(&e, RegistryError::ManifestInvalidVersion { field: f, .. } if f == field),
            "{e:?}"
        );
    }
}

#[test]
fn interrupted_save_is_not_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = open(tmp.path());
    reg.save_checkpoint(&init(1, "1.0.0"), None).unwrap();
    drop(reg);
    // What a kill -9 can leave: a temp dir mid-write, and a renamed dir whose manifest
    // update never happened.
    let vdir = tmp.path().join(VERSIONS_DIR);
    fs::create_dir_all(vdir.join(".tmp-1.1.0-123-456")).unwrap();
    fs::write(vdir.join(".tmp-1.1.0-123-456").join(WEIGHTS_FILE), b"half").unwrap();
    let manifest = fs::read(tmp.path().join(MANIFEST_FILE)).unwrap();
    let reg = open(tmp.path());
    reg.save_checkpoint(&init(2, "1.2.0"), None).unwrap();
    drop(reg);
    fs::write(tmp.path().join(MANIFEST_FILE), manifest).unwrap();

    let reg = open(tmp.path());
    let listed: Vec<_> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(listed, ["1.0.0"]);
    assert!(!vdir.join(".tmp-1.1.0-123-456").exists());
    assert!(reg.verify_version("1.0.0").is_ok());
    assert!(matches!(
        reg.load_checkpoint("1.2.0"),
        Err(RegistryError::VersionNotFound { .. })
    ));
}

/// Weights whose every value is `k`: the per-version fingerprint.
fn constant(k: f32, version: &str) -> LoadedWeights {
    let mut w = init(0, version);
    let fill = |t: &mut WeightTensor| {
        *t = WeightTensor::new(t.shape().to_vec(), vec![k; t.data().len()]).unwrap()
    };
    fill(&mut w.gating.linear_weight);
    fill(&mut w.gating.linear_bias);
    fill(&mut w.gating.temperature);
    for e in &mut w.experts {
        fill(&mut e.input_proj);
        fill(&mut e.hidden);
        fill(&mut e.output_proj);
    }
    fill(&mut w.output);
    w
}

#[test]
fn hot_swap_under_load_never_mixes() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = Arc::new(open(tmp.path()));
    reg.hot_swap(constant(0.0, "0.0.0")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (reg, stop, reads) = (reg.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut last = -1.0f32;
                while !stop.load(Ordering::Relaxed) {
                    let w = reg.current().unwrap();
                    let k = w.gating.temperature.data()[0];
                    assert_eq!(w.version.version, format!("0.0.{}", k as u32));
                    for (name, t) in w.named_tensors() {
                        assert!(t.data().iter().all(|&v| v == k), "mixed set in {name}");
                    }
                    assert!(k >= last, "went backwards");
                    last = k;
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for i in 1..=100u32 {
        reg.hot_swap(constant(i as f32, &format!("0.0.{i}")))
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(reg.current_version().unwrap().version, "0.0.100");
    assert!(reads.load(Ordering::Relaxed) > 0);
    // Invalid shapes are refused and leave the active set alone.
    let mut bad = constant(7.0, "0.0.7");
    bad.output = WeightTensor::new(vec![2, 2], vec![0.0; 4]).unwrap();
    assert!(matches!(
        reg.hot_swap(bad),
        Err(RegistryError::ShapeMismatch { .. })
    ));
    assert_eq!(reg.current_version().unwrap().version, "0.0.100");
}

/// Child half of the kill -9 test: saves versions in a loop until killed.
#[test]
fn crash_child_saver() {
    let Some(root) = std::env::var_os("TV_REGISTRY_CRASH_ROOT") else {
        return;
    };
    let cfg = FusionConfig {
        input_dim: 1024,
        expert_hidden_dim: 256,
        ..FusionConfig::tiny()
    };
    let reg =
        WeightRegistry::with_config(&root, Device::Cpu, config("golden"), cfg.clone()).unwrap();
    let w = WeightInitializer::new(1).init_all(&cfg, true).unwrap();
    loop {
        // No version: the registry picks the next patch after what earlier rounds saved
        // (an explicit name that is taken is an error).
        let mut v = w.clone();
        v.version.version = String::new();
        reg.save_checkpoint(&v, None).unwrap();
    }
}

#[test]
fn kill_9_during_save_leaves_registry_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut total = 0;
    for round in 0..3u64 {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "crash_child_saver", "--test-threads=1"])
            .env("TV_REGISTRY_CRASH_ROOT", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill it mid-save once it has listed a version in this round (waiting for that
        // instead of a fixed delay: on a busy machine a save can take longer than any
        // fixed sleep), a little later each round so the kill lands in different steps.
        let listed_before = total;
        let manifest = tmp.path().join(MANIFEST_FILE);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::time::Instant::now() < deadline {
            let n = fs::read_to_string(&manifest)
                .map(|s| s.matches("\"version\": \"").count())
                .unwrap_or(0);
            if n > listed_before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(15 + 40 * round));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let cfg = FusionConfig {
            input_dim: 1024,
            expert_hidden_dim: 256,
            ..FusionConfig::tiny()
        };
        let reg =
            WeightRegistry::with_config(tmp.path(), Device::Cpu, config("golden"), cfg).unwrap();
        let listed = reg.list_versions();
        total = listed.len();
        for v in listed {
            reg.verify_version(&v.version)
                .unwrap_or_else(|e| panic!("round {round}: listed {} broken: {e}", v.version));
        }
    }
    assert!(total > 0, "the child never completed a save");
}

/// A `registry.json` or `metadata.json` far larger than the registry writes (here sparse
/// 1 GiB files) is refused by its length, before anything is allocated for it.
#[test]
fn oversized_json_documents_are_refused_by_length() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let reg = open(&root);
    reg.save_checkpoint(&init(1, "1.0.0"), None).unwrap();
    drop(reg);
    let meta = root.join(VERSIONS_DIR).join("1.0.0").join("metadata.json");
    fs::File::options()
        .write(true)
        .open(&meta)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    match tensorvault_registry::checkpoint::read_metadata(meta.parent().unwrap()) {
        Err(RegistryError::FileTooLarge { size, limit, .. }) => {
            assert_eq!(size, 1 << 30);
            assert_eq!(limit, tensorvault_registry::checkpoint::MAX_METADATA_BYTES);
        }
        other => panic!("expected FileTooLarge, got {other:?}"),
    }
    let mpath = root.join(MANIFEST_FILE);
    fs::File::options()
        .write(true)
        .open(&mpath)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let e = WeightRegistry::with_config(&root, Device::Cpu, config("golden"), FusionConfig::tiny())
        .unwrap_err();
    assert!(
        matches!(e, RegistryError::FileTooLarge { size, .. } if size == 1 << 30),
        "{e:?}"
    );
}
