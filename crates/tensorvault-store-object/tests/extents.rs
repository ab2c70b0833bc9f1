//! An extent-allocated collection (MetaLog flags bit 1) on the object store: the
//! `objects` layout stores each block as its own payload-sized object and so accepts
//! payloads up to the tier's cap; `packs` keeps its fixed slot stride, where the cap is
//! the worst-case slot.

// The shared helpers the conformance suite uses are not all needed here.
#[allow(unused_imports)]
mod blockio_common;

use tensorvault_store::{BlockKey, CollectionConfig, StoreErr, Tier};

#[test]
fn objects_take_the_cap_and_packs_the_slot() {
    let geo = CollectionConfig {
        extents: true,
        ..CollectionConfig::default()
    };
    let t = Tier::Tier2;
    let (slot, cap) = (geo.slot_len(t) as usize, geo.max_block_len(t) as usize);
    assert!(cap > slot);
    for b in blockio_common::backends_with(geo) {
        let io = b.io.as_ref();
        let big = vec![9u8; slot + 100];
        let r = io.write_block(t, BlockKey::new(1, 0), &big);
        if b.name.ends_with("objects") {
            assert_eq!(io.max_block_len(t) as usize, cap, "{}", b.name);
            let (off, len) = r.unwrap();
            assert_eq!(off % u64::from(geo.slot_align), 0, "aligned");
            let mut out = vec![0; big.len()];
            io.read_block(t, BlockKey::new(1, 0), off, len, &mut out)
                .unwrap();
            assert_eq!(out, big);
            assert!(matches!(
                io.write_block(t, BlockKey::new(1, 1), &vec![0; cap + 1]),
                Err(StoreErr::CapacityExceeded { .. })
            ));
        } else {
            assert_eq!(io.max_block_len(t) as usize, slot, "{}", b.name);
            assert!(
                matches!(r, Err(StoreErr::CapacityExceeded { .. })),
                "{}: {r:?}",
                b.name
            );
        }
    }
}
