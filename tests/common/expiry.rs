//! Helpers of the expiry tests (tests/expiry.rs, tests/expiry_limits.rs):
//! an embedded node on an in-memory store, the test plugins, records with
//! deadlines, and waiting on a condition with a deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_host::plugin::{Installed, PluginError};
use ebb_host::store::MemoryStore;
use ebb_host::{BatchOp, BindRequest, Durability, Expiry, ExpiryConfig, Node, NodeConfig};

use super::wasm;

/// The bytes of a wasm module built by `make plugins`.
pub fn module(name: &str) -> Vec<u8> {
    let path = wasm(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the plugins with `make plugins`",
            path.display()
        )
    })
}

/// A node config with `fragments` fragments and retries after 100 ms,
/// doubling up to 2 s.
pub fn config(fragments: u32) -> NodeConfig {
    NodeConfig::new("unused")
        .fragments(fragments)
        .expiry(ExpiryConfig {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            ..ExpiryConfig::default()
        })
}

/// A node of [`config`] on an in-memory store.
pub async fn node(fragments: u32) -> Node {
    open(config(fragments)).await
}

/// A node of `config` on an in-memory store.
pub async fn open(config: NodeConfig) -> Node {
    Node::open_with_store(config, Arc::new(MemoryStore::new()))
        .await
        .unwrap()
}

/// Install the module `file` (see [`module`]) as plugin `name`.
pub async fn try_install(node: &Node, name: &str, file: &str) -> Result<Installed, PluginError> {
    let node = node.clone();
    let bytes = module(file);
    let name = name.to_string();
    tokio::task::spawn_blocking(move || node.install_plugin(&name, &bytes))
        .await
        .unwrap()
}

/// [`try_install`], which must succeed.
pub async fn install(node: &Node, name: &str, file: &str) {
    try_install(node, name, file).await.unwrap();
}

/// Bind `table` to `plugin.copy`.
pub async fn bind(node: &Node, table: &str, plugin: &str, max_batch: u32, max_attempts: u32) {
    bind_function(node, table, plugin, "copy", max_batch, max_attempts).await;
}

/// Bind `table` to `plugin.function`.
pub async fn bind_function(
    node: &Node,
    table: &str,
    plugin: &str,
    function: &str,
    max_batch: u32,
    max_attempts: u32,
) {
    node.bind_expiry(
        table,
        BindRequest {
            plugin: plugin.into(),
            function: function.into(),
            max_batch: Some(max_batch),
            max_attempts: Some(max_attempts),
            config: None,
            prefix: None,
        },
    )
    .await
    .unwrap();
}

/// Put `(key, value)` pairs expiring at the given deadlines, in batches.
pub async fn put_expiring(node: &Node, table: &str, items: Vec<(String, String, u64)>) {
    let table = node.table(table).unwrap();
    for chunk in items.chunks(1000) {
        let ops = chunk
            .iter()
            .map(|(key, value, at)| BatchOp::Put {
                key: key.clone(),
                value: value.clone().into(),
                expiry: Expiry::At(*at),
            })
            .collect();
        for outcome in table.batch(ops, Durability::Wal).await {
            outcome.unwrap();
        }
    }
}

/// Put one record of `table` expiring `ms` from now.
pub async fn put_in(node: &Node, table: &str, key: &str, value: &str, ms: u64) {
    put_expiring(node, table, vec![(key.into(), value.into(), now_ms() + ms)]).await;
}

/// Unix time in ms.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Live records of `table`. A record past its deadline counts until the
/// cleaner has converted it into an expiry tombstone (and, for a bound
/// table, written its event), so 0 here means every expiry was converted.
pub async fn live(node: &Node, table: &str) -> usize {
    node.tables()
        .into_iter()
        .find(|t| t.name.as_str() == table)
        .map_or(0, |t| t.live_records)
}

/// The value of `table`/`key`, if any.
pub async fn value(node: &Node, table: &str, key: &str) -> Option<String> {
    node.table(table)
        .unwrap()
        .get(key)
        .await
        .unwrap()
        .map(|entry| String::from_utf8_lossy(&entry.value).into_owned())
}

/// Wait until `check` holds, polling every 20 ms; panics with `what` after
/// `timeout`.
pub async fn eventually<F: Future<Output = bool>>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The highest attempt the `flaky` handler recorded for `key` (its `fail…`
/// values put `<table>_attempts/<key>:<attempt>`).
pub async fn last_attempt(node: &Node, table: &str, key: &str) -> u32 {
    let attempts = node.table(&format!("{table}_attempts")).unwrap();
    let mut last = 0;
    for attempt in 1..=50 {
        if attempts
            .get(&format!("{key}:{attempt}"))
            .await
            .unwrap()
            .is_some()
        {
            last = attempt;
        }
    }
    last
}
