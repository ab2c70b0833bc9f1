//! In-memory weights: tensors (owned or mapped), the FuseMoE layout and its names.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tensorvault_core::AlignedBuf;

/// Shapes of the FuseMoE network. Defaults are the seed's (~312 MB of f32); tests shrink it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FusionConfig {
    /// Concatenated input width (8320).
    pub input_dim: usize,
    /// Number of experts (8).
    pub num_experts: usize,
    /// Expert hidden width (1024).
    pub expert_hidden_dim: usize,
    /// Expert output width (192).
    pub expert_output_dim: usize,
    /// Output projection width, square (1536).
    pub output_dim: usize,
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            input_dim: 8320,
            num_experts: 8,
            expert_hidden_dim: 1024,
            expert_output_dim: 192,
            output_dim: 1536,
        }
    }
}

impl FusionConfig {
    /// A tiny configuration for tests and examples (a few KB).
    #[must_use]
    pub fn tiny() -> Self {
        Self {
            input_dim: 24,
            num_experts: 3,
            expert_hidden_dim: 16,
            expert_output_dim: 8,
            output_dim: 12,
        }
    }

    /// Every tensor the network has, as `(dot-separated name, shape)`, in a fixed order.
    #[must_use]
    pub fn tensor_specs(&self) -> Vec<(String, Vec<usize>)> {
        let mut v = vec![
            (
                names::GATING_WEIGHT.to_owned(),
                vec![self.input_dim, self.num_experts],
            ),
            (names::GATING_BIAS.to_owned(), vec![self.num_experts]),
            (names::GATING_TEMPERATURE.to_owned(), vec![]),
        ];
        for e in 0..self.num_experts {
            v.push((
                names::expert(e, names::INPUT_PROJ),
                vec![self.input_dim, self.expert_hidden_dim],
            ));
            v.push((
                names::expert(e, names::HIDDEN),
                vec![self.expert_hidden_dim, self.expert_hidden_dim],
            ));
            v.push((
                names::expert(e, names::OUTPUT_PROJ),
                vec![self.expert_hidden_dim, self.expert_output_dim],
            ));
        }
        v.push((
            names::OUTPUT_PROJECTION.to_owned(),
            vec![self.output_dim, self.output_dim],
        ));
        v
    }

    /// Number of values of all tensors, computed without allocating and with overflow
    /// checks (`None` on overflow): what a `config` read from a file claims, to be checked
    /// against the bytes really present before [`Self::tensor_specs`] is called.
    #[must_use]
    pub fn checked_value_count(&self) -> Option<u64> {
        let [i, e, h, o, p] = [
            self.input_dim,
            self.num_experts,
            self.expert_hidden_dim,
            self.expert_output_dim,
            self.output_dim,
        ]
        .map(|v| v as u64);
        let expert = i
            .checked_mul(h)?
            .checked_add(h.checked_mul(h)?)?
            .checked_add(h.checked_mul(o)?)?;
        i.checked_mul(e)?
            .checked_add(e)?
            .checked_add(1)?
            .checked_add(e.checked_mul(expert)?)?
            .checked_add(p.checked_mul(p)?)
    }

    /// Total f32 bytes of all tensors.
    #[must_use]
    pub fn total_bytes(&self) -> usize {
        self.tensor_specs()
            .iter()
            .map(|(_, s)| s.iter().product::<usize>() * 4)
            .sum()
    }
}

/// Tensor names in the safetensors file (dot-separated, as PyTorch state dicts).
pub mod names {
    /// Gating linear weight `[input_dim, num_experts]`.
    pub const GATING_WEIGHT: &str = "gating.linear.weight";
    /// Gating bias `[num_experts]`.
    pub const GATING_BIAS: &str = "gating.linear.bias";
    /// Gating softmax temperature, a 0-d scalar.
    pub const GATING_TEMPERATURE: &str = "gating.temperature";
    /// Output projection `[output_dim, output_dim]`.
    pub const OUTPUT_PROJECTION: &str = "output.projection.weight";
    /// Expert input projection suffix.
    pub const INPUT_PROJ: &str = "input_proj.weight";
    /// Expert hidden layer suffix.
    pub const HIDDEN: &str = "hidden.weight";
    /// Expert output projection suffix.
    pub const OUTPUT_PROJ: &str = "output_proj.weight";

    /// `experts.{id}.{suffix}`.
    #[must_use]
    pub fn expert(id: usize, suffix: &str) -> String {
        format!("experts.{id}.{suffix}")
    }
}

/// Where a tensor's f32 values live.
#[derive(Debug, Clone)]
enum Storage {
    Owned(Vec<f32>),
    /// 64-byte-aligned owned storage; buffers of 4 MiB and more are anonymous maps advised
    /// for transparent huge pages, so filling a fresh one costs 2 MiB page faults instead
    /// of 4 KiB ones (what the initializer uses).
    Aligned(AlignedBuf<f32>),
    /// Zero-copy view into a mapped little-endian safetensors file. Invariant: the range is
    /// in bounds, 4-byte aligned and a multiple of 4 long (checked when constructed).
    Mapped {
        map: Arc<memmap2::Mmap>,
        range: Range<usize>,
    },
}

/// One f32 tensor, row-major.
#[derive(Debug, Clone)]
pub struct WeightTensor {
    shape: Vec<usize>,
    storage: Storage,
}

impl WeightTensor {
    /// An owned tensor. Returns `None` when `data.len()` is not the product of `shape`.
    #[must_use]
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Option<Self> {
        (shape.iter().product::<usize>() == data.len()).then_some(Self {
            shape,
            storage: Storage::Owned(data),
        })
    }

    /// An owned tensor over an [`AlignedBuf`] (64-byte aligned; huge pages when large).
    /// Returns `None` when `data.len()` is not the product of `shape`.
    #[must_use]
    pub fn from_aligned(shape: Vec<usize>, data: AlignedBuf<f32>) -> Option<Self> {
        (shape.iter().product::<usize>() == data.len()).then_some(Self {
            shape,
            storage: Storage::Aligned(data),
        })
    }

    /// A zero-copy view into `map[range]`, or `None` if the bytes cannot be viewed as f32
    /// in place (misaligned, wrong length, big-endian host) or do not match `shape`.
    pub(crate) fn mapped(
        shape: Vec<usize>,
        map: Arc<memmap2::Mmap>,
        range: Range<usize>,
    ) -> Option<Self> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let bytes = map.get(range.clone())?;
        let floats: &[f32] = bytemuck::try_cast_slice(bytes).ok()?;
        if floats.len() != shape.iter().product::<usize>() {
            return None;
        }
        Some(Self {
            shape,
            storage: Storage::Mapped { map, range },
        })
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values.
    #[must_use]
    pub fn data(&self) -> &[f32] {
        match &self.storage {
            Storage::Owned(v) => v,
            Storage::Aligned(b) => b,
            Storage::Mapped { map, range } => map
                .get(range.clone())
                .and_then(|b| bytemuck::try_cast_slice(b).ok())
                // Unreachable: `mapped` checked bounds and alignment of this immutable map.
                .unwrap_or(&[]),
        }
    }

    /// `true` when the values are a zero-copy view of a mapped file.
    #[must_use]
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }
}

/// Gating network weights.
#[derive(Debug, Clone)]
pub struct GatingNetworkWeights {
    /// `[input_dim, num_experts]`.
    pub linear_weight: WeightTensor,
    /// `[num_experts]`.
    pub linear_bias: WeightTensor,
    /// 0-d scalar.
    pub temperature: WeightTensor,
}

/// One expert MLP.
#[derive(Debug, Clone)]
pub struct ExpertWeights {
    /// Expert index.
    pub expert_id: usize,
    /// `[input_dim, hidden]`.
    pub input_proj: WeightTensor,
    /// `[hidden, hidden]`.
    pub hidden: WeightTensor,
    /// `[hidden, expert_output]`.
    pub output_proj: WeightTensor,
}

/// A complete set of FuseMoE weights plus the version they came from.
#[derive(Debug, Clone)]
pub struct LoadedWeights {
    /// Gating network.
    pub gating: GatingNetworkWeights,
    /// Experts, in id order.
    pub experts: Vec<ExpertWeights>,
    /// Output projection.
    pub output: WeightTensor,
    /// Version metadata.
    pub version: crate::version::WeightVersion,
    /// Tensors a non-strict load filled with the fallback strategy (empty otherwise).
    pub filled_by_fallback: Vec<String>,
}

impl LoadedWeights {
    /// Every tensor with its dot-separated name, in [`FusionConfig::tensor_specs`] order.
    #[must_use]
    pub fn named_tensors(&self) -> Vec<(String, &WeightTensor)> {
        let mut v = vec![
            (names::GATING_WEIGHT.to_owned(), &self.gating.linear_weight),
            (names::GATING_BIAS.to_owned(), &self.gating.linear_bias),
            (
                names::GATING_TEMPERATURE.to_owned(),
                &self.gating.temperature,
            ),
        ];
        for e in &self.experts {
            let id = e.expert_id;
            v.push((names::expert(id, names::INPUT_PROJ), &e.input_proj));
            v.push((names::expert(id, names::HIDDEN), &e.hidden));
            v.push((names::expert(id, names::OUTPUT_PROJ), &e.output_proj));
        }
        v.push((names::OUTPUT_PROJECTION.to_owned(), &self.output));
        v
    }

    /// Checks every tensor's name and shape against `config`.
    ///
    /// # Errors
    /// [`crate::RegistryError::ShapeMismatch`], [`crate::RegistryError::MissingTensor`] or
    /// [`crate::RegistryError::UnexpectedTensor`] for the first difference.
    pub fn validate(&self, config: &FusionConfig) -> crate::Result<()> {
        let have = self.named_tensors();
        let want = config.tensor_specs();
        for (i, (name, shape)) in want.iter().enumerate() {
            let Some((hname, t)) = have.get(i) else {
                return Err(crate::RegistryError::MissingTensor {
                    name: name.clone(),
                    path: "<in-memory weights>".into(),
                });
            };
            if hname != name {
                return Err(crate::RegistryError::MissingTensor {
                    name: name.clone(),
                    path: "<in-memory weights>".into(),
                });
            }
            if t.shape() != shape.as_slice() {
                return Err(crate::RegistryError::ShapeMismatch {
                    name: name.clone(),
                    expected: shape.clone(),
                    found: t.shape().to_vec(),
                });
            }
        }
        if let Some((name, _)) = have.get(want.len()) {
            return Err(crate::RegistryError::UnexpectedTensor {
                name: name.clone(),
                path: "<in-memory weights>".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_tensor_checks_length_and_reads_back() {
        let mut buf = AlignedBuf::<f32>::zeroed(6);
        buf.copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(WeightTensor::from_aligned(vec![4, 2], buf.clone()).is_none());
        let t = WeightTensor::from_aligned(vec![2, 3], buf).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.data(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(!t.is_mapped());
        let c = t.clone();
        assert_eq!(c.data(), t.data());
        assert_ne!(c.data().as_ptr(), t.data().as_ptr());
    }
}
