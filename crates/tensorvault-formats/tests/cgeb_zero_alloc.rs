//! Proof that `decode_zero_copy` and `BatchReader::get` allocate nothing: this test binary
//! installs a global allocator that counts allocations on the current thread.

mod cgeb_util;
use cgeb_util::*;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader, CompressionType, EmbeddingBinaryCodec,
};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counter is a const-initialised thread-local without a destructor (no allocation, no
// re-entrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract; forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as for `alloc`; `ptr` and `layout` come from this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}

#[test]
fn zero_copy_decode_allocates_nothing() {
    let mut e = seed_embedding(9);
    e.aux_data = Some(colbert_aux(9));
    for (codec, le) in [
        (EmbeddingBinaryCodec::new(), false),
        (
            EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Zstd)),
            false,
        ),
        (
            EmbeddingBinaryCodec::with_aux_data(Some(CompressionType::Lz4)),
            true,
        ),
    ] {
        let bytes = codec.with_le_payload(le).encode(&e).unwrap();
        for verify in [true, false] {
            let c = codec.with_verify_hash(verify);
            let (sum, n) = allocations(|| {
                let r = c.decode_zero_copy(&bytes).unwrap();
                let h = c.decode_header(&bytes).unwrap();
                r.vector().iter().sum::<f32>()
                    + r.expert_weights().get(0).unwrap()
                    + h.top_k as f32
                    + r.aux_data_stored().map_or(0, <[u8]>::len) as f32
            });
            assert_eq!(
                n, 0,
                "decode_zero_copy allocated (verify={verify}, le={le})"
            );
            assert!(sum.is_finite());
        }
    }
    // Sanity check of the counter itself.
    let (_, n) = allocations(|| {
        EmbeddingBinaryCodec::new()
            .decode(&EmbeddingBinaryCodec::new().encode(&e).unwrap())
            .unwrap()
    });
    assert!(n >= 3);
}

#[test]
fn batch_get_allocates_nothing() {
    let mut enc = BatchBinaryEncoder::with_capacity(50);
    for i in 0..50 {
        enc.push(&embedding(i, 384, 8, 2)).unwrap();
    }
    let index = enc.index().to_bytes();
    let r = BatchReader::from_bytes(enc.finalize().0, &index, Default::default()).unwrap();
    let (total, n) = allocations(|| {
        let mut t = 0f32;
        for i in (0..50).rev() {
            t += r.get(i).unwrap().vector().get(1).unwrap();
        }
        for rec in r.iter() {
            t += rec.unwrap().expert_weights().get(0).unwrap();
        }
        t
    });
    assert_eq!(n, 0, "BatchReader::get / iter allocated");
    assert!(total.is_finite());
}
