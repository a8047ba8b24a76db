//! The node and fragment runtime end to end: last-writer-wins through the
//! API, TTL visibility, the cleaner waking at deadlines, supervisor restarts,
//! shedding under a flood, store failures and retried shutdown.

use std::sync::Arc;
use std::time::Duration;

use ebb_host::fragment::{Child, PoolConfig};
use ebb_host::store::{KvStore, MemoryStore};
use ebb_host::{BatchOp, BatchOutcome, Durability, Error, Expiry, Node, NodeConfig, PutOptions};

fn config() -> NodeConfig {
    NodeConfig::new("unused-with-memory-store").fragments(4)
}

async fn memory_node(config: NodeConfig) -> (Arc<MemoryStore>, Node) {
    let store = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config, store.clone()).await.unwrap();
    (store, node)
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_deletes_and_reads_follow_last_writer_wins() {
    let (_, node) = memory_node(config()).await;
    let t = node.table("Users").unwrap();
    assert_eq!(t.name().as_str(), "users");
    assert!(
        t.get("k").await.unwrap().is_none(),
        "an unwritten table is empty"
    );
    assert_eq!(
        t.delete("k", Durability::Wal).await.unwrap(),
        None,
        "deleting nothing writes nothing"
    );

    let v1 = t.put("k", "one", PutOptions::default()).await.unwrap();
    let v2 = t.put("k", "two", PutOptions::default()).await.unwrap();
    assert!(v2 > v1);
    let entry = t.get("k").await.unwrap().unwrap();
    assert_eq!((entry.value.as_ref(), &entry.version), (&b"two"[..], &v2));

    let tombstone = t.delete("k", Durability::Wal).await.unwrap().unwrap();
    assert!(tombstone > v2);
    assert!(t.get("k").await.unwrap().is_none());
    assert_eq!(t.delete("k", Durability::Wal).await.unwrap(), None);
    let v3 = t.put("k", "three", PutOptions::default()).await.unwrap();
    assert!(v3 > tombstone, "a put after a delete wins");
    assert_eq!(t.get("k").await.unwrap().unwrap().value, "three");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_record_is_invisible_at_once_and_the_cleaner_converts_it_at_its_deadline() {
    // The fallback sweep is an hour away: only the deadline wake-up can convert in time.
    let (_, node) = memory_node(config().clean_interval(Duration::from_secs(3600))).await;
    let t = node.table("sessions").unwrap();
    let started = std::time::Instant::now();
    t.put(
        "s",
        "v",
        PutOptions::default().ttl(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    t.put("keep", "v", PutOptions::default()).await.unwrap();
    assert!(t.get("s").await.unwrap().is_some());
    assert_eq!(node.tables()[0].live_records, 2);

    eventually("the record to become invisible", async || {
        t.get("s").await.unwrap().is_none()
    })
    .await;
    // Deadlines are whole milliseconds of wall time: allow the truncation.
    assert!(
        started.elapsed() >= Duration::from_millis(199),
        "not before its deadline"
    );
    eventually("the cleaner to convert the record", async || {
        node.tables()[0].live_records == 1
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the cleaner woke at the deadline, not at its interval"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_deadlines_expire_at_once_and_bad_ttls_are_refused() {
    let (_, node) = memory_node(config()).await;
    let t = node.table("t").unwrap();
    t.put("past", "v", PutOptions::default().expires_at_ms(1))
        .await
        .unwrap();
    assert!(t.get("past").await.unwrap().is_none());
    let zero = t
        .put("z", "v", PutOptions::default().ttl(Duration::ZERO))
        .await;
    assert!(matches!(zero, Err(Error::InvalidTtl(_))), "{zero:?}");
    let far = t
        .put("z", "v", PutOptions::default().expires_at_ms(u64::MAX))
        .await;
    assert!(matches!(far, Err(Error::InvalidTtl(_))), "{far:?}");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_keys_and_values_are_refused_with_what_to_fix() {
    let (_, node) = memory_node(config().max_value_bytes(16)).await;
    assert!(matches!(
        node.table("no-dashes"),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        node.table("ebb_system"),
        Err(Error::InvalidName(_))
    ));
    let t = node.table("t").unwrap();
    let long_key = "k".repeat(4097);
    let error = t
        .put(&long_key, "v", PutOptions::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("4096"), "{error}");
    assert!(matches!(t.get("").await, Err(Error::InvalidName(_))));
    let error = t
        .put("k", "x".repeat(17), PutOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::ValueTooLarge { len: 17, limit: 16 }),
        "{error:?}"
    );
    assert!(
        t.get("k").await.unwrap().is_none(),
        "a refused write changes nothing"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_report_each_item_in_order() {
    let (_, node) = memory_node(config()).await;
    let t = node.table("t").unwrap();
    t.put("old", "v", PutOptions::default()).await.unwrap();
    let outcomes = t
        .batch(
            vec![
                BatchOp::Put {
                    key: "a".into(),
                    value: "1".into(),
                    expiry: Expiry::Never,
                },
                BatchOp::Delete { key: "old".into() },
                BatchOp::Delete {
                    key: "missing".into(),
                },
                BatchOp::Put {
                    key: String::new(),
                    value: "x".into(),
                    expiry: Expiry::Never,
                },
                BatchOp::Put {
                    key: "b".into(),
                    value: "2".into(),
                    expiry: Expiry::After(Duration::from_secs(60)),
                },
            ],
            Durability::Sync,
        )
        .await;
    assert_eq!(outcomes.len(), 5);
    assert!(matches!(outcomes[0], Ok(BatchOutcome::Written(_))));
    assert!(matches!(outcomes[1], Ok(BatchOutcome::Written(_))));
    assert!(matches!(outcomes[2], Ok(BatchOutcome::NotFound)));
    assert!(matches!(outcomes[3], Err(Error::InvalidName(_))));
    assert!(matches!(outcomes[4], Ok(BatchOutcome::Written(_))));
    assert_eq!(t.get("a").await.unwrap().unwrap().value, "1");
    assert!(t.get("old").await.unwrap().is_none());
    assert!(t.get("b").await.unwrap().unwrap().expires_at_ms.is_some());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_wal_writers_share_store_writes() {
    let (store, node) = memory_node(config()).await;
    let before = store.write_calls();
    let t = node.table("t").unwrap();
    let writes = futures::future::join_all((0..400).map(|i| {
        let t = t.clone();
        async move { t.put(&format!("k{i}"), "v", PutOptions::default()).await }
    }))
    .await;
    assert!(writes.iter().all(Result::is_ok));
    let store_writes = store.write_calls() - before;
    assert!(
        store_writes < 400,
        "400 acknowledged wal writes took {store_writes} store writes"
    );
    assert_eq!(
        store.record_count(),
        400,
        "every acknowledged wal write is in the store"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_children_restart_in_place_and_the_fragment_keeps_serving() {
    let (_, node) = memory_node(config().clean_interval(Duration::from_secs(3600))).await;
    let t = node.table("t").unwrap();
    // Keys of fragment 0 only.
    let keys: Vec<String> = (0..)
        .map(|i| format!("key{i}"))
        .filter(|k| node.fragment_of(k) == 0)
        .take(20)
        .collect();
    for key in &keys {
        t.put(key, key.clone(), PutOptions::default())
            .await
            .unwrap();
    }
    for child in [Child::Dispatcher, Child::Cleaner, Child::Snapshotter] {
        node.kill_fragment_child(0, child).await;
        eventually("the restart to show in health", async || {
            node.health().await.fragments[0]
                .as_ref()
                .is_some_and(|h| h.restarts.get(child.name()) == Some(&1))
        })
        .await;
    }
    let health = node.health().await;
    let fragment = health.fragments[0].as_ref().unwrap();
    assert_eq!(
        fragment.running_workers, 2,
        "the restarted dispatcher started the high pool's workers"
    );
    assert!(health.is_healthy(), "{health:?}");
    for key in &keys {
        assert_eq!(
            t.get(key).await.unwrap().unwrap().value,
            key.as_bytes(),
            "data survives restarts"
        );
        t.put(key, "after", PutOptions::default()).await.unwrap();
    }
    // The restarted cleaner still wakes at deadlines.
    t.put(
        &keys[0],
        "x",
        PutOptions::default().ttl(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    eventually("the restarted cleaner to convert", async || {
        node.tables()[0].live_records == keys.len() - 1
    })
    .await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_flood_beyond_the_queue_is_shed_explicitly_and_nothing_admitted_is_lost() {
    let pool = PoolConfig {
        workers: 1,
        capacity: 8,
    };
    // Every write through the workers: with inline writes, each put of
    // this single-threaded flood would apply during its own first poll and
    // free its place before the next is admitted, so no queue would form
    // (the next test).
    let (_, node) = memory_node(config().high_pool(pool).inline_writes(false)).await;
    let t = node.table("t").unwrap();
    let key_of = |i: usize| format!("flood{i}");
    // All puts are submitted in one poll before any worker runs.
    let results = futures::future::join_all((0..200).map(|i| {
        let t = t.clone();
        async move {
            t.put(
                &key_of(i),
                "v",
                PutOptions::default().durability(Durability::Memory),
            )
            .await
        }
    }))
    .await;
    let shed = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Overloaded(_))))
        .count();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(
        ok + shed,
        200,
        "every put either succeeded or was shed: {results:?}"
    );
    assert!(shed > 0 && ok >= 8, "ok {ok}, shed {shed}");
    if let Some(Err(error)) = results.iter().find(|r| r.is_err()) {
        assert!(error.to_string().contains("retry"), "{error}");
    }
    let health = node.health().await;
    let counted = |pool: &str| -> u64 {
        health
            .fragments
            .iter()
            .flat_map(|f| &f.as_ref().unwrap().pools)
            .filter(|p| p.pool == pool)
            .map(|p| p.shed)
            .sum()
    };
    assert_eq!(
        counted("high"),
        shed as u64,
        "every shed operation is counted"
    );
    assert_eq!(
        counted("background"),
        0,
        "writes are shed in their own pool"
    );
    for (i, result) in results.iter().enumerate() {
        let visible = t.get(&key_of(i)).await.unwrap().is_some();
        assert_eq!(
            visible,
            result.is_ok(),
            "key {i}: admitted writes land, shed ones do not"
        );
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_flood_to_idle_slots_applies_inline_and_sheds_nothing() {
    // The same flood with inline writes (the default): each put applies on
    // its own task at once, so the pool never fills and nothing is shed.
    let pool = PoolConfig {
        workers: 1,
        capacity: 8,
    };
    let (_, node) = memory_node(config().high_pool(pool)).await;
    let t = node.table("t").unwrap();
    let results = futures::future::join_all((0..200).map(|i| {
        let t = t.clone();
        async move {
            t.put(
                &format!("flood{i}"),
                "v",
                PutOptions::default().durability(Durability::Memory),
            )
            .await
        }
    }))
    .await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let health = node.health().await;
    let shed: u64 = health
        .fragments
        .iter()
        .flat_map(|f| &f.as_ref().unwrap().pools)
        .map(|p| p.shed)
        .sum();
    assert_eq!(shed, 0);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_writes_of_one_key_apply_in_order_while_other_writers_keep_slots_busy() {
    // A batch's items are admitted in order; versions are taken when an
    // item applies. If a later item of a key applied inline while an
    // earlier one waited in its worker's queue, the earlier would take the
    // newer version and win. Background writers keep the workers' slots
    // busy, so items find them both idle and busy.
    let (_, node) = memory_node(config()).await;
    let t = node.table("t").unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Rounds start once both writers have written, so a busy machine that
    // is slow to schedule them cannot leave every slot idle throughout.
    let started = Arc::new(tokio::sync::Semaphore::new(0));
    let background: Vec<_> = (0..2)
        .map(|writer| {
            let (t, stop, started) = (t.clone(), stop.clone(), started.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let puts = (0..16).map(|i| {
                        let t = t.clone();
                        async move {
                            t.put(&format!("bg{writer}-{i}"), "x", PutOptions::default())
                                .await
                        }
                    });
                    for put in futures::future::join_all(puts).await {
                        put.unwrap();
                    }
                    n += 1;
                    if n == 1 {
                        started.add_permits(1);
                    }
                }
                n
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(30), started.acquire_many(2))
        .await
        .expect("both writers wrote within 30 s")
        .expect("the semaphore is never closed")
        .forget();
    for round in 0..300 {
        let key = format!("ordered{round}");
        let ops = (0..4)
            .map(|i| BatchOp::Put {
                key: key.clone(),
                value: format!("v{i}").into(),
                expiry: Expiry::Never,
            })
            .collect();
        for outcome in t.batch(ops, Durability::Memory).await {
            outcome.unwrap();
        }
        assert_eq!(
            t.get(&key).await.unwrap().unwrap().value,
            &b"v3"[..],
            "round {round}: the batch's last write of the key wins"
        );
    }
    // A batch of more items than it keeps in flight at once (256): a key's
    // writes still apply in item order across that window.
    let ops = (0..1000)
        .map(|i| BatchOp::Put {
            key: format!("wide{}", i % 10),
            value: format!("v{i}").into(),
            expiry: Expiry::Never,
        })
        .collect();
    let mut last: Vec<Option<ebb_host::Version>> = vec![None; 10];
    for (i, outcome) in t
        .batch(ops, Durability::Memory)
        .await
        .into_iter()
        .enumerate()
    {
        let BatchOutcome::Written(version) = outcome.unwrap() else {
            panic!("item {i}: a put answers its version");
        };
        if let Some(earlier) = &last[i % 10] {
            assert!(
                *earlier < version,
                "item {i}: versions of a key rise in item order"
            );
        }
        last[i % 10] = Some(version);
    }
    for key in 0..10 {
        assert_eq!(
            t.get(&format!("wide{key}")).await.unwrap().unwrap().value,
            format!("v{}", 990 + key).as_bytes(),
            "the key's last item wins"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in background {
        assert!(writer.await.unwrap() > 0);
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_keeps_writes_and_shows_in_health_until_it_recovers() {
    let (store, node) = memory_node(config()).await;
    let t = node.table("t").unwrap();
    store.set_failing(true);
    let error = t.put("k", "v", PutOptions::default()).await.unwrap_err();
    assert!(matches!(error, Error::NotDurable { .. }), "{error:?}");
    assert!(error.to_string().contains("retained"), "{error}");
    assert_eq!(
        t.get("k").await.unwrap().unwrap().value,
        "v",
        "applied, waiting for the store"
    );
    let health = node.health().await;
    assert!(!health.is_healthy());
    assert!(
        health
            .fragments
            .iter()
            .flatten()
            .any(|f| f.flush.last_error.is_some())
    );

    store.set_failing(false);
    // The snapshotter retries the retained batch on its own.
    eventually("the retained batch to be flushed", async || {
        store.record_count() == 1
    })
    .await;
    eventually("health to recover", async || {
        node.health().await.is_healthy()
    })
    .await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_shutdown_loses_nothing_and_can_be_retried() {
    let store = Arc::new(MemoryStore::new());
    // No periodic flush: the buffered writes wait for the shutdown flush.
    let quiet = config().flush_interval(Duration::from_secs(3600));
    let node = Node::open_with_store(quiet, store.clone()).await.unwrap();
    let t = node.table("t").unwrap();
    for i in 0..100 {
        t.put(
            &format!("k{i}"),
            "v",
            PutOptions::default().durability(Durability::Memory),
        )
        .await
        .unwrap();
    }
    store.set_failing(true);
    assert!(
        node.shutdown().await.is_err(),
        "the final flush cannot succeed"
    );
    assert!(matches!(
        t.put("late", "v", PutOptions::default()).await,
        Err(Error::ShuttingDown)
    ));
    store.set_failing(false);
    node.shutdown().await.unwrap();
    assert_eq!(store.record_count(), 100);

    let store: Arc<dyn KvStore> = store;
    let node = Node::open_with_store(config(), store).await.unwrap();
    assert_eq!(node.boot_stats().records, 100);
    node.shutdown().await.unwrap();
}

/// `test.hold(x)`: a native scalar that blocks its query thread until
/// released, so a page can be kept holding its background permit.
#[derive(Debug, Default)]
struct Hold {
    entered: std::sync::atomic::AtomicUsize,
    released: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl Hold {
    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.wake.notify_all();
    }
}

impl ebb_query::ScalarFunction for Hold {
    fn name(&self) -> &str {
        "test.hold"
    }
    fn arity(&self) -> ebb_query::Arity {
        ebb_query::Arity::Exact(1)
    }
    fn call(
        &self,
        args: &[Vec<ebb_query::Value>],
        _rows: usize,
    ) -> Result<Vec<ebb_query::Value>, ebb_query::FunctionError> {
        self.entered
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let released = self.released.lock().unwrap();
        let _released = self
            .wake
            .wait_timeout_while(released, Duration::from_secs(10), |released| !*released)
            .unwrap();
        Ok(args[0].clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_page_beyond_the_background_capacity_is_shed_and_counted() {
    let (_, node) = memory_node(config().fragments(1).background_capacity(1)).await;
    let hold = Arc::new(Hold::default());
    node.register_scalar("test", "hold", hold.clone()).unwrap();
    let t = node.table("t").unwrap();
    t.put("k", "v", PutOptions::default()).await.unwrap();
    let query = |sql: &str| {
        let node = node.clone();
        let request = ebb_host::QueryRequest {
            sql: Some(sql.into()),
            ..Default::default()
        };
        async move { node.query(request).await }
    };
    let pool = |health: &ebb_host::NodeHealth, name: &str| {
        let fragment = health.fragments[0].as_ref().unwrap();
        let pool = fragment.pools.iter().find(|p| p.pool == name).unwrap();
        (pool.workers, pool.queued, pool.capacity, pool.shed)
    };

    // The first query's page holds the fragment's only background slot.
    let held = tokio::spawn(query("SELECT test.hold(value) FROM t"));
    eventually("the held page to run", async || {
        hold.entered.load(std::sync::atomic::Ordering::SeqCst) > 0
    })
    .await;
    let health = node.health().await;
    assert_eq!(
        pool(&health, "background"),
        (0, 1, 1, 0),
        "no workers; the page holds its permit while it runs"
    );

    let error = query("SELECT key FROM t").await.unwrap_err();
    assert!(
        matches!(&error, ebb_host::QueryError::Overloaded(message)
            if message.contains("background") && message.contains("retry")),
        "{error}"
    );
    let health = node.health().await;
    assert_eq!(pool(&health, "background").3, 1, "the shed page is counted");
    assert_eq!(pool(&health, "high").3, 0, "in its own pool");
    assert!(
        health.is_healthy(),
        "a background pool without workers is healthy"
    );

    hold.release();
    let output = held.await.unwrap().unwrap();
    assert_eq!(output.rows.len(), 1);
    assert_eq!(
        pool(&node.health().await, "background").1,
        0,
        "a finished page frees its slot"
    );
    assert_eq!(query("SELECT key FROM t").await.unwrap().rows.len(), 1);
    node.shutdown().await.unwrap();
}
