//! The manifest object (`<collection>/manifest`): which snapshot, segments and names
//! object make up the collection's MetaLog, and the high-water mark of block slot numbers
//! per tier. JSON body + the object trailer; replaced only by conditional puts (If-Match
//! on the ETag read), so two writers cannot both commit on top of the same state.

use serde::{Deserialize, Serialize};

use crate::error::{OResult, ObjectErr};
use crate::frame;

/// Manifest format version.
pub const MANIFEST_FORMAT: u32 = 1;
/// Most segments a manifest may list (a writer merges them long before).
pub const MAX_MANIFEST_SEGMENTS: usize = 100_000;

/// How block payloads are packaged into objects (fixed at creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One object per block: `blocks/t<tier>/<slot:012x>`.
    #[default]
    Objects,
    /// [`PACK_SLOTS`] consecutive slots per object: `packs/t<tier>/<pack:010x>`, entry
    /// `i` at byte `i * (slot_len + 16)`; a pack is written once (when full, or at the
    /// sync that ends a write batch) and deleted when its last live block is freed.
    Packs,
}

/// Slots per pack object in [`Layout::Packs`].
pub const PACK_SLOTS: u64 = 256;

/// A referenced object: key relative to the collection directory, and its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjRef {
    /// Key relative to `<prefix>/<tenant>/<collection>/`.
    pub key: String,
    /// Object size in bytes (body + trailer).
    pub bytes: u64,
}

/// The manifest's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: u32,
    /// Random id of this collection's creation (keys the local block cache, so a
    /// collection deleted and created again never hits stale cache entries).
    pub incarnation: u64,
    /// Incremented by every commit.
    pub commit: u64,
    /// Session id of the writer that made this commit.
    pub writer: u64,
    /// The MetaLog snapshot: a whole `meta.log` image (header + records).
    pub snapshot: ObjRef,
    /// Sealed segments after the snapshot, in log order: 128-byte records only.
    pub segments: Vec<ObjRef>,
    /// The name catalog (a `names.log` image), if any name was recorded.
    pub names: Option<ObjRef>,
    /// Per tier, the first slot number never handed out: block objects are named by
    /// slot number and a number is never reused, so every block object is immutable.
    pub next_slot: [u64; 4],
    /// How blocks are packaged (absent: [`Layout::Objects`]).
    #[serde(default)]
    pub layout: Layout,
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 256
        && k.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

impl Manifest {
    /// Encode (JSON + trailer).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        frame::seal(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decode and validate the bytes of the manifest object at `path`.
    ///
    /// # Errors
    /// [`ObjectErr::Checksum`] / [`ObjectErr::Malformed`].
    pub fn decode(bytes: &[u8], path: &str) -> OResult<Self> {
        let body = frame::open(bytes, path)?;
        let bad = |reason: String| ObjectErr::Malformed {
            path: path.to_owned(),
            reason,
        };
        let m: Manifest =
            serde_json::from_slice(body).map_err(|e| bad(format!("manifest JSON: {e}")))?;
        if m.format != MANIFEST_FORMAT {
            return Err(bad(format!(
                "manifest format {} (this reader knows {MANIFEST_FORMAT})",
                m.format
            )));
        }
        if m.segments.len() > MAX_MANIFEST_SEGMENTS {
            return Err(bad(format!("{} segments listed", m.segments.len())));
        }
        let refs = std::iter::once(&m.snapshot)
            .chain(&m.segments)
            .chain(m.names.as_ref());
        for r in refs {
            if !valid_key(&r.key) {
                return Err(bad(format!("invalid object key {:?}", r.key)));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            incarnation: 7,
            commit: 3,
            writer: 9,
            snapshot: ObjRef {
                key: "log/snap-1".into(),
                bytes: 144,
            },
            segments: vec![ObjRef {
                key: "log/seg-1".into(),
                bytes: 272,
            }],
            names: None,
            next_slot: [0, 256, 0, 0],
            layout: Layout::Packs,
        }
    }

    #[test]
    fn round_trip_and_validation() {
        let m = sample();
        assert_eq!(Manifest::decode(&m.encode(), "x").unwrap(), m);
        let mut bad = m.clone();
        bad.segments[0].key = "../escape".into();
        assert!(matches!(
            Manifest::decode(&bad.encode(), "x"),
            Err(ObjectErr::Malformed { .. })
        ));
        let mut v2 = m.clone();
        v2.format = 2;
        assert!(Manifest::decode(&v2.encode(), "x").is_err());
        let mut flip = m.encode();
        flip[5] ^= 1;
        assert!(matches!(
            Manifest::decode(&flip, "x"),
            Err(ObjectErr::Checksum { .. })
        ));
        assert!(matches!(
            Manifest::decode(&frame::seal(b"{not json".to_vec()), "x"),
            Err(ObjectErr::Malformed { .. })
        ));
    }
}
