//! Version metadata and version-string validation.

use serde::{Deserialize, Serialize};

use crate::error::{RegistryError, Result};

/// Metadata of one weights version (stored in `metadata.json` and `registry.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightVersion {
    /// Semantic version, e.g. `1.2.3` or `0.0.0-init`.
    pub version: String,
    /// Git commit, training run id, or `zero-shot-seed-{seed}`.
    pub source_id: String,
    /// Creation time, RFC 3339 UTC (`2026-01-02T03:04:05Z`).
    pub created_at: String,
    /// `sha256:<hex>` of `weights.safetensors`, or `none` for never-saved weights.
    pub checksum: String,
    /// Training metrics at checkpoint time.
    pub metrics: Option<TrainingMetrics>,
}

/// Training metrics at checkpoint time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingMetrics {
    /// Epoch.
    pub epoch: usize,
    /// Training loss.
    pub loss: f64,
    /// Validation loss.
    pub validation_loss: Option<f64>,
    /// Learning rate.
    pub learning_rate: f64,
    /// Any other metrics (`registry save --metric KEY=VALUE`), stored next to the fields
    /// above in the same JSON object.
    #[serde(flatten, default)]
    pub extra: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Checks that `version` is semver and safe to use as a directory name.
///
/// Semver's grammar already excludes `/`, `\` and empty identifiers (so `..`); the explicit
/// character check below keeps that true even if the parser were ever relaxed.
///
/// # Errors
/// [`RegistryError::InvalidVersion`] naming the reason.
pub fn validate_version(version: &str) -> Result<semver::Version> {
    let bad = |reason: &str| RegistryError::InvalidVersion {
        version: version.to_owned(),
        reason: reason.to_owned(),
    };
    if version.is_empty() || version.len() > 128 {
        return Err(bad("length must be 1..=128"));
    }
    if !version
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
        || version.starts_with('.')
        || version.contains("..")
    {
        return Err(bad("only [0-9A-Za-z.+-] allowed, no leading '.' or '..'"));
    }
    semver::Version::parse(version).map_err(|e| bad(&format!("not semver: {e}")))
}

/// Current UTC time as RFC 3339 with second precision.
#[must_use]
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Formats Unix seconds as RFC 3339 UTC (proleptic Gregorian, Howard Hinnant's algorithm).
#[must_use]
pub fn rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_path_tricks() {
        for v in [
            "../../etc",
            "..",
            "1.0.0/../x",
            "1.0.0\\x",
            "",
            "/etc",
            ".1.0.0",
            "1.0",
        ] {
            assert!(
                matches!(
                    validate_version(v),
                    Err(RegistryError::InvalidVersion { .. })
                ),
                "{v}"
            );
        }
        for v in ["0.0.0-init", "1.2.3", "1.2.3-rc.1+build.5"] {
            assert!(validate_version(v).is_ok(), "{v}");
        }
    }

    #[test]
    fn formats_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
