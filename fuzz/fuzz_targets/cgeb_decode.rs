//! Fuzz CGEB record decoding: arbitrary bytes must never panic or allocate without
//! bound; when a record decodes, the zero-copy view and the owned decode agree.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::cgeb::EmbeddingBinaryCodec;

fuzz_target!(|data: &[u8]| {
    let codec = EmbeddingBinaryCodec::new().with_max_aux_decompressed(1 << 20);
    let _ = codec.decode_header(data);
    let unchecked = codec.with_verify_hash(false);
    if let Ok(view) = unchecked.decode_zero_copy(data) {
        assert_eq!(view.vector().len(), view.header().dimension.get() as usize);
        assert!(view.record_len() <= data.len());
        if let Ok(mut owned) = unchecked.decode(data) {
            // An aux payload that decompresses to nothing is not re-stored by the encoder.
            if owned.aux_data.as_ref().is_some_and(Vec::is_empty) {
                owned.aux_data = None;
            }
            let bits: Vec<u32> = view.vector().iter().map(f32::to_bits).collect();
            assert_eq!(
                bits,
                owned.vector.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            // Re-encoding gives a record that decodes to the same content.
            let c = EmbeddingBinaryCodec::with_aux_data(Some(view.aux_compression()))
                .with_le_payload(view.header().le_payload());
            let again = c.encode(&owned).expect("a decoded record re-encodes");
            assert!(codec
                .decode(&again)
                .expect("re-encoded record decodes")
                .same_content(&owned));
        }
    }
    let _ = codec.decode(data);
});
