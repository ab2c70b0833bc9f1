//! Model registry: any safetensors checkpoint (single file or sharded, any dtype) as a
//! version, with verification, rollback, golden, retention and hot swap; hostile indexes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};
use tensorvault_registry::model::{read_model_metadata, resolve_source, INDEX_FILE, SINGLE_FILE};
use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, LoadedModel, ModelRegistry, ModelTensor, Preset,
    RegistryError, SaveOptions, Verify, WeightInitializer, WeightRegistry,
};

/// Deterministic bytes (xorshift), `n` of them.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

type Spec = (&'static str, Dtype, Vec<usize>);

fn tensors(seed: u64, specs: &[Spec]) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    specs
        .iter()
        .enumerate()
        .map(|(i, (n, d, s))| {
            let len = s.iter().product::<usize>() * d.size();
            let mut b = bytes(seed * 1000 + i as u64, len);
            if *d == Dtype::BOOL {
                b.iter_mut().for_each(|v| *v &= 1);
            }
            ((*n).to_owned(), *d, s.clone(), b)
        })
        .collect()
}

fn st_file(path: &Path, t: &[(String, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = t
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let meta = std::collections::HashMap::from([("format".to_owned(), "pt".to_owned())]);
    let out = safetensors::serialize(views, &Some(meta)).unwrap();
    fs::write(path, &out).unwrap();
    out
}

fn mixed() -> Vec<Spec> {
    vec![
        ("embeddings.word.weight", Dtype::F32, vec![64, 16]),
        ("encoder.0.dense.weight", Dtype::F16, vec![16, 24]),
        ("encoder.0.dense.bias", Dtype::BF16, vec![24]),
        ("encoder.0.scale", Dtype::F64, vec![]),
        ("position_ids", Dtype::I64, vec![1, 40]),
        ("quant.codes", Dtype::U8, vec![33]),
        ("mask", Dtype::BOOL, vec![5, 3]),
        ("counts", Dtype::I32, vec![7]),
    ]
}

fn opts(v: &str) -> SaveOptions {
    SaveOptions {
        version: Some(v.into()),
        ..SaveOptions::default()
    }
}

/// A Hugging Face sharded directory: 2 shards + index. Returns the tensors by name.
fn sharded_dir(dir: &Path, seed: u64) -> BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> {
    fs::create_dir_all(dir).unwrap();
    let all = tensors(seed, &mixed());
    let (a, b) = all.split_at(4);
    st_file(&dir.join("model-00001-of-00002.safetensors"), a);
    st_file(&dir.join("model-00002-of-00002.safetensors"), b);
    let mut wm = serde_json::Map::new();
    for (n, ..) in a {
        wm.insert(n.clone(), "model-00001-of-00002.safetensors".into());
    }
    for (n, ..) in b {
        wm.insert(n.clone(), "model-00002-of-00002.safetensors".into());
    }
    let index = serde_json::json!({"metadata": {"total_size": 12345}, "weight_map": wm});
    fs::write(
        dir.join(INDEX_FILE),
        serde_json::to_vec_pretty(&index).unwrap(),
    )
    .unwrap();
    all.into_iter().map(|(n, d, s, b)| (n, (d, s, b))).collect()
}

fn assert_model(m: &LoadedModel, want: &BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>) {
    assert_eq!(m.tensors().len(), want.len());
    for (name, (d, s, b)) in want {
        let t = m.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(t.dtype(), *d, "{name}");
        assert_eq!(t.shape(), s.as_slice(), "{name}");
        assert_eq!(t.bytes(), b.as_slice(), "{name}");
        assert!(t.is_mapped(), "{name} is a view of the mapped file");
    }
}

#[test]
fn single_file_of_every_dtype_round_trips_bit_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("anything.safetensors");
    let t = tensors(1, &mixed());
    let original = st_file(&src, &t);
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let v = reg.save_from_path(&src, opts("1.0.0")).unwrap();
    assert_eq!(v.version, "1.0.0");
    let dir = reg.version_dir("1.0.0").unwrap();
    // Copied byte for byte, under the Hugging Face name.
    assert_eq!(fs::read(dir.join(SINGLE_FILE)).unwrap(), original);
    let meta = read_model_metadata(&dir).unwrap();
    assert_eq!(meta.files.len(), 1);
    assert_eq!(meta.version.checksum, meta.files[0].sha256);
    assert_eq!(v.checksum, meta.files[0].sha256);
    let m = reg.load_version("1.0.0").unwrap();
    let want = t.into_iter().map(|(n, d, s, b)| (n, (d, s, b))).collect();
    assert_model(&m, &want);
    assert_eq!(reg.current_pointer().as_deref(), Some("1.0.0"));
    reg.verify_version("1.0.0").unwrap();
    // f16/bf16 widen exactly.
    let f16 = m.get("encoder.0.dense.weight").unwrap();
    let wide = f16.to_f32("w").unwrap();
    let b = f16.bytes();
    assert_eq!(wide[3], half::f16::from_le_bytes([b[6], b[7]]).to_f32());
    assert!(m.get("counts").unwrap().to_f32("counts").is_err());
}

#[test]
fn sharded_directory_round_trips_and_keeps_its_index() {
    let tmp = tempfile::tempdir().unwrap();
    let hf = tmp.path().join("hf");
    let want = sharded_dir(&hf, 2);
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let v = reg.save_from_path(&hf, opts("2.0.0")).unwrap();
    let dir = reg.version_dir(&v.version).unwrap();
    for f in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        INDEX_FILE,
    ] {
        assert_eq!(
            fs::read(dir.join(f)).unwrap(),
            fs::read(hf.join(f)).unwrap(),
            "{f}"
        );
    }
    let meta = reg.metadata("2.0.0").unwrap();
    assert_eq!(meta.index.as_deref(), Some(INDEX_FILE));
    assert_eq!(meta.files.len(), 3);
    assert_ne!(
        meta.version.checksum, meta.files[0].sha256,
        "a listing digest"
    );
    // The same checkpoint through its index file.
    let v2 = reg
        .save_from_path(&hf.join(INDEX_FILE), opts("2.0.1"))
        .unwrap();
    assert_eq!(v2.checksum, v.checksum);
    let m = reg.load_version("2.0.0").unwrap();
    assert_model(&m, &want);
    reg.verify_version("2.0.1").unwrap();
    // The saved version directory is itself a Hugging Face directory.
    let again = resolve_source(&dir).unwrap();
    assert_eq!(again.shards.len(), 2);
}

#[test]
fn hostile_index_shard_paths_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("evil.safetensors");
    st_file(&victim, &tensors(3, &mixed()[..1]));
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    for (i, shard) in [
        "../evil.safetensors",
        "/etc/passwd",
        "sub/model.safetensors",
        "..",
        ".hidden.safetensors",
        "a\\b.safetensors",
        "",
        "metadata.json",
        INDEX_FILE,
    ]
    .into_iter()
    .enumerate()
    {
        let hf = tmp.path().join(format!("hf{i}"));
        fs::create_dir_all(&hf).unwrap();
        let index = serde_json::json!({"weight_map": {"embeddings.word.weight": shard}});
        fs::write(hf.join(INDEX_FILE), index.to_string()).unwrap();
        match reg.save_from_path(&hf, opts("1.0.0")) {
            Err(RegistryError::UnsafeFileName { name, field, .. }) => {
                assert_eq!(name, shard);
                assert_eq!(field, "weight_map[\"embeddings.word.weight\"]");
            }
            other => panic!("{shard:?}: expected UnsafeFileName, got {other:?}"),
        }
    }
    assert!(reg.list_versions().is_empty());
    assert_eq!(
        fs::read_dir(tmp.path().join("reg/versions"))
            .unwrap()
            .count(),
        0,
        "nothing written"
    );
}

#[test]
fn hostile_metadata_file_names_are_refused_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("m.safetensors");
    st_file(&src, &tensors(4, &mixed()));
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    reg.save_from_path(&src, opts("1.0.0")).unwrap();
    let mpath = reg.version_dir("1.0.0").unwrap().join("metadata.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&fs::read(&mpath).unwrap()).unwrap();
    meta["files"][0]["path"] = "../../m.safetensors".into();
    fs::write(&mpath, meta.to_string()).unwrap();
    match reg.load_version("1.0.0") {
        Err(RegistryError::UnsafeFileName { field, .. }) => assert_eq!(field, "files[0].path"),
        other => panic!("expected UnsafeFileName, got {other:?}"),
    }
    // Chunk lists that do not fit the file length are refused before hashing.
    meta["files"][0]["path"] = SINGLE_FILE.into();
    meta["files"][0]["chunks"]["blake3"] = serde_json::json!([]);
    fs::write(&mpath, meta.to_string()).unwrap();
    assert!(matches!(
        reg.load_version("1.0.0"),
        Err(RegistryError::InvalidMetadata { .. })
    ));
}

#[test]
fn inconsistent_indexes_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    let hf = tmp.path().join("hf");
    sharded_dir(&hf, 5);
    let ipath = hf.join(INDEX_FILE);
    let good: serde_json::Value = serde_json::from_slice(&fs::read(&ipath).unwrap()).unwrap();
    // A tensor mapped to the wrong shard.
    let mut bad = good.clone();
    bad["weight_map"]["mask"] = "model-00001-of-00002.safetensors".into();
    fs::write(&ipath, bad.to_string()).unwrap();
    assert!(matches!(
        reg.save_from_path(&hf, opts("1.0.0")),
        Err(RegistryError::UnexpectedTensor { .. })
    ));
    // A mapped tensor no shard holds.
    let mut bad = good.clone();
    bad["weight_map"]["ghost"] = "model-00001-of-00002.safetensors".into();
    fs::write(&ipath, bad.to_string()).unwrap();
    match reg.save_from_path(&hf, opts("1.0.0")) {
        Err(RegistryError::MissingTensor { name, .. }) => assert_eq!(name, "ghost"),
        other => panic!("expected MissingTensor, got {other:?}"),
    }
    // The same tensor in two shards.
    st_file(
        &hf.join("model-00002-of-00002.safetensors"),
        &tensors(5, &mixed()[..1]),
    );
    fs::write(&ipath, good.to_string()).unwrap();
    assert!(matches!(
        reg.save_from_path(&hf, opts("1.0.0")),
        Err(RegistryError::DuplicateTensor { .. })
    ));
    // Not a checkpoint at all.
    assert!(matches!(
        reg.save_from_path(tmp.path(), opts("1.0.0")),
        Err(RegistryError::NotACheckpoint { .. })
    ));
    assert!(reg.list_versions().is_empty());
}

#[test]
fn damage_is_found_by_chunk_and_whole_file_digests() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("big.safetensors");
    // 9 MiB: three 4 MiB chunks, the last one short.
    let t = tensors(6, &[("w", Dtype::F32, vec![9 * 1024, 256])]);
    st_file(&src, &t);
    let reg = ModelRegistry::open(tmp.path().join("reg"), Preset::Any).unwrap();
    reg.save_from_path(&src, opts("1.0.0")).unwrap();
    let meta = reg.metadata("1.0.0").unwrap();
    assert_eq!(meta.files[0].chunks.as_ref().unwrap().blake3.len(), 3);
    let file = reg.version_dir("1.0.0").unwrap().join(SINGLE_FILE);
    let mut b = fs::read(&file).unwrap();
    let at = (5 << 20) + 17;
    b[at] ^= 0x40;
    fs::write(&file, &b).unwrap();
    match reg.load_version("1.0.0") {
        Err(RegistryError::ChunkChecksumMismatch { offset, end, .. }) => {
            assert_eq!(offset, 4 << 20);
            assert_eq!(end, 8 << 20);
        }
        other => panic!("expected ChunkChecksumMismatch, got {other:?}"),
    }
    assert!(reg.verify_version("1.0.0").is_err());
    let dir = reg.version_dir("1.0.0").unwrap();
    assert!(matches!(
        tensorvault_registry::model_tensor::load_model_dir(&dir, Verify::Full),
        Err(RegistryError::ChecksumMismatch { .. })
    ));
    // Unverified, the (damaged) bytes load as they are.
    let m = tensorvault_registry::model_tensor::load_model_dir(&dir, Verify::None).unwrap();
    assert_eq!(m.get("w").unwrap().bytes().len(), 9 * 1024 * 256 * 4);
    // A truncated file is damage too.
    fs::write(&file, &b[..b.len() - 1]).unwrap();
    assert!(matches!(
        reg.load_version("1.0.0"),
        Err(RegistryError::ChecksumMismatch { .. })
    ));
}

#[test]
fn rollback_golden_retention_and_hot_swap() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let reg = ModelRegistry::open(&root, Preset::Any).unwrap();
    let mut files = Vec::new();
    for i in 0..4u64 {
        let p = tmp.path().join(format!("v{i}.safetensors"));
        st_file(&p, &tensors(10 + i, &mixed()));
        files.push(p);
    }
    reg.save_from_path(&files[0], opts("1.0.0")).unwrap();
    reg.set_golden("1.0.0").unwrap();
    let v = reg
        .save_from_path(&files[1], SaveOptions::default())
        .unwrap();
    assert_eq!(v.version, "1.0.1", "default: patch bumped");
    reg.save_from_path(&files[2], opts("1.1.0")).unwrap();
    // load(): the golden version first.
    assert_eq!(reg.load().unwrap().version.version, "1.0.0");
    // Hot swap to a version of the same layout: readers holding the old model keep it.
    let old = reg.current().unwrap();
    let new = reg.hot_swap_version("1.1.0").unwrap();
    assert_eq!(reg.current().unwrap().version.version, "1.1.0");
    assert_eq!(reg.current_pointer().as_deref(), Some("1.1.0"));
    assert_ne!(
        old.get("quant.codes").unwrap().bytes(),
        new.get("quant.codes").unwrap().bytes()
    );
    let tensors_copy: BTreeMap<String, ModelTensor> = new
        .tensors()
        .iter()
        .map(|(n, t)| {
            let b = t.bytes().to_vec();
            (
                n.clone(),
                ModelTensor::from_bytes(n, t.dtype(), t.shape().to_vec(), b).unwrap(),
            )
        })
        .collect();
    // A different layout is refused and the active model stays.
    let f16 = ModelTensor::from_bytes("e", Dtype::F16, vec![64, 16], vec![0; 64 * 16 * 2]).unwrap();
    let mut other = tensors_copy.clone();
    other.insert("embeddings.word.weight".to_owned(), f16.clone());
    let err = reg
        .hot_swap(LoadedModel::new(new.version.clone(), other))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::DtypeMismatch { .. }),
        "{err:?}"
    );
    let only = BTreeMap::from([("embeddings.word.weight".to_owned(), f16)]);
    let err = reg
        .hot_swap(LoadedModel::new(new.version.clone(), only))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::MissingTensor { .. }),
        "{err:?}"
    );
    assert_eq!(reg.current().unwrap().version.version, "1.1.0");
    // An in-memory model of the same layout swaps in and saves as a version.
    let mem = LoadedModel::new(new.version.clone(), tensors_copy);
    let saved = reg.save_model(&mem, opts("2.0.0")).unwrap();
    reg.hot_swap(mem).unwrap();
    let back = reg.read_version("2.0.0").unwrap();
    new.check_same_layout(&back).unwrap();
    for (n, t) in new.tensors() {
        assert_eq!(back.get(n).unwrap().bytes(), t.bytes(), "{n}");
    }
    assert_eq!(reg.list_versions().last().unwrap().checksum, saved.checksum);
    // Rollback.
    reg.rollback("1.0.1").unwrap();
    assert_eq!(reg.current_pointer().as_deref(), Some("1.0.1"));
    // Retention 1: keeps the newest, golden and current.
    let removed = reg.set_retention(Some(1)).unwrap();
    assert_eq!(removed, vec!["1.1.0".to_owned()]);
    assert!(!reg.version_dir("1.1.0").unwrap().exists());
    drop(reg);
    // Reopened: state persisted; a damaged current version is skipped by load().
    let reg = ModelRegistry::open(&root, Preset::Any).unwrap();
    let names: Vec<String> = reg.list_versions().into_iter().map(|v| v.version).collect();
    assert_eq!(names, ["1.0.0", "1.0.1", "2.0.0"]);
    assert_eq!(reg.golden().as_deref(), Some("1.0.0"));
    fs::remove_file(reg.version_dir("1.0.0").unwrap().join(SINGLE_FILE)).unwrap();
    assert_eq!(reg.load().unwrap().version.version, "1.0.1");
    assert!(matches!(
        reg.load_version("9.9.9"),
        Err(RegistryError::VersionNotFound { .. })
    ));
    assert!(matches!(
        reg.load_version("../x"),
        Err(RegistryError::InvalidVersion { .. })
    ));
}

fn fusemoe_file(dir: &Path, cfg: &FusionConfig) -> PathBuf {
    let w = WeightInitializer::new(7).init_all(cfg, true).unwrap();
    let t: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = w
        .named_tensors()
        .into_iter()
        .map(|(n, t)| {
            let b = t.data().iter().flat_map(|v| v.to_le_bytes()).collect();
            (n, Dtype::F32, t.shape().to_vec(), b)
        })
        .collect();
    let p = dir.join("fusemoe.safetensors");
    st_file(&p, &t);
    p
}

#[test]
fn fusemoe_is_a_preset_and_both_registries_share_one_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let cfg = FusionConfig::tiny();
    // A FuseMoE registry with one native version.
    let wreg = WeightRegistry::with_config(
        &root,
        Device::Cpu,
        InitializationConfig::default(),
        cfg.clone(),
    )
    .unwrap();
    let mut w = WeightInitializer::new(1).init_all(&cfg, true).unwrap();
    w.version.version = "0.0.0-init".into();
    wreg.save_checkpoint(&w, None).unwrap();
    drop(wreg);
    // The model registry with the FuseMoE preset: refuses other tensors, takes FuseMoE ones.
    let mreg = ModelRegistry::open(&root, Preset::FuseMoe(cfg.clone())).unwrap();
    let other = tmp.path().join("other.safetensors");
    st_file(&other, &tensors(1, &mixed()));
    assert!(matches!(
        mreg.save_from_path(&other, opts("1.0.0")),
        Err(RegistryError::UnexpectedTensor { .. })
    ));
    let src = fusemoe_file(tmp.path(), &cfg);
    mreg.save_from_path(&src, opts("1.0.0")).unwrap();
    // It reads the native FuseMoE version generically.
    let native = mreg.load_version("0.0.0-init").unwrap();
    assert_eq!(native.preset, Preset::FuseMoe(cfg.clone()));
    mreg.verify_version("0.0.0-init").unwrap();
    drop(mreg);
    // The FuseMoE registry opens the shared manifest and loads the model-format version.
    let wreg = WeightRegistry::with_config(
        &root,
        Device::Cpu,
        InitializationConfig::default(),
        cfg.clone(),
    )
    .unwrap();
    assert_eq!(wreg.list_versions().len(), 2);
    let loaded = wreg.load_checkpoint("1.0.0").unwrap();
    let direct = WeightInitializer::new(7).init_all(&cfg, true).unwrap();
    assert_eq!(loaded.output.data(), direct.output.data());
    assert!(loaded.output.is_mapped());
    wreg.verify_version("1.0.0").unwrap();
}
