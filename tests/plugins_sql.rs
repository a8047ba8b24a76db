//! The bundled plugins (built to wasm32 by `make plugins`) in SQL, through
//! the embedded node: JSON extraction, and aggregates whose results do not
//! depend on fragment count or page size and match a native computation.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use ebb_host::store::MemoryStore;
use ebb_host::{Durability, Node, NodeConfig, PutOptions, QueryBudgets, QueryRequest};
use ebb_query::Value;

fn wasm(name: &str) -> Vec<u8> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            // The workspace root (where Cargo.lock is) holds the default target dir.
            let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let root = manifest.ancestors().find(|d| d.join("Cargo.lock").exists());
            root.unwrap_or(manifest).join("target")
        });
    let path = target.join(format!("wasm32-unknown-unknown/release/{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the plugins with `make plugins`",
            path.display()
        )
    })
}

async fn node(fragments: u32, page: usize) -> Node {
    node_with_threads(fragments, page, 2).await
}

/// A node with `plugin_threads` threads for query plugin work.
async fn node_with_threads(fragments: u32, page: usize, plugin_threads: usize) -> Node {
    let mut config = NodeConfig::new("unused")
        .fragments(fragments)
        .query_budgets(QueryBudgets {
            page_visit_budget: page,
            max_page_visit_budget: page,
            ..QueryBudgets::default()
        });
    config.plugins.threads = plugin_threads;
    let store: Arc<MemoryStore> = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config, store.clone()).await.unwrap();
    let plugins = node.plugins().clone();
    let json = wasm("ebb_plugin_json");
    let stats = wasm("ebb_plugin_stats");
    tokio::task::spawn_blocking(move || {
        plugins.install(&*store, "json", &json).unwrap();
        plugins.install(&*store, "stats", &stats).unwrap();
    })
    .await
    .unwrap();
    write_requests(&node).await;
    node
}

async fn rows(node: &Node, sql: &str) -> Vec<Vec<Value>> {
    let mut request = QueryRequest {
        sql: Some(sql.into()),
        page_size: Some(10_000),
        ..Default::default()
    };
    let mut out = Vec::new();
    loop {
        let page = node
            .query(request)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        out.extend(page.rows);
        match page.cursor {
            Some(cursor) => {
                request = QueryRequest {
                    cursor: Some(cursor),
                    ..Default::default()
                }
            }
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_functions_extract_and_filter() {
    let node = node(4, 256).await;
    let found = rows(
        &node,
        "SELECT key, json.get(value, '$.user'), json.get_int(value, '$.ms') FROM requests WHERE json.get_int(value, '$.ms') > 990 ORDER BY key",
    )
    .await;
    let expected: Vec<Vec<Value>> = (0..500)
        .filter(|i| (i * 37) % 1000 > 990)
        .map(|i| {
            vec![
                Value::text(format!("r{i:04}")),
                Value::text(format!("u{}", i % 17)),
                Value::Int((i * 37) % 1000),
            ]
        })
        .collect();
    assert_eq!(found, expected);
    let grouped = rows(
        &node,
        "SELECT json.get(value, '$.ok') AS ok, count(*) FROM requests GROUP BY ok",
    )
    .await;
    assert_eq!(
        grouped,
        vec![
            vec![Value::text("false"), Value::Int(167)],
            vec![Value::text("true"), Value::Int(333)]
        ]
    );
    let missing = rows(
        &node,
        "SELECT json.has(value, '$.nope'), json.get(value, '$.nope') FROM requests LIMIT 1",
    )
    .await;
    assert_eq!(missing, vec![vec![Value::Bool(false), Value::Null]]);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_do_not_depend_on_fragments_or_pages_and_match_native_results() {
    let sql = "SELECT stats.avg(json.get_float(value, '$.ms')), stats.p50(json.get_float(value, '$.ms')), \
               stats.p95(json.get_float(value, '$.ms')), stats.count_distinct(json.get(value, '$.user')), \
               stats.stddev(json.get_float(value, '$.ms')) FROM requests";
    let mut results = Vec::new();
    // One plugin thread runs every page, merge and finish of the last split.
    for (fragments, page, threads) in [(1, 10_000, 4), (4, 256, 2), (16, 7, 1)] {
        let node = node_with_threads(fragments, page, threads).await;
        results.push(rows(&node, sql).await);
        node.shutdown().await.unwrap();
    }
    let float = |v: &Value| match v {
        Value::Float(f) => *f,
        Value::Int(i) => *i as f64,
        other => panic!("not a number: {other:?}"),
    };
    for other in &results[1..] {
        for (a, b) in results[0][0].iter().zip(&other[0]) {
            let (a, b) = (float(a), float(b));
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                "{a} vs {b}: results depend on the split"
            );
        }
    }
    let mut ms: Vec<f64> = (0..500).map(|i| ((i * 37) % 1000) as f64).collect();
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    let row = &results[0][0];
    assert!(
        (float(&row[0]) - mean).abs() < 1e-9,
        "avg {} vs {mean}",
        float(&row[0])
    );
    let p50 = ms[(0.50 * (ms.len() - 1) as f64).round() as usize];
    let p95 = ms[(0.95 * (ms.len() - 1) as f64).round() as usize];
    assert!(
        (float(&row[1]) - p50).abs() <= 0.02 * p50 + 2.0,
        "p50 {} vs {p50}",
        float(&row[1])
    );
    assert!(
        (float(&row[2]) - p95).abs() <= 0.02 * p95 + 2.0,
        "p95 {} vs {p95}",
        float(&row[2])
    );
    assert_eq!(float(&row[3]), 17.0, "17 distinct users");
    let variance = ms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (ms.len() - 1) as f64;
    assert!((float(&row[4]) - variance.sqrt()).abs() < 1e-6, "stddev");
}

/// `app.plus(x, n)`: a native scalar for the test below.
#[derive(Debug)]
struct Plus;

impl ebb_query::ScalarFunction for Plus {
    fn name(&self) -> &str {
        "app.plus"
    }
    fn arity(&self) -> ebb_query::Arity {
        ebb_query::Arity::Exact(2)
    }
    fn call(
        &self,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<Vec<Value>, ebb_query::FunctionError> {
        Ok((0..rows)
            .map(|row| match (&args[0][row], &args[1][row]) {
                (Value::Int(a), Value::Int(b)) => Value::Int(a + b),
                _ => Value::Null,
            })
            .collect())
    }
}

/// `app.total(x)`: a native aggregate (sum of integers).
#[derive(Debug)]
struct Total;

impl ebb_query::AggregateFunction for Total {
    fn name(&self) -> &str {
        "app.total"
    }
    fn arity(&self) -> ebb_query::Arity {
        ebb_query::Arity::Exact(1)
    }
    fn init(&self) -> Result<ebb_query::AggState, ebb_query::FunctionError> {
        Ok(vec![Value::Int(0)])
    }
    fn update(
        &self,
        state: &mut ebb_query::AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), ebb_query::FunctionError> {
        let Value::Int(total) = &mut state[0] else {
            unreachable!("the state is one integer")
        };
        for value in args[0].iter().take(rows) {
            if let Value::Int(x) = value {
                *total += x;
            }
        }
        Ok(())
    }
    fn merge(
        &self,
        left: ebb_query::AggState,
        right: ebb_query::AggState,
    ) -> Result<ebb_query::AggState, ebb_query::FunctionError> {
        match (&left[0], &right[0]) {
            (Value::Int(a), Value::Int(b)) => Ok(vec![Value::Int(a + b)]),
            _ => unreachable!("states are integers"),
        }
    }
    fn finish(&self, state: ebb_query::AggState) -> Result<Value, ebb_query::FunctionError> {
        Ok(state[0].clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_functions_of_the_embedding_application_run_in_sql() {
    let node = node(4, 64).await;
    node.register_scalar("app", "plus", Arc::new(Plus)).unwrap();
    node.register_aggregate("app", "total", Arc::new(Total))
        .unwrap();
    let found = rows(
        &node,
        "SELECT app.total(app.plus(json.get_int(value, '$.ms'), 1)), sum(json.get_int(value, '$.ms')) + count(*) FROM requests",
    )
    .await;
    assert_eq!(
        found[0][0], found[0][1],
        "native results match built-ins: {found:?}"
    );
    assert!(matches!(found[0][0], Value::Int(n) if n > 500));

    let error = node
        .query(QueryRequest {
            sql: Some("SELECT app.nope(value) FROM requests".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(error.to_string().contains("app.nope"), "{error}");
    assert!(
        node.register_scalar("bad-name", "f", Arc::new(Plus))
            .is_err()
    );
    node.shutdown().await.unwrap();
}

/// `bytes` with a custom section appended: the same plugin, with another
/// SHA-256, so installing it makes a new version.
fn with_custom_section(bytes: &[u8], tag: &str) -> Vec<u8> {
    let mut section = vec![tag.len() as u8];
    section.extend(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0);
    out.push(section.len() as u8);
    out.extend(section);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_never_switches_plugin_versions() {
    use ebb_host::{Consistency, QueryError};

    let config = NodeConfig::new("unused").fragments(4);
    let store: Arc<MemoryStore> = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config, store.clone()).await.unwrap();
    let json = wasm("ebb_plugin_json");
    let install = |bytes: Vec<u8>| {
        let (plugins, store) = (node.plugins().clone(), store.clone());
        async move {
            tokio::task::spawn_blocking(move || plugins.install(&*store, "json", &bytes).unwrap())
                .await
                .unwrap()
        }
    };
    install(json.clone()).await;
    let t = node.table("t").unwrap();
    for i in 0..60 {
        t.put(
            &format!("k{i:02}"),
            format!(r#"{{"n": {}}}"#, i % 5),
            PutOptions::default().durability(Durability::Memory),
        )
        .await
        .unwrap();
    }
    let queries = [
        "SELECT key, json.get_int(value, '$.n') FROM t",
        "SELECT key FROM t ORDER BY json.get_int(value, '$.n'), key",
        "SELECT json.get_int(value, '$.n') AS n, count(*) FROM t GROUP BY n",
    ];
    let first = |sql: &str| QueryRequest {
        sql: Some(sql.into()),
        page_size: Some(2),
        ..Default::default()
    };
    let next = |page: &ebb_host::QueryOutput, consistency| QueryRequest {
        cursor: page.cursor.clone(),
        consistency,
        ..Default::default()
    };
    let refused = |result: Result<ebb_host::QueryOutput, QueryError>, what: &str| match result {
        Err(QueryError::PluginChanged { plugin, message }) => {
            assert_eq!(plugin, "json", "{what}");
            assert!(message.contains("json"), "{what}: {message}");
            message
        }
        other => panic!("{what}: expected PluginChanged, got {other:?}"),
    };
    let mut pages = Vec::new();
    for sql in queries {
        let page = node.query(first(sql)).await.unwrap();
        assert!(page.cursor.is_some(), "{sql}");
        // Unchanged, the continuation goes on.
        node.query(next(&page, None)).await.unwrap();
        pages.push(page);
    }
    let plain = node.query(first("SELECT key FROM t")).await.unwrap();
    let explain = node
        .query(first("EXPLAIN SELECT json.get(value, '$.n') FROM t"))
        .await
        .unwrap();
    assert!(
        explain
            .rows
            .iter()
            .any(|r| r[0] == Value::text("plugin versions: json@1")),
        "{:?}",
        explain.rows
    );

    // The same module again is the same version: nothing changes.
    install(json.clone()).await;
    node.query(next(&pages[0], None)).await.unwrap();

    install(with_custom_section(&json, "v2")).await;
    for (sql, page) in queries.iter().zip(&pages) {
        let message = refused(node.query(next(page, None)).await, sql);
        assert!(message.contains("version 1, now version 2"), "{message}");
    }
    // Relaxed: refused as well (the node keeps only the current module).
    let message = refused(
        node.query(next(&pages[0], Some(Consistency::Relaxed)))
            .await,
        "relaxed",
    );
    assert!(message.contains("replaced"), "{message}");
    // A query that calls no plugin continues.
    node.query(next(&plain, None)).await.unwrap();
    // A first page of the new version continues on it.
    let fresh = node.query(first(queries[0])).await.unwrap();
    node.query(next(&fresh, None)).await.unwrap();

    // Removed: the same answer, naming the plugin, rather than a planning error.
    let (plugins, removing) = (node.plugins().clone(), store.clone());
    tokio::task::spawn_blocking(move || plugins.remove(&*removing, "json").unwrap())
        .await
        .unwrap();
    let message = refused(node.query(next(&fresh, None)).await, "removed");
    assert!(message.contains("removed"), "{message}");
    node.shutdown().await.unwrap();
}

/// The requests of [`node_with_threads`], written through `node`.
async fn write_requests(node: &Node) {
    let t = node.table("requests").unwrap();
    for i in 0..500 {
        let body = format!(
            r#"{{"ms": {}, "user": "u{}", "ok": {}}}"#,
            (i * 37) % 1000,
            i % 17,
            i % 3 != 0
        );
        t.put(
            &format!("r{i:04}"),
            body,
            PutOptions::default().durability(Durability::Memory),
        )
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_uploaded_on_one_member_answer_alike_on_every_member_of_a_cluster() {
    // One replica of each fragment: every member reads most fragments
    // from the others, whose leaders run the plugins on their pages and
    // send back rows and partial aggregate states.
    let members = crate::in_process::open_cluster(3, 1, 4, |config| {
        config.query_budgets(QueryBudgets {
            page_visit_budget: 64,
            max_page_visit_budget: 64,
            ..QueryBudgets::default()
        })
    })
    .await;
    for (name, module) in [("json", "ebb_plugin_json"), ("stats", "ebb_plugin_stats")] {
        members[0]
            .put_plugin(name, Bytes::from(wasm(module)))
            .await
            .unwrap();
    }
    write_requests(&members[1]).await;
    let single = node_with_threads(1, 10_000, 2).await;
    let queries = [
        "SELECT stats.avg(json.get_float(value, '$.ms')), stats.p50(json.get_float(value, '$.ms')), \
         stats.p95(json.get_float(value, '$.ms')), stats.count_distinct(json.get(value, '$.user')), \
         stats.stddev(json.get_float(value, '$.ms')) FROM requests",
        "SELECT key, json.get(value, '$.user') FROM requests \
         WHERE json.get_float(value, '$.ms') > 900 ORDER BY key",
        "SELECT json.get(value, '$.user') AS u, stats.avg(json.get_float(value, '$.ms')) \
         FROM requests GROUP BY u ORDER BY u",
    ];
    let close = |a: &Value, b: &Value| match (a, b) {
        (Value::Float(a), Value::Float(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        (a, b) => a == b,
    };
    for sql in queries {
        let expected = rows(&single, sql).await;
        assert!(!expected.is_empty(), "{sql}");
        for (i, member) in members.iter().enumerate() {
            // A member that had not applied the upload yet when it
            // returned compiles the module on apply: wait for it, bounded.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let got = loop {
                let request = QueryRequest {
                    sql: Some(sql.into()),
                    page_size: Some(10_000),
                    ..Default::default()
                };
                match member.query(request).await {
                    Ok(page) if page.cursor.is_none() => break page.rows,
                    Ok(_) => break rows(member, sql).await,
                    Err(_) if std::time::Instant::now() < deadline => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    Err(error) => panic!("member {}: {sql}: {error}", i + 1),
                }
            };
            assert_eq!(got.len(), expected.len(), "member {}: {sql}", i + 1);
            for (row, want) in got.iter().zip(&expected) {
                assert!(
                    row.len() == want.len() && row.iter().zip(want).all(|(a, b)| close(a, b)),
                    "member {}: {sql}: {row:?} vs {want:?}",
                    i + 1
                );
            }
        }
    }
    single.shutdown().await.unwrap();
    for member in members {
        member.shutdown().await.unwrap();
    }
}
