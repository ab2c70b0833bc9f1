//! The tensorvault weight registry (seed 003): a versioned registry on disk with rollback,
//! a golden marker, retention and atomic hot swap, for any safetensors checkpoint
//! ([`ModelRegistry`]: a single file or a sharded Hugging Face directory, any dtype, files
//! kept byte for byte with a whole-file SHA-256 and per-chunk BLAKE3 digests) and, as one
//! preset with a typed API, for the FuseMoE weights ([`WeightRegistry`]: deterministic
//! initialization, fallback chain).
//!
//! See `README.md` in this crate and `docs/formats/registry.md` for the on-disk layout.

pub mod checkpoint;
pub mod digest;
pub mod error;
mod hashed_write;
pub mod initializer;
pub mod manifest;
pub mod model;
/// The safetensors dtype the model registry uses (re-exported so callers need not depend
/// on the `safetensors` crate themselves).
pub mod safetensors_dtype {
    pub use safetensors::tensor::Dtype;
}
pub mod model_registry;
pub mod model_tensor;
pub mod registry;
mod st_error;
pub mod strategy;
pub mod version;
pub mod weights;

pub use checkpoint::{
    load_checkpoint_dir, verify_checkpoint, write_checkpoint, write_checkpoint_reporting,
    CheckpointMetadata,
};
pub use error::{RegistryError, Result};
pub use initializer::WeightInitializer;
pub use model::{Preset, Verify};
pub use model_registry::{ModelRegistry, SaveOptions};
pub use model_tensor::{LoadedModel, ModelTensor};
pub use registry::{Device, InitializationConfig, LoadAttempt, WeightRegistry};
pub use strategy::{fans, InitializationStrategy, KaimingMode, Nonlinearity};
pub use version::{validate_version, TrainingMetrics, WeightVersion};
pub use weights::{ExpertWeights, FusionConfig, GatingNetworkWeights, LoadedWeights, WeightTensor};
