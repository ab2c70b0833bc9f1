//! Initialization strategies, following PyTorch's `torch.nn.init` formulas.
//!
//! Weights are stored `[in, out]` (the seed's layout), so for a 2-D shape
//! `fan_in = shape[0]` and `fan_out = shape[1]`. This is the transpose of PyTorch's
//! `[out, in]` `nn.Linear` layout; the formulas are the same once the fans are swapped.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use tensorvault_core::AlignedBuf;

use crate::error::{RegistryError, Result};
use crate::weights::WeightTensor;

/// A user-supplied initializer: given a shape, return row-major values (`numel` of them).
pub type CustomInit = Arc<dyn Fn(&[usize]) -> Vec<f32> + Send + Sync>;

/// How one tensor gets its initial values.
#[derive(Clone)]
pub enum InitializationStrategy {
    /// Load from a checkpoint directory (handled by the registry, not by the initializer).
    Checkpoint {
        /// Checkpoint directory (relative paths are resolved against the registry root).
        path: PathBuf,
        /// Missing or extra tensors are errors when `true`.
        strict: bool,
    },
    /// Kaiming (He) uniform: `U(-b, b)`, `b = gain * sqrt(3 / fan)`.
    KaimingUniform {
        /// Which fan to use.
        mode: KaimingMode,
        /// Nonlinearity that sets the gain.
        nonlinearity: Nonlinearity,
    },
    /// Kaiming (He) normal: `N(0, std^2)`, `std = gain / sqrt(fan)`.
    KaimingNormal {
        /// Which fan to use.
        mode: KaimingMode,
        /// Nonlinearity that sets the gain.
        nonlinearity: Nonlinearity,
    },
    /// Xavier (Glorot) uniform, gain 1: `b = sqrt(6 / (fan_in + fan_out))`.
    XavierUniform,
    /// Xavier (Glorot) normal, gain 1: `std = sqrt(2 / (fan_in + fan_out))`.
    XavierNormal,
    /// (Semi-)orthogonal matrix from the QR decomposition of a Gaussian matrix, times `gain`.
    Orthogonal {
        /// Scale applied to the orthogonal matrix.
        gain: f32,
    },
    /// All zeros (biases).
    Zeros,
    /// All ones (e.g. the gating temperature).
    Ones,
    /// Custom function of the shape.
    Custom(CustomInit),
}

impl fmt::Debug for InitializationStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Checkpoint { path, strict } => f
                .debug_struct("Checkpoint")
                .field("path", path)
                .field("strict", strict)
                .finish(),
            Self::KaimingUniform { mode, nonlinearity } => f
                .debug_struct("KaimingUniform")
                .field("mode", mode)
                .field("nonlinearity", nonlinearity)
                .finish(),
            Self::KaimingNormal { mode, nonlinearity } => f
                .debug_struct("KaimingNormal")
                .field("mode", mode)
                .field("nonlinearity", nonlinearity)
                .finish(),
            Self::XavierUniform => f.write_str("XavierUniform"),
            Self::XavierNormal => f.write_str("XavierNormal"),
            Self::Orthogonal { gain } => f.debug_struct("Orthogonal").field("gain", gain).finish(),
            Self::Zeros => f.write_str("Zeros"),
            Self::Ones => f.write_str("Ones"),
            Self::Custom(_) => f.write_str("Custom(<fn>)"),
        }
    }
}

impl InitializationStrategy {
    /// Short name used in errors and logs.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Checkpoint { .. } => "checkpoint",
            Self::KaimingUniform { .. } => "kaiming-uniform",
            Self::KaimingNormal { .. } => "kaiming-normal",
            Self::XavierUniform => "xavier-uniform",
            Self::XavierNormal => "xavier-normal",
            Self::Orthogonal { .. } => "orthogonal",
            Self::Zeros => "zeros",
            Self::Ones => "ones",
            Self::Custom(_) => "custom",
        }
    }
}

/// Which fan Kaiming initialization normalizes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KaimingMode {
    /// Preserve the variance of activations in the forward pass (PyTorch's default).
    FanIn,
    /// Preserve the variance of gradients in the backward pass.
    FanOut,
    /// `(fan_in + fan_out) / 2` (not in PyTorch; computed in floating point).
    FanAvg,
}

/// Nonlinearity that follows the layer, for the gain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Nonlinearity {
    /// Identity: gain 1.
    Linear,
    /// ReLU: gain `sqrt(2)`.
    ReLU,
    /// Leaky ReLU with the given negative slope: gain `sqrt(2 / (1 + slope^2))`.
    LeakyReLU(f32),
    /// Tanh: gain `5/3` (PyTorch's value; the seed's 1.0 is not PyTorch's).
    Tanh,
    /// Sigmoid: gain 1.
    Sigmoid,
    /// GELU: gain `sqrt(2)`, see [`Nonlinearity::gain`].
    GELU,
    /// SiLU / Swish: gain `sqrt(2)`, see [`Nonlinearity::gain`].
    SiLU,
}

impl Nonlinearity {
    /// The gain of `torch.nn.init.calculate_gain`.
    ///
    /// PyTorch has no gain for GELU or SiLU (`calculate_gain("gelu")` raises). The seed
    /// suggests 1.0 as an "approximation"; we choose `sqrt(2)`, the ReLU gain, because both
    /// functions equal ReLU for large `|x|` and zero out (almost) half of a symmetric input,
    /// which is what the ReLU gain compensates for. A gain of 1 would shrink activations
    /// layer after layer in a deep GELU stack.
    #[must_use]
    pub fn gain(self) -> f64 {
        match self {
            Self::Linear | Self::Sigmoid => 1.0,
            Self::Tanh => 5.0 / 3.0,
            Self::ReLU | Self::GELU | Self::SiLU => std::f64::consts::SQRT_2,
            Self::LeakyReLU(slope) => {
                let s = f64::from(slope);
                (2.0 / (1.0 + s * s)).sqrt()
            }
        }
    }
}

/// `(fan_in, fan_out)` for a weight stored `[in, out, receptive...]`.
///
/// # Errors
/// [`RegistryError::FanUndefined`] for shapes with fewer than 2 dimensions (as PyTorch).
pub fn fans(shape: &[usize], strategy: &'static str) -> Result<(usize, usize)> {
    match shape {
        [fan_in, fan_out, rest @ ..] => {
            let receptive: usize = rest.iter().product();
            Ok((fan_in * receptive, fan_out * receptive))
        }
        _ => Err(RegistryError::FanUndefined {
            strategy,
            shape: shape.to_vec(),
        }),
    }
}

fn fan_for(mode: KaimingMode, fan_in: usize, fan_out: usize) -> f64 {
    match mode {
        KaimingMode::FanIn => fan_in as f64,
        KaimingMode::FanOut => fan_out as f64,
        KaimingMode::FanAvg => (fan_in as f64 + fan_out as f64) / 2.0,
    }
}

/// Fills `numel(shape)` values for `strategy` from `rng`.
///
/// # Errors
/// `Checkpoint` is [`RegistryError::Unsupported`]; shape and parameter problems are
/// [`RegistryError::FanUndefined`] / [`RegistryError::InvalidParameter`];
/// a `Custom` function returning the wrong count is [`RegistryError::LengthMismatch`].
pub fn sample(
    name: &str,
    shape: &[usize],
    strategy: &InitializationStrategy,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<f32>> {
    let numel: usize = shape.iter().product();
    let sname = strategy.name();
    match strategy {
        InitializationStrategy::Checkpoint { .. } => Err(RegistryError::Unsupported {
            what: "the Checkpoint strategy cannot initialize a single tensor; use the registry"
                .into(),
        }),
        InitializationStrategy::Zeros => Ok(vec![0.0; numel]),
        InitializationStrategy::Ones => Ok(vec![1.0; numel]),
        InitializationStrategy::KaimingUniform { .. } | InitializationStrategy::XavierUniform => {
            let mut out = vec![0f32; numel];
            uniform_fill(&mut out, uniform_bound(shape, strategy)?, sname, rng)?;
            Ok(out)
        }
        InitializationStrategy::KaimingNormal { mode, nonlinearity } => {
            let (fi, fo) = fans(shape, sname)?;
            let std = nonlinearity.gain() / fan_for(*mode, fi, fo).sqrt();
            Ok(normal(numel, std, rng))
        }
        InitializationStrategy::XavierNormal => {
            let (fi, fo) = fans(shape, sname)?;
            Ok(normal(numel, (2.0 / (fi + fo) as f64).sqrt(), rng))
        }
        InitializationStrategy::Orthogonal { gain } => orthogonal(shape, *gain, rng),
        InitializationStrategy::Custom(f) => {
            let v = f(shape);
            if v.len() == numel {
                Ok(v)
            } else {
                Err(RegistryError::LengthMismatch {
                    name: name.to_owned(),
                    shape: shape.to_vec(),
                    found: v.len(),
                })
            }
        }
    }
}

/// Like [`sample`], but returns the tensor itself, with owned storage from
/// [`AlignedBuf`] for the strategies that fill in place (uniform ones, zeros, ones): a large
/// buffer is then an anonymous map advised for transparent huge pages, so faulting in the
/// fresh memory costs one fault per 2 MiB instead of per 4 KiB (on this project's VMs the
/// 4 KiB faults were most of the initialization time). The values are identical to
/// [`sample`]'s.
///
/// # Errors
/// As [`sample`].
pub fn sample_tensor(
    name: &str,
    shape: &[usize],
    strategy: &InitializationStrategy,
    rng: &mut ChaCha8Rng,
) -> Result<WeightTensor> {
    let numel: usize = shape.iter().product();
    let buf = match strategy {
        InitializationStrategy::KaimingUniform { .. } | InitializationStrategy::XavierUniform => {
            let bound = uniform_bound(shape, strategy)?;
            let mut buf = AlignedBuf::<f32>::zeroed(numel);
            uniform_fill(&mut buf, bound, strategy.name(), rng)?;
            buf
        }
        InitializationStrategy::Zeros => AlignedBuf::zeroed(numel),
        InitializationStrategy::Ones => {
            let mut buf = AlignedBuf::<f32>::zeroed(numel);
            buf.fill(1.0);
            buf
        }
        _ => {
            let data = sample(name, shape, strategy, rng)?;
            let found = data.len();
            return WeightTensor::new(shape.to_vec(), data).ok_or_else(|| {
                RegistryError::LengthMismatch {
                    name: name.to_owned(),
                    shape: shape.to_vec(),
                    found,
                }
            });
        }
    };
    WeightTensor::from_aligned(shape.to_vec(), buf).ok_or_else(|| RegistryError::LengthMismatch {
        name: name.to_owned(),
        shape: shape.to_vec(),
        found: numel,
    })
}

/// The bound `b` of `U(-b, b)` for the uniform strategies (PyTorch's formulas).
fn uniform_bound(shape: &[usize], strategy: &InitializationStrategy) -> Result<f64> {
    let sname = strategy.name();
    match strategy {
        InitializationStrategy::KaimingUniform { mode, nonlinearity } => {
            let (fi, fo) = fans(shape, sname)?;
            let std = nonlinearity.gain() / fan_for(*mode, fi, fo).sqrt();
            Ok(3f64.sqrt() * std)
        }
        InitializationStrategy::XavierUniform => {
            let (fi, fo) = fans(shape, sname)?;
            Ok((6.0 / (fi + fo) as f64).sqrt())
        }
        _ => Err(RegistryError::Unsupported {
            what: format!("{sname} is not a uniform strategy"),
        }),
    }
}

/// Fills `out` with `U(-bound, bound)` draws keyed by `rng` (see below), in parallel.
fn uniform_fill(
    out: &mut [f32],
    bound: f64,
    strategy: &'static str,
    rng: &mut ChaCha8Rng,
) -> Result<()> {
    let b = bound as f32;
    if !(b.is_finite() && b > 0.0) {
        return Err(RegistryError::InvalidParameter {
            strategy,
            reason: format!("uniform bound {b} must be finite and positive"),
        });
    }
    // Counter-based: value i comes from SplitMix64(key + (i/2 + 1) * golden), keyed by the
    // first word of the tensor's own ChaCha stream (so seed and name still select it). Each
    // value depends only on its index, so large tensors fill in parallel and the result is
    // the same for any thread count, on every platform. The top 24 bits of each 32-bit half
    // give x in [0, 1) on a 2^-24 grid; value = -b + 2b * x, in [-b, b).
    let key = rng.next_u64();
    let (lo, width, top) = (-b, 2.0 * b, prev_f32(b));
    const BLOCK: usize = 1 << 16; // values per parallel task (even)
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(blk, chunk)| {
            let first_pair = (blk * BLOCK / 2) as u64;
            fill_uniform(chunk, key, first_pair, (lo, width, top));
        });
    Ok(())
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Fill `chunk` (values `2 * first_pair ..`) with the counter-based uniform draws; `range`
/// is `(lo, width, top)`. On x86-64 with AVX-512 DQ (64-bit vector multiplies) the same
/// safe code is compiled for it and picked at run time: results are identical (integer
/// math, then the same f32 operations).
fn fill_uniform(chunk: &mut [f32], key: u64, first_pair: u64, range: (f32, f32, f32)) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
    {
        // SAFETY: AVX-512F and AVX-512DQ support were checked at run time just above.
        return unsafe { fill_uniform_avx512(chunk, key, first_pair, range) };
    }
    fill_uniform_body(chunk, key, first_pair, range);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn fill_uniform_avx512(chunk: &mut [f32], key: u64, first_pair: u64, range: (f32, f32, f32)) {
    fill_uniform_body(chunk, key, first_pair, range);
}

#[inline(always)]
fn fill_uniform_body(chunk: &mut [f32], key: u64, first_pair: u64, range: (f32, f32, f32)) {
    const UNIT: f32 = 1.0 / (1u32 << 24) as f32;
    let (lo, width, top) = range;
    let value = |bits24: u32| (lo + width * (bits24 as f32 * UNIT)).min(top);
    let mut pairs = chunk.chunks_exact_mut(2);
    let mut j = 0u64;
    for pair in &mut pairs {
        let z = splitmix64(key.wrapping_add((first_pair + j + 1).wrapping_mul(GOLDEN)));
        pair[0] = value((z >> 40) as u32);
        pair[1] = value((z as u32) >> 8);
        j += 1;
    }
    if let [v] = pairs.into_remainder() {
        let z = splitmix64(key.wrapping_add((first_pair + j + 1).wrapping_mul(GOLDEN)));
        *v = value((z >> 40) as u32);
    }
}

/// SplitMix64's output function (Steele, Lea, Flood 2014).
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The largest f32 below a positive `b` (`f32::next_down` needs Rust 1.86).
fn prev_f32(b: f32) -> f32 {
    f32::from_bits(b.to_bits() - 1)
}

fn normal(numel: usize, std: f64, rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..numel)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            (z * std) as f32
        })
        .collect()
}

/// PyTorch's `orthogonal_`: QR of a Gaussian `rows x cols` matrix (transposed when
/// `rows < cols`), Q's columns multiplied by `sign(diag(R))` so the result is uniformly
/// distributed (Haar), transposed back, times `gain`. `rows = shape[0]`,
/// `cols = numel / rows`. Computed in f64 with nalgebra, stored as f32.
fn orthogonal(shape: &[usize], gain: f32, rng: &mut ChaCha8Rng) -> Result<Vec<f32>> {
    let (rows, _) = fans(shape, "orthogonal")?;
    let numel: usize = shape.iter().product();
    if numel == 0 {
        return Ok(Vec::new());
    }
    let cols = numel / rows;
    let (m, n) = if rows < cols {
        (cols, rows)
    } else {
        (rows, cols)
    };
    // Column-major m x n with m >= n, filled in draw order.
    let flat = nalgebra::DMatrix::<f64>::from_fn(m, n, |_, _| StandardNormal.sample(&mut *rng));
    let qr = flat.qr();
    let mut q = qr.q(); // m x n (thin)
    let r = qr.r();
    for j in 0..n {
        // sign(0) is 0 in PyTorch (a measure-zero event); we keep the column instead.
        if r[(j, j)] < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    let g = f64::from(gain);
    let mut out = Vec::with_capacity(numel);
    // Row-major output of shape rows x cols. When transposed, element (i, j) is q[(j, i)].
    for i in 0..rows {
        for j in 0..cols {
            let v = if rows < cols { q[(j, i)] } else { q[(i, j)] };
            out.push((v * g) as f32);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod fill_tests {
    use super::*;

    #[test]
    fn dispatched_fill_equals_the_portable_body_bit_for_bit() {
        for len in [0usize, 1, 2, 3, 1001, 65_536] {
            let mut fast = vec![0f32; len];
            let mut portable = vec![0f32; len];
            let range = (-0.5f32, 1.0f32, prev_f32(0.5));
            fill_uniform(&mut fast, 0x1234_5678_9abc_def0, 77, range);
            fill_uniform_body(&mut portable, 0x1234_5678_9abc_def0, 77, range);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&portable), "len {len}");
            assert!(fast.iter().all(|&x| (-0.5..0.5).contains(&x)));
        }
    }

    #[test]
    fn sample_tensor_equals_sample_bit_for_bit() {
        use rand::SeedableRng;
        let kaiming = InitializationStrategy::KaimingUniform {
            mode: KaimingMode::FanIn,
            nonlinearity: Nonlinearity::ReLU,
        };
        // [1100, 1024] f32 is 4.5 MB: above AlignedBuf's huge-page (anonymous map) threshold.
        let cases: [(&InitializationStrategy, &[usize]); 7] = [
            (&kaiming, &[1100, 1024]),
            (&kaiming, &[7, 3]),
            (&InitializationStrategy::XavierUniform, &[1100, 1024]),
            (&InitializationStrategy::Zeros, &[1100, 1024]),
            (&InitializationStrategy::Ones, &[5]),
            (&InitializationStrategy::Ones, &[]),
            (&InitializationStrategy::XavierNormal, &[9, 4]),
        ];
        for (strategy, shape) in cases {
            let vec = sample("t", shape, strategy, &mut ChaCha8Rng::seed_from_u64(9)).unwrap();
            let t = sample_tensor("t", shape, strategy, &mut ChaCha8Rng::seed_from_u64(9)).unwrap();
            assert_eq!(t.shape(), shape);
            assert!(!t.is_mapped());
            assert_eq!(t.data().len(), shape.iter().product::<usize>());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(t.data()), bits(&vec), "{} {shape:?}", strategy.name());
            assert_eq!(t.data().as_ptr() as usize % 4, 0);
        }
        // Uniform values really are drawn (not left zero) in the mapped buffer.
        let t = sample_tensor(
            "t",
            &[1100, 1024],
            &kaiming,
            &mut ChaCha8Rng::seed_from_u64(1),
        )
        .unwrap();
        assert!(t.data().iter().filter(|&&v| v == 0.0).count() < 100);
        let b = (6.0f32 / 1100.0).sqrt();
        assert!(t.data().iter().all(|v| v.abs() <= b));
        // Errors are the same as `sample`'s.
        assert!(matches!(
            sample_tensor("t", &[4], &kaiming, &mut ChaCha8Rng::seed_from_u64(1)),
            Err(RegistryError::FanUndefined { .. })
        ));
    }
}
