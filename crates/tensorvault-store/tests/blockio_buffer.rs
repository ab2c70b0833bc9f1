//! `BufferBlockIO` specifics: the host persistence hook and restoring from what it got.

mod blockio_common;

use std::sync::{Arc, Mutex};

use blockio_common::{key, payload, read};
use tensorvault_store::block_io::PersistHook;
use tensorvault_store::{BlockIO, BufferBlockIO, CollectionConfig, StoreErr, Tier};

/// Records every persist call; fails while `fail` is set.
#[derive(Default)]
struct Host {
    calls: Mutex<Vec<(Tier, Vec<u8>)>>,
    fail: Mutex<bool>,
}

struct HookRef(Arc<Host>);

impl PersistHook for HookRef {
    fn persist(&self, tier: Tier, data: &[u8]) -> std::io::Result<()> {
        if *self.0.fail.lock().unwrap() {
            return Err(std::io::Error::other("quota exceeded"));
        }
        self.0.calls.lock().unwrap().push((tier, data.to_vec()));
        Ok(())
    }
}

fn take_calls(host: &Host) -> Vec<(Tier, Vec<u8>)> {
    std::mem::take(&mut *host.calls.lock().unwrap())
}

#[test]
fn hook_gets_each_dirty_tier_whole_on_sync() {
    let g = CollectionConfig::default();
    let host = Arc::new(Host::default());
    let io = BufferBlockIO::new(&g).with_hook(Box::new(HookRef(host.clone())));
    let s1 = g.slot_len(Tier::Tier1) as usize;
    let s3 = g.slot_len(Tier::Tier3) as usize;
    io.write_block(Tier::Tier1, key(0), &payload(1, 100))
        .unwrap();
    io.write_block(Tier::Tier1, key(1), &payload(2, s1))
        .unwrap();
    io.write_block(Tier::Tier3, key(2), &payload(3, 7)).unwrap();
    assert!(
        take_calls(&host).is_empty(),
        "nothing persisted before sync"
    );
    io.sync().unwrap();
    let calls = take_calls(&host);
    assert_eq!(
        calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec![Tier::Tier1, Tier::Tier3]
    );
    let (_, t1) = &calls[0];
    assert_eq!(t1.len(), 2 * s1);
    assert_eq!(&t1[..100], &payload(1, 100)[..]);
    assert_eq!(&t1[s1..], &payload(2, s1)[..]);
    assert_eq!(calls[1].1.len(), s3);
    assert_eq!(&calls[1].1[..7], &payload(3, 7)[..]);
    io.with_tier_data(Tier::Tier1, |d| assert_eq!(d, &t1[..]));

    // Nothing written since: no calls. A free changes no bytes: no calls either.
    io.sync().unwrap();
    io.free_block(Tier::Tier1, 0).unwrap();
    io.sync().unwrap();
    assert!(take_calls(&host).is_empty());

    // A rewrite dirties only its tier.
    io.rewrite_block(Tier::Tier3, 0, &[42]).unwrap();
    io.sync().unwrap();
    let calls = take_calls(&host);
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].0, calls[0].1[0]), (Tier::Tier3, 42));
}

#[test]
fn failed_persist_is_an_io_error_and_retried() {
    let g = CollectionConfig::default();
    let host = Arc::new(Host::default());
    let io = BufferBlockIO::new(&g).with_hook(Box::new(HookRef(host.clone())));
    io.write_block(Tier::Tier0, key(0), &payload(1, 10))
        .unwrap();
    *host.fail.lock().unwrap() = true;
    match io.sync() {
        Err(StoreErr::Io { op, path, source }) => {
            assert_eq!(op, "persist");
            assert_eq!(path, std::path::Path::new("tier0.dat"));
            assert_eq!(source.to_string(), "quota exceeded");
        }
        other => panic!("expected Io, got {other:?}"),
    }
    *host.fail.lock().unwrap() = false;
    io.sync().unwrap();
    let calls = take_calls(&host);
    assert_eq!(calls.len(), 1, "the tier stayed dirty");
    assert_eq!(&calls[0].1[..10], &payload(1, 10)[..]);
}

#[test]
fn restore_from_persisted_tiers() {
    let g = CollectionConfig::default();
    let host = Arc::new(Host::default());
    let io = BufferBlockIO::new(&g).with_hook(Box::new(HookRef(host.clone())));
    let mut live = Vec::new();
    for i in 0..12u64 {
        let tier = Tier::ALL[(i % 4) as usize];
        let data = payload(i, 50 + i as usize);
        let (off, len) = io.write_block(tier, key(i), &data).unwrap();
        live.push((tier, off, len, data));
    }
    let (t, off, ..) = live.remove(5);
    io.free_block(t, off).unwrap();
    io.sync().unwrap();
    drop(io);

    let mut tiers: [Vec<u8>; 4] = Default::default();
    for (tier, data) in take_calls(&host) {
        tiers[tier.index()] = data;
    }
    let io = BufferBlockIO::from_tiers(tiers, &g);
    io.reset_allocation(&mut live.iter().map(|(t, o, ..)| (*t, *o, 1)))
        .unwrap();
    for (tier, off, len, data) in &live {
        assert_eq!(&read(&io, *tier, *off, *len).unwrap(), data);
    }
    // The freed slot (tier1, slot 1) is the first one reused.
    let s1 = u64::from(g.slot_len(Tier::Tier1));
    assert_eq!(io.write_block(Tier::Tier1, key(50), &[1]).unwrap().0, s1);
    // Without a hook, sync is a no-op that succeeds.
    io.sync().unwrap();
}

#[test]
fn restore_drops_a_partial_slot() {
    let g = CollectionConfig::default();
    let s = g.slot_len(Tier::Tier2) as usize;
    let tiers = [Vec::new(), Vec::new(), payload(9, 3 * s + 17), Vec::new()];
    let io = BufferBlockIO::from_tiers(tiers, &g);
    let u = io.usage(Tier::Tier2);
    assert_eq!((u.slots, u.free_slots, u.bytes), (3, 3, 3 * s as u64));
    io.with_tier_data(Tier::Tier2, |d| assert_eq!(d.len(), 3 * s));
    assert_eq!(
        read(&io, Tier::Tier2, 2 * s as u64, 5).unwrap(),
        payload(9, 3 * s)[2 * s..2 * s + 5]
    );
    assert!(matches!(
        read(&io, Tier::Tier2, 3 * s as u64, 1),
        Err(StoreErr::NotFound { .. })
    ));
}

#[test]
fn buffer_grows_one_slot_at_a_time() {
    let g = CollectionConfig::default();
    let io = BufferBlockIO::new(&g);
    for i in 0..5u64 {
        io.write_block(Tier::Tier3, key(i), &[1]).unwrap();
    }
    let u = io.usage(Tier::Tier3);
    assert_eq!(
        (u.slots, u.free_slots, u.bytes),
        (5, 0, 5 * u64::from(u.slot_len))
    );
    let dbg = format!("{io:?}");
    assert!(dbg.contains("BufferBlockIO"), "{dbg}");
}
