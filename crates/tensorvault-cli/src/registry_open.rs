//! Opening a weight registry for the `registry` subcommands.

use std::path::Path;

use tensorvault_registry::{
    Device, FusionConfig, InitializationConfig, RegistryError, WeightRegistry,
};

/// Opens (or creates) the registry at `root` with `fusion` shapes and initializer `seed`.
pub fn open(root: &Path, fusion: FusionConfig, seed: u64) -> Result<WeightRegistry, RegistryError> {
    let init = InitializationConfig {
        seed,
        ..InitializationConfig::default()
    };
    WeightRegistry::with_config(root, Device::Cpu, init, fusion)
}

/// Opens an existing registry (never creates one for a mistyped path).
pub fn existing(root: &Path) -> Result<WeightRegistry, RegistryError> {
    let manifest = root.join(tensorvault_registry::registry::MANIFEST_FILE);
    if !manifest.is_file() {
        return Err(RegistryError::Io {
            path: manifest,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a registry root"),
        });
    }
    open(root, FusionConfig::default(), 42)
}
