//! Deterministic weight initialization with one independent ChaCha8 stream per tensor.
//!
//! The stream for a tensor is keyed by `SHA-256("tensorvault-registry/init/v1" || seed (u64
//! LE) || name)`, so results do not depend on the order or the thread tensors are
//! initialized in: the rayon path is bit-identical to the serial one, and experts differ
//! from one another (the seed's sample code reseeded every tensor identically).
//!
//! Uniform strategies (Kaiming / Xavier uniform) take one key word from the stream and fill
//! the tensor counter-based (SplitMix64 of key + index, parallel within the tensor, the
//! same for any thread count); normal draws use `StandardNormal` (f64,
//! ziggurat), both pure integer/IEEE arithmetic except the ziggurat tail's `ln`, which is
//! reached with probability < 1e-3 per draw; bit-identity across platforms therefore
//! assumes a correctly rounded-enough `ln` for those rare draws.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use sha2::Digest;

use crate::error::Result;
use crate::strategy::{sample_tensor, InitializationStrategy, KaimingMode, Nonlinearity};
use crate::version::{now_rfc3339, WeightVersion};
use crate::weights::{
    names, ExpertWeights, FusionConfig, GatingNetworkWeights, LoadedWeights, WeightTensor,
};

/// Domain-separation prefix for the per-tensor stream keys.
const STREAM_DOMAIN: &[u8] = b"tensorvault-registry/init/v1";

/// Deterministic initializer for the FuseMoE weights.
#[derive(Debug, Clone)]
pub struct WeightInitializer {
    seed: u64,
    weight_strategy: InitializationStrategy,
}

impl WeightInitializer {
    /// Initializer with Kaiming-uniform (fan-in, ReLU) weights, zero biases and unit
    /// temperature.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self::with_strategy(
            seed,
            InitializationStrategy::KaimingUniform {
                mode: KaimingMode::FanIn,
                nonlinearity: Nonlinearity::ReLU,
            },
        )
    }

    /// Initializer using `weight_strategy` for every weight matrix.
    #[must_use]
    pub fn with_strategy(seed: u64, weight_strategy: InitializationStrategy) -> Self {
        Self {
            seed,
            weight_strategy,
        }
    }

    /// The seed.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The independent RNG stream of tensor `name`.
    #[must_use]
    pub fn stream(&self, name: &str) -> ChaCha8Rng {
        let mut h = sha2::Sha256::new();
        h.update(STREAM_DOMAIN);
        h.update(self.seed.to_le_bytes());
        h.update(name.as_bytes());
        ChaCha8Rng::from_seed(h.finalize().into())
    }

    /// Initializes one tensor named `name` with `strategy` from its own stream (uniform,
    /// zeros and ones into huge-page-backed [`tensorvault_core::AlignedBuf`] storage, see
    /// [`crate::strategy::sample_tensor`]).
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn initialize(
        &self,
        name: &str,
        shape: &[usize],
        strategy: &InitializationStrategy,
    ) -> Result<WeightTensor> {
        sample_tensor(name, shape, strategy, &mut self.stream(name))
    }

    fn strategy_for(&self, name: &str) -> &InitializationStrategy {
        if name == names::GATING_BIAS {
            &InitializationStrategy::Zeros
        } else if name == names::GATING_TEMPERATURE {
            &InitializationStrategy::Ones
        } else {
            &self.weight_strategy
        }
    }

    /// Initializes the tensor `name` with the strategy this initializer uses for it.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn initialize_named(&self, name: &str, shape: &[usize]) -> Result<WeightTensor> {
        self.initialize(name, shape, self.strategy_for(name))
    }

    /// Initializes the gating network.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn init_gating(&self, config: &FusionConfig) -> Result<GatingNetworkWeights> {
        let specs = config.tensor_specs();
        let get = |n: &str| {
            let shape = specs
                .iter()
                .find(|(s, _)| s == n)
                .map(|(_, sh)| sh.clone())
                .unwrap_or_default();
            self.initialize_named(n, &shape)
        };
        Ok(GatingNetworkWeights {
            linear_weight: get(names::GATING_WEIGHT)?,
            linear_bias: get(names::GATING_BIAS)?,
            temperature: get(names::GATING_TEMPERATURE)?,
        })
    }

    /// Initializes expert `expert_id`.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn init_expert(&self, expert_id: usize, config: &FusionConfig) -> Result<ExpertWeights> {
        let (i, h, o) = (
            config.input_dim,
            config.expert_hidden_dim,
            config.expert_output_dim,
        );
        Ok(ExpertWeights {
            expert_id,
            input_proj: self
                .initialize_named(&names::expert(expert_id, names::INPUT_PROJ), &[i, h])?,
            hidden: self.initialize_named(&names::expert(expert_id, names::HIDDEN), &[h, h])?,
            output_proj: self
                .initialize_named(&names::expert(expert_id, names::OUTPUT_PROJ), &[h, o])?,
        })
    }

    /// Initializes all experts, in parallel (rayon) over experts.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn init_all_experts(&self, config: &FusionConfig) -> Result<Vec<ExpertWeights>> {
        (0..config.num_experts)
            .into_par_iter()
            .map(|e| self.init_expert(e, config))
            .collect()
    }

    /// Initializes the output projection.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn init_output_projection(&self, config: &FusionConfig) -> Result<WeightTensor> {
        self.initialize_named(
            names::OUTPUT_PROJECTION,
            &[config.output_dim, config.output_dim],
        )
    }

    /// Initializes every tensor of `config`, in parallel over tensors when `parallel`.
    /// Both paths give bit-identical results.
    ///
    /// # Errors
    /// See [`crate::strategy::sample`].
    pub fn init_all(&self, config: &FusionConfig, parallel: bool) -> Result<LoadedWeights> {
        let specs = config.tensor_specs();
        let tensors: Vec<WeightTensor> = if parallel {
            specs
                .par_iter()
                .map(|(n, s)| self.initialize_named(n, s))
                .collect::<Result<_>>()?
        } else {
            specs
                .iter()
                .map(|(n, s)| self.initialize_named(n, s))
                .collect::<Result<_>>()?
        };
        Ok(assemble(
            config,
            tensors,
            WeightVersion {
                version: "0.0.0-init".into(),
                source_id: format!("zero-shot-seed-{}", self.seed),
                created_at: now_rfc3339(),
                checksum: "none".into(),
                metrics: None,
            },
        ))
    }
}

/// Builds [`LoadedWeights`] from tensors in [`FusionConfig::tensor_specs`] order.
pub(crate) fn assemble(
    config: &FusionConfig,
    tensors: Vec<WeightTensor>,
    version: WeightVersion,
) -> LoadedWeights {
    let mut it = tensors.into_iter();
    let mut next = || it.next().unwrap_or_else(empty);
    let gating = GatingNetworkWeights {
        linear_weight: next(),
        linear_bias: next(),
        temperature: next(),
    };
    let experts = (0..config.num_experts)
        .map(|expert_id| ExpertWeights {
            expert_id,
            input_proj: next(),
            hidden: next(),
            output_proj: next(),
        })
        .collect();
    let output = next();
    LoadedWeights {
        gating,
        experts,
        output,
        version,
        filled_by_fallback: Vec::new(),
    }
}

fn empty() -> WeightTensor {
    WeightTensor::new(vec![0], Vec::new()).unwrap_or_else(|| unreachable!("0 elements"))
}
