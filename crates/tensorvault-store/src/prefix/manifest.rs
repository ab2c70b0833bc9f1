//! The model manifest of a prefix-cache collection (`prefix.model` in the collection
//! directory): which model the collection's chunks belong to and their geometry. Every
//! byte offset is a named constant here; the spec is docs/formats/store.md, "Prefix
//! cache".

use tensorvault_core::checksum::crc32c;

use crate::error::{Result, StoreErr};

/// File name of the manifest inside the collection directory.
pub const MANIFEST_FILE: &str = "prefix.model";
/// Magic: PNG-style, catches text-mode damage.
pub const MAGIC: [u8; 8] = *b"TVPFX\x1a\n\0";
/// The one format version.
pub const VERSION: u16 = 1;
/// Longest model identity accepted (bytes of UTF-8).
pub const MAX_MODEL_LEN: usize = 4096;

/// Offset of the magic.
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the u16 version.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
/// Offset of the u16 reserved field (0).
pub const RESERVED_OFFSET: usize = VERSION_OFFSET + 2;
/// Offset of the u32 layer count.
pub const LAYERS_OFFSET: usize = RESERVED_OFFSET + 2;
/// Offset of the u32 KV head count.
pub const KV_HEADS_OFFSET: usize = LAYERS_OFFSET + 4;
/// Offset of the u32 head dimension.
pub const HEAD_DIM_OFFSET: usize = KV_HEADS_OFFSET + 4;
/// Offset of the u32 chunk size in tokens.
pub const CHUNK_TOKENS_OFFSET: usize = HEAD_DIM_OFFSET + 4;
/// Offset of the u32 byte length of the model identity.
pub const MODEL_LEN_OFFSET: usize = CHUNK_TOKENS_OFFSET + 4;
/// Offset of the model identity (UTF-8); the u32 CRC32C of every earlier byte follows it.
pub const MODEL_OFFSET: usize = MODEL_LEN_OFFSET + 4;

/// A model's identity and KV geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelManifest {
    /// The model identity string (two models never share chunks).
    pub model: String,
    /// Transformer layers.
    pub layers: u32,
    /// KV heads per layer.
    pub kv_heads: u32,
    /// Values per head and token.
    pub head_dim: u32,
    /// Tokens per chunk.
    pub chunk_tokens: u32,
}

fn bad(field: &'static str, offset: usize, reason: String) -> StoreErr {
    StoreErr::BadHeader {
        file: MANIFEST_FILE.to_owned(),
        field,
        offset: offset as u64,
        reason,
    }
}

fn u32_at(b: &[u8], off: usize, field: &'static str) -> Result<u32> {
    let Some(s) = b.get(off..off + 4) else {
        return Err(bad(
            field,
            off,
            format!("truncated: file is {} bytes", b.len()),
        ));
    };
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

impl ModelManifest {
    /// The manifest's bytes.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if the model identity is empty or longer than
    /// [`MAX_MODEL_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        let n = self.model.len();
        if n == 0 || n > MAX_MODEL_LEN {
            return Err(StoreErr::InvalidArgument {
                field: "model",
                reason: format!("{n} bytes; a model identity is 1..={MAX_MODEL_LEN} bytes"),
            });
        }
        let mut b = Vec::with_capacity(MODEL_OFFSET + n + 4);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        for v in [self.layers, self.kv_heads, self.head_dim, self.chunk_tokens] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(self.model.as_bytes());
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        Ok(b)
    }

    /// Parse and check a manifest.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] naming the field and offset: truncation, bad magic, an
    /// unknown version, a non-zero reserved field, a model length over [`MAX_MODEL_LEN`]
    /// or past the end, a model that is not UTF-8, a zero geometry field, a checksum
    /// mismatch (field `crc32c`) or trailing bytes.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let Some(magic) = b.get(MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()) else {
            return Err(bad(
                "magic",
                0,
                format!("truncated: file is {} bytes", b.len()),
            ));
        };
        if magic != MAGIC {
            return Err(bad("magic", 0, "not a prefix-cache model manifest".into()));
        }
        let Some(&[v0, v1, r0, r1]) = b.get(VERSION_OFFSET..VERSION_OFFSET + 4) else {
            return Err(bad("version", VERSION_OFFSET, "truncated".into()));
        };
        let version = u16::from_le_bytes([v0, v1]);
        if version != VERSION {
            return Err(bad(
                "version",
                VERSION_OFFSET,
                format!("version {version}, this build reads {VERSION}"),
            ));
        }
        if u16::from_le_bytes([r0, r1]) != 0 {
            return Err(bad("reserved", RESERVED_OFFSET, "must be 0".into()));
        }
        let layers = u32_at(b, LAYERS_OFFSET, "layers")?;
        let kv_heads = u32_at(b, KV_HEADS_OFFSET, "kv_heads")?;
        let head_dim = u32_at(b, HEAD_DIM_OFFSET, "head_dim")?;
        let chunk_tokens = u32_at(b, CHUNK_TOKENS_OFFSET, "chunk_tokens")?;
        let model_len = u32_at(b, MODEL_LEN_OFFSET, "model_len")? as usize;
        // The length is checked against the limit and the bytes present before use.
        if model_len == 0 || model_len > MAX_MODEL_LEN {
            return Err(bad(
                "model_len",
                MODEL_LEN_OFFSET,
                format!("{model_len}; must be 1..={MAX_MODEL_LEN}"),
            ));
        }
        let crc_off = MODEL_OFFSET + model_len;
        let crc = u32_at(b, crc_off, "crc32c")?;
        let actual = crc32c(&b[..crc_off]);
        if crc != actual {
            return Err(bad(
                crate::error::HEADER_CRC_FIELD,
                crc_off,
                format!("stored {crc:#010x}, computed {actual:#010x}"),
            ));
        }
        if b.len() != crc_off + 4 {
            return Err(bad(
                "crc32c",
                crc_off + 4,
                format!("{} trailing bytes", b.len() - crc_off - 4),
            ));
        }
        let Ok(model) = std::str::from_utf8(&b[MODEL_OFFSET..crc_off]) else {
            return Err(bad("model", MODEL_OFFSET, "not UTF-8".into()));
        };
        for (field, off, v) in [
            ("layers", LAYERS_OFFSET, layers),
            ("kv_heads", KV_HEADS_OFFSET, kv_heads),
            ("head_dim", HEAD_DIM_OFFSET, head_dim),
            ("chunk_tokens", CHUNK_TOKENS_OFFSET, chunk_tokens),
        ] {
            if v == 0 {
                return Err(bad(field, off, "must not be 0".into()));
            }
        }
        Ok(Self {
            model: model.to_owned(),
            layers,
            kv_heads,
            head_dim,
            chunk_tokens,
        })
    }
}

impl ModelManifest {
    /// Read `prefix.model` of the collection directory `dir` if present (`None` if not),
    /// refusing a file that is not a regular file or is larger than any valid manifest
    /// before reading it.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; [`StoreErr::NotRegularFile`]; [`StoreErr::BadHeader`] (field
    /// `length` for an over-long file, else as [`ModelManifest::decode`]).
    pub fn read(dir: &std::path::Path) -> Result<Option<Self>> {
        use std::io::Read;
        let path = dir.join(MANIFEST_FILE);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreErr::io("stat", &path, e)),
        }
        let file = StoreErr::open_regular("open", &path, std::fs::OpenOptions::new().read(true))?;
        let max = (MODEL_OFFSET + MAX_MODEL_LEN + 4) as u64;
        let mut bytes = Vec::new();
        (&file)
            .take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| StoreErr::io("read", &path, e))?;
        if bytes.len() as u64 > max {
            return Err(bad(
                "length",
                0,
                format!("over {max} bytes, a manifest has at most {max}"),
            ));
        }
        Self::decode(&bytes).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ModelManifest {
        ModelManifest {
            model: "SmolLM2-135M".into(),
            layers: 30,
            kv_heads: 3,
            head_dim: 64,
            chunk_tokens: 256,
        }
    }

    fn field_of(e: StoreErr) -> (&'static str, u64) {
        match e {
            StoreErr::BadHeader { field, offset, .. } => (field, offset),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn round_trip_and_exact_length() {
        let b = sample().encode().unwrap();
        assert_eq!(b.len(), MODEL_OFFSET + 12 + 4);
        assert_eq!(&b[..8], &MAGIC);
        assert_eq!(ModelManifest::decode(&b).unwrap(), sample());
    }

    #[test]
    fn every_kind_of_damage_names_its_field() {
        let good = sample().encode().unwrap();
        let crc_off = good.len() - 4;
        assert_eq!(
            field_of(ModelManifest::decode(&good[..5]).unwrap_err()).0,
            "magic"
        );
        let mut m = good.clone();
        m[0] = b'X';
        assert_eq!(
            field_of(ModelManifest::decode(&m).unwrap_err()),
            ("magic", 0)
        );
        let mut v = good.clone();
        v[VERSION_OFFSET] = 2;
        assert_eq!(
            field_of(ModelManifest::decode(&v).unwrap_err()),
            ("version", 8)
        );
        let mut r = good.clone();
        r[RESERVED_OFFSET] = 1;
        assert_eq!(
            field_of(ModelManifest::decode(&r).unwrap_err()).0,
            "reserved"
        );
        let mut big = good.clone();
        big[MODEL_LEN_OFFSET..MODEL_LEN_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            field_of(ModelManifest::decode(&big).unwrap_err()),
            ("model_len", MODEL_LEN_OFFSET as u64)
        );
        assert_eq!(
            field_of(ModelManifest::decode(&good[..crc_off + 2]).unwrap_err()),
            ("crc32c", crc_off as u64)
        );
        let mut flip = good.clone();
        flip[LAYERS_OFFSET] ^= 1;
        assert_eq!(
            field_of(ModelManifest::decode(&flip).unwrap_err()),
            (crate::error::HEADER_CRC_FIELD, crc_off as u64)
        );
        let mut trail = good.clone();
        trail.push(0);
        assert_eq!(
            field_of(ModelManifest::decode(&trail).unwrap_err()),
            ("crc32c", good.len() as u64)
        );
        // Zero geometry and non-UTF-8 models, validly sealed.
        let reseal = |mut b: Vec<u8>| {
            let n = b.len() - 4;
            let c = crc32c(&b[..n]);
            b[n..].copy_from_slice(&c.to_le_bytes());
            b
        };
        let mut z = good.clone();
        z[HEAD_DIM_OFFSET..HEAD_DIM_OFFSET + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            field_of(ModelManifest::decode(&reseal(z)).unwrap_err()).0,
            "head_dim"
        );
        let mut u = good.clone();
        u[MODEL_OFFSET] = 0xff;
        assert_eq!(
            field_of(ModelManifest::decode(&reseal(u)).unwrap_err()).0,
            "model"
        );
        assert!(ModelManifest {
            model: String::new(),
            ..sample()
        }
        .encode()
        .is_err());
    }
}
