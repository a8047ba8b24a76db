//! The `sync` durability contract (docs/storage.md): a `sync` write is
//! acknowledged only once an fsync covers it, and `wal` (the default) and
//! `memory` writes never ask for one. Checked against a store that keeps
//! what fsyncs covered apart from what they did not, as a power cut would;
//! and end to end, by SIGKILLing a real `ebb serve` under `sync` writes.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use common::{Server, call};
use ebb_host::store::{
    EntryVisitor, Family, FamilyWrite, FragmentId, KvStore, LoadedRecord, MemoryStore, StoreBatch,
    StoreError,
};
use ebb_host::{BatchOp, Durability, Expiry, Node, NodeConfig, PutOptions};

/// A write not yet covered by an fsync.
enum Unsynced {
    Records(Vec<StoreBatch>),
    Entries(Vec<FamilyWrite>),
}

/// A store that records fsyncs. Everything written is readable at once
/// (`written`, like the OS page cache); only what an fsync covered reaches
/// `synced`, which is what a power cut would leave. An fsync covers every
/// write before it, as an fsync of RocksDB's log does.
struct FsyncRecorder {
    written: MemoryStore,
    synced: Arc<MemoryStore>,
    unsynced: Mutex<Vec<Unsynced>>,
    fsyncs: AtomicU64,
    power: AtomicBool,
}

impl FsyncRecorder {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            written: MemoryStore::new(),
            synced: Arc::new(MemoryStore::new()),
            unsynced: Mutex::new(Vec::new()),
            fsyncs: AtomicU64::new(0),
            power: AtomicBool::new(true),
        })
    }

    fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::SeqCst)
    }

    /// Every later call fails; `synced` is what survived.
    fn cut_power(&self) -> Arc<MemoryStore> {
        let _writes = self.unsynced.lock();
        self.power.store(false, Ordering::SeqCst);
        self.synced.clone()
    }

    fn powered(&self) -> Result<(), StoreError> {
        if self.power.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(StoreError::Engine("power cut".into()))
        }
    }

    /// Move everything written so far into `synced`. Call with `unsynced` locked.
    fn fsync(&self, unsynced: &mut Vec<Unsynced>) -> Result<(), StoreError> {
        for write in unsynced.drain(..) {
            match write {
                Unsynced::Records(batches) => self.synced.write(&batches, true)?,
                Unsynced::Entries(writes) => self.synced.write_entries(&writes, true)?,
            }
        }
        self.fsyncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn record(&self, write: Unsynced, sync: bool) -> Result<(), StoreError> {
        let mut unsynced = self.unsynced.lock();
        self.powered()?;
        match &write {
            Unsynced::Records(batches) => self.written.write(batches, false)?,
            Unsynced::Entries(writes) => self.written.write_entries(writes, false)?,
        }
        unsynced.push(write);
        if sync {
            self.fsync(&mut unsynced)?;
        }
        Ok(())
    }

    /// Whether `table/key` holds `value` in what fsyncs covered.
    fn synced_has(&self, fragments: u32, table: &str, key: &str, value: &[u8]) -> bool {
        holds(&self.synced, fragments, table, key, value)
    }

    /// Whether `table/key` holds `value` in what was written.
    fn written_has(&self, fragments: u32, table: &str, key: &str, value: &[u8]) -> bool {
        holds(&self.written, fragments, table, key, value)
    }
}

fn holds(store: &MemoryStore, fragments: u32, table: &str, key: &str, value: &[u8]) -> bool {
    let mut found = false;
    for fragment in 0..fragments {
        store
            .load_fragment(fragment, &mut |stored| {
                found |= stored.table.as_str() == table
                    && stored.key == key
                    && stored.record.value == value;
                Ok(())
            })
            .unwrap();
    }
    found
}

impl KvStore for FsyncRecorder {
    fn load_fragment(
        &self,
        fragment: FragmentId,
        visit: &mut dyn FnMut(LoadedRecord<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.powered()?;
        self.written.load_fragment(fragment, visit)
    }

    fn write(&self, batches: &[StoreBatch], sync: bool) -> Result<(), StoreError> {
        self.record(Unsynced::Records(batches.to_vec()), sync)
    }

    fn read_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.powered()?;
        self.written.read_meta(key)
    }

    fn write_meta(&self, entries: &[(&str, Vec<u8>)]) -> Result<(), StoreError> {
        let writes = entries
            .iter()
            .map(|(key, value)| {
                FamilyWrite::Put(Family::Meta, key.as_bytes().to_vec(), value.clone())
            })
            .collect();
        self.record(Unsynced::Entries(writes), true)
    }

    fn sync(&self) -> Result<(), StoreError> {
        let mut unsynced = self.unsynced.lock();
        self.powered()?;
        self.fsync(&mut unsynced)
    }

    fn write_entries(&self, writes: &[FamilyWrite], sync: bool) -> Result<(), StoreError> {
        self.record(Unsynced::Entries(writes.to_vec()), sync)
    }

    fn scan_family(
        &self,
        family: Family,
        prefix: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.powered()?;
        self.written.scan_family(family, prefix, visit)
    }
}

const FRAGMENTS: u32 = 4;

fn config() -> NodeConfig {
    NodeConfig::new("unused-with-a-given-store").fragments(FRAGMENTS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_write_is_acknowledged_only_once_an_fsync_covers_it() {
    let store = FsyncRecorder::new();
    let node = Node::open_with_store(config(), store.clone())
        .await
        .unwrap();
    let before = store.fsyncs();
    // Concurrent writers, so that sync writes share flushes and fsyncs.
    let mut writers = Vec::new();
    for writer in 0..8 {
        let table = node.table("t").unwrap();
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for n in 0..25 {
                let key = format!("w{writer}-{n}");
                let value = format!("value of {key}");
                let options = PutOptions::default().durability(Durability::Sync);
                table.put(&key, value.clone(), options).await.unwrap();
                assert!(
                    store.synced_has(FRAGMENTS, "t", &key, value.as_bytes()),
                    "{key} was acknowledged before an fsync covered it"
                );
                acked.push((key, value));
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for writer in writers {
        acked.extend(writer.await.unwrap());
    }
    // A batch and a delete at `sync` are covered the same way.
    let table = node.table("t").unwrap();
    let ops = vec![
        BatchOp::Put {
            key: "batch".into(),
            value: "in a batch".into(),
            expiry: Expiry::Never,
        },
        BatchOp::Delete {
            key: acked[0].0.clone(),
        },
    ];
    for outcome in table.batch(ops, Durability::Sync).await {
        outcome.unwrap();
    }
    assert!(store.synced_has(FRAGMENTS, "t", "batch", b"in a batch"));
    acked.remove(0);
    let fsyncs = store.fsyncs() - before;
    assert!(
        (1..=201).contains(&fsyncs),
        "{fsyncs} fsyncs for 201 sync requests"
    );

    // A power cut now loses none of them.
    let survived = store.cut_power();
    let node = Node::open_with_store(config(), survived).await.unwrap();
    let table = node.table("t").unwrap();
    for (key, value) in &acked {
        let entry = table.get(key).await.unwrap();
        assert_eq!(
            entry.map(|e| e.value),
            Some(value.clone().into()),
            "{key} lost in the power cut"
        );
    }
    assert!(
        table.get("w0-0").await.unwrap().is_none(),
        "the synced delete"
    );
    assert!(table.get("batch").await.unwrap().is_some());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_and_memory_writes_never_ask_for_an_fsync() {
    let store = FsyncRecorder::new();
    let node = Node::open_with_store(config(), store.clone())
        .await
        .unwrap();
    let table = node.table("t").unwrap();
    let before = store.fsyncs();
    for n in 0..100 {
        let key = format!("wal-{n}");
        // The default durability is `wal`.
        table.put(&key, "w", PutOptions::default()).await.unwrap();
        assert!(
            store.written_has(FRAGMENTS, "t", &key, b"w"),
            "a wal write is acknowledged once it is written"
        );
        let options = PutOptions::default().durability(Durability::Memory);
        table
            .put(&format!("memory-{n}"), "m", options)
            .await
            .unwrap();
    }
    table
        .delete("wal-0", Durability::Wal)
        .await
        .unwrap()
        .unwrap();
    let ops = (0..50)
        .map(|n| BatchOp::Put {
            key: format!("batch-{n}"),
            value: "b".into(),
            expiry: Expiry::Never,
        })
        .collect();
    for outcome in table.batch(ops, Durability::Wal).await {
        outcome.unwrap();
    }
    // Wait until the snapshotter has written the `memory` writes too.
    let started = Instant::now();
    while !(0..100).all(|n| store.written_has(FRAGMENTS, "t", &format!("memory-{n}"), b"m")) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "memory writes not flushed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.fsyncs(), before, "no write asked for an fsync");
    assert!(
        !store.synced_has(FRAGMENTS, "t", "wal-1", b"w"),
        "nothing fsynced the wal writes"
    );

    // One sync write fsyncs the log, and with it every write before it.
    let options = PutOptions::default().durability(Durability::Sync);
    table.put("sync", "s", options).await.unwrap();
    assert!(store.fsyncs() > before);
    assert!(store.synced_has(FRAGMENTS, "t", "wal-1", b"w"));
    node.shutdown().await.unwrap();
}

/// Keeps putting `sync` writes over HTTP until the server goes away;
/// returns the keys it acknowledged and counts them in `acks`.
fn sync_writer(url: String, writer: usize, acks: Arc<AtomicUsize>) -> Vec<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut acked = Vec::new();
    for n in 0.. {
        let key = format!("w{writer}-{n}");
        let sent = agent
            .put(format!("{url}/v1/tables/crash/keys/{key}?durability=sync"))
            .send(format!("value of {key}").as_bytes());
        match sent {
            Ok(response) if response.status() == 200 => {
                acked.push(key);
                acks.fetch_add(1, Ordering::SeqCst);
            }
            Ok(response) => panic!("{key}: status {}", response.status()),
            Err(_) => break, // killed
        }
    }
    acked
}

#[test]
fn sigkill_loses_no_acknowledged_sync_write() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let acks = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (url, acks) = (server.url.clone(), acks.clone());
            std::thread::spawn(move || sync_writer(url, writer, acks))
        })
        .collect();
    // Kill mid-load, once the server has acknowledged some writes.
    let started = Instant::now();
    while acks.load(Ordering::SeqCst) < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "server too slow"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
    let acked: HashSet<String> = writers
        .into_iter()
        .flat_map(|writer| writer.join().unwrap())
        .collect();
    drop(server);
    assert!(acked.len() >= 200, "{} acknowledged", acked.len());

    let server = Server::start(dir.path(), &[]);
    for key in &acked {
        let got = call(
            "GET",
            &format!("{}/v1/tables/crash/keys/{key}", server.url),
            &[],
            None,
        );
        assert_eq!(
            (got.status, got.text()),
            (200, format!("value of {key}")),
            "acknowledged sync write {key} was lost"
        );
    }
    assert_eq!(server.stop(), 0);
}
