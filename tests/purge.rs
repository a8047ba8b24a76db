//! Tombstone purge end to end: expired and deleted records leave memory and
//! the store once the retention passed, nothing older comes back, and a
//! guarded cursor does not notice.

use std::sync::Arc;
use std::time::Duration;

use ebb_host::store::MemoryStore;
use ebb_host::{
    BatchOp, Durability, Expiry, Node, NodeConfig, PutOptions, QueryOutput, QueryRequest, TableInfo,
};
use ebb_query::Value;

fn config(dir: &std::path::Path, retention: Duration) -> NodeConfig {
    NodeConfig::new(dir)
        .fragments(4)
        .clean_interval(Duration::from_millis(50))
        .tombstone_retention(retention)
}

fn info(node: &Node, table: &str) -> TableInfo {
    node.table_usage()
        .into_iter()
        .find(|t| t.name.as_str() == table)
        .unwrap_or_else(|| panic!("table {table} is listed"))
}

/// Poll `check` until it holds, for at most `limit`.
async fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_records_leave_memory_and_the_store_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::open(config(dir.path(), Duration::from_millis(300)))
        .await
        .unwrap();
    let sessions = node.table("sessions").unwrap();
    for i in 0..10 {
        sessions
            .put(&format!("keep:{i}"), "forever", PutOptions::default())
            .await
            .unwrap();
    }
    let before = info(&node, "sessions");
    assert_eq!((before.live_records, before.tombstones), (10, 0));

    const RECORDS: usize = 100_000;
    let started = std::time::Instant::now();
    for chunk in 0..RECORDS / 1000 {
        let ops = (0..1000)
            .map(|i| BatchOp::Put {
                key: format!("session:{:06}", chunk * 1000 + i),
                value: vec![b'x'; 100].into(),
                expiry: Expiry::After(Duration::from_secs(1)),
            })
            .collect();
        let outcomes = sessions.batch(ops, Durability::Memory).await;
        assert!(outcomes.iter().all(Result::is_ok));
    }
    let loaded = info(&node, "sessions");
    // On a loaded machine the writes can outlast the TTL, and the first
    // records expire (and may be purged) before this look.
    if started.elapsed() < Duration::from_millis(900) {
        assert_eq!(loaded.live_records, 10 + RECORDS);
        assert!(loaded.memory_bytes > before.memory_bytes + RECORDS * 100);
    } else {
        assert!(loaded.live_records <= 10 + RECORDS);
    }

    // Expiry turns them into tombstones, the purge removes those.
    eventually(
        "the expired records to be purged",
        Duration::from_secs(30),
        || {
            let now = info(&node, "sessions");
            now.live_records == 10 && now.tombstones == 0
        },
    )
    .await;
    assert_eq!(
        info(&node, "sessions").memory_bytes,
        before.memory_bytes,
        "memory returns to what it was before"
    );
    node.shutdown().await.unwrap();
    drop(node);

    let node = Node::open(config(dir.path(), Duration::from_millis(300)))
        .await
        .unwrap();
    assert_eq!(
        node.boot_stats().records,
        10,
        "a restart loads none of the purged records"
    );
    let sessions = node.table("sessions").unwrap();
    assert!(sessions.get("session:000001").await.unwrap().is_none());
    assert!(sessions.get("keep:3").await.unwrap().is_some());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purged_delete_never_brings_an_older_value_back() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::open(config(dir.path(), Duration::ZERO))
        .await
        .unwrap();
    let t = node.table("t").unwrap();
    // Older values reach the store first, then the delete.
    t.put("k", "one", PutOptions::default()).await.unwrap();
    t.put("k", "two", PutOptions::default()).await.unwrap();
    t.delete("k", Durability::Wal).await.unwrap().unwrap();
    // A delete still buffered when it is purged: the removal replaces it.
    t.put("buffered", "old", PutOptions::default())
        .await
        .unwrap();
    t.delete("buffered", Durability::Memory)
        .await
        .unwrap()
        .unwrap();
    eventually(
        "the tombstones to be purged",
        Duration::from_secs(10),
        || node.table_usage().is_empty(),
    )
    .await;
    assert!(t.get("k").await.unwrap().is_none());
    assert!(t.get("buffered").await.unwrap().is_none());
    assert_eq!(
        t.delete("k", Durability::Wal).await.unwrap(),
        None,
        "a purged key is simply absent"
    );
    node.shutdown().await.unwrap();
    drop(node);

    let node = Node::open(config(dir.path(), Duration::ZERO))
        .await
        .unwrap();
    let t = node.table("t").unwrap();
    assert_eq!(
        node.boot_stats().records,
        0,
        "the store holds no record of them"
    );
    assert!(t.get("k").await.unwrap().is_none());
    assert!(t.get("buffered").await.unwrap().is_none());
    let v = t.put("k", "three", PutOptions::default()).await.unwrap();
    assert_eq!(t.get("k").await.unwrap().unwrap().version, v);
    node.shutdown().await.unwrap();
}

fn next(output: &QueryOutput) -> QueryRequest {
    QueryRequest {
        cursor: output.cursor.clone(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_between_pages_does_not_disturb_a_guarded_cursor() {
    let store = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(
        config(std::path::Path::new("unused"), Duration::ZERO),
        store,
    )
    .await
    .unwrap();
    let t = node.table("t").unwrap();
    for i in 0..400 {
        t.put(&format!("k{i:04}"), "v", PutOptions::default())
            .await
            .unwrap();
    }
    // Tombstones written before the query: invisible to it, purged while
    // it pages.
    for i in (0..400).step_by(3) {
        t.delete(&format!("k{i:04}"), Durability::Wal)
            .await
            .unwrap()
            .unwrap();
    }
    let expected: Vec<String> = (0..400)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("k{i:04}"))
        .collect();
    let mut output = node
        .query(QueryRequest {
            sql: Some("SELECT key FROM t".into()),
            page_size: Some(20),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut keys: Vec<String> = Vec::new();
    let mut waited = false;
    loop {
        keys.extend(output.rows.iter().map(|row| match &row[0] {
            Value::Text(key) => key.to_string(),
            other => panic!("a key is text, not {other:?}"),
        }));
        if output.cursor.is_none() {
            break;
        }
        if !waited {
            eventually(
                "the tombstones to be purged",
                Duration::from_secs(10),
                || info(&node, "t").tombstones == 0,
            )
            .await;
            waited = true;
        }
        output = node.query(next(&output)).await.expect("the cursor goes on");
    }
    assert!(waited, "the query took more than one page");
    assert_eq!(keys, expected);
    node.shutdown().await.unwrap();
}
