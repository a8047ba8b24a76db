//! Point put/get through the embedded API over RocksDB: `memory` vs `wal`
//! durability, one writer vs many concurrent writers (group commit).
//!
//! Run with `make bench` (`cargo bench -p ebb-host --bench engine -- kv`).
//! Criterion reads the same arguments, `kv` as its filter, so every
//! benchmark's name starts with `kv-`. Under `cargo test` criterion runs
//! each benchmark once, as a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ebb_host::{Durability, Node, NodeConfig, PutOptions, Table};

const VALUE: &[u8] = &[7u8; 100];
const WRITERS: usize = 64;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    node: Node,
    table: Table,
    _dir: tempfile::TempDir,
    next: Arc<AtomicU64>,
}

impl Fixture {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let node = runtime
            .block_on(Node::open(NodeConfig::new(dir.path())))
            .unwrap();
        let table = node.table("bench").unwrap();
        Self {
            runtime,
            node,
            table,
            _dir: dir,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Run `total` puts spread over `writers` concurrent tasks; returns the elapsed time.
    fn puts(&self, total: u64, writers: usize, durability: Durability) -> Duration {
        let options = PutOptions::default().durability(durability);
        self.runtime.block_on(async {
            let started = Instant::now();
            let per_writer = total.div_ceil(writers as u64);
            let tasks: Vec<_> = (0..writers)
                .map(|_| {
                    let table = self.table.clone();
                    let next = self.next.clone();
                    tokio::spawn(async move {
                        for _ in 0..per_writer {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            table
                                .put(&format!("key:{}", n % 100_000), VALUE, options)
                                .await
                                .unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            started.elapsed()
        })
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.runtime.block_on(self.node.shutdown()).unwrap();
    }
}

fn puts(c: &mut Criterion) {
    let fixture = Fixture::new();
    let mut group = c.benchmark_group("kv-put");
    group.throughput(Throughput::Elements(1));
    for durability in [Durability::Memory, Durability::Wal] {
        group.bench_function(format!("{durability}/1-writer"), |b| {
            b.iter_custom(|iters| fixture.puts(iters, 1, durability))
        });
        group.bench_function(format!("{durability}/{WRITERS}-writers"), |b| {
            b.iter_custom(|iters| fixture.puts(iters.max(WRITERS as u64), WRITERS, durability))
        });
    }
    group.finish();
}

fn gets(c: &mut Criterion) {
    let fixture = Fixture::new();
    fixture.puts(10_000, WRITERS, Durability::Memory);
    let mut group = c.benchmark_group("kv-get");
    group.throughput(Throughput::Elements(1));
    group.bench_function("hit", |b| {
        b.iter_custom(|iters| {
            fixture.runtime.block_on(async {
                let keys: Vec<String> = (0..10_000).map(|n| format!("key:{n}")).collect();
                let started = Instant::now();
                for i in 0..iters {
                    let entry = fixture
                        .table
                        .get(&keys[(i % 10_000) as usize])
                        .await
                        .unwrap();
                    assert!(entry.is_some());
                }
                started.elapsed()
            })
        })
    });
    group.finish();
}

pub fn main() {
    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    puts(&mut criterion);
    gets(&mut criterion);
    criterion.final_summary();
}
