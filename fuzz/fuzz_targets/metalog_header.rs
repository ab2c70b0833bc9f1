//! Fuzz the MetaLog header decoder (geometry, codec 4 key widths, the RoPE spec): any
//! 128 bytes, with the CRC fixed up so the field checks behind it are reached, must
//! decode or be refused without panicking; what decodes re-encodes to the same bytes, and
//! a decoded flags bit 4 (`kv_ecsq_tier2`) always comes with its prerequisites (bit 2,
//! bit 0, codec 4), bit 6 (`row_gains`) with codec 4, flags2 bit 0 (`kv_keys_ecsq`, byte
//! 78) with codec 4 and bit 0.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::layout::{CRC_OFFSET, PAD_OFFSET, RECORD_LEN};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{CODEC_V1, CODEC_V4};

fuzz_target!(|data: &[u8]| {
    let mut h = [0u8; RECORD_LEN];
    let n = data.len().min(RECORD_LEN);
    h[..n].copy_from_slice(&data[..n]);
    // Magic, version and record length as a real header has them, then a valid CRC.
    h[..8].copy_from_slice(b"TVMETLOG");
    h[8..12].copy_from_slice(&2u32.to_le_bytes());
    h[12..16].copy_from_slice(&(RECORD_LEN as u32).to_le_bytes());
    h[PAD_OFFSET..].fill(0);
    let crc = crc32c(&h[..CRC_OFFSET]);
    h[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
    if let Ok((c, generation)) = decode_header(&h) {
        if c.kv_ecsq_tier2 {
            assert!(c.kv_ecsq && c.entropy && c.codec == CODEC_V4);
        }
        if c.row_gains {
            assert_eq!(c.codec, CODEC_V4);
        }
        if c.kv_keys_ecsq {
            assert!(c.entropy && c.codec == CODEC_V4);
        }
        // A version 2 header naming codec 1 decodes, and re-encodes as the version 1
        // header codec 1 collections keep; every other header round-trips exactly.
        if c.codec != CODEC_V1 {
            assert_eq!(encode_header(&c, generation), h);
        }
    }
    let _ = decode_header(data);
});
