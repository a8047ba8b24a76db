//! Paging across requests, consistency modes, cursors and budgets, through
//! the embedded query API.

use std::sync::Arc;
use std::time::Duration;

use ebb_host::store::MemoryStore;
use ebb_host::{
    Consistency, Durability, Node, NodeConfig, PutOptions, QueryBudgets, QueryError, QueryOutput,
    QueryRequest,
};
use ebb_query::Value;

async fn node_with(budgets: QueryBudgets, rows: usize) -> Node {
    let config = NodeConfig::new("unused")
        .fragments(4)
        .query_budgets(budgets);
    let node = Node::open_with_store(config, Arc::new(MemoryStore::new()))
        .await
        .unwrap();
    let t = node.table("t").unwrap();
    let fast = PutOptions::default().durability(Durability::Memory);
    for i in 0..rows {
        t.put(&format!("k{i:04}"), format!("{}", i % 7), fast)
            .await
            .unwrap();
    }
    node
}

fn sql(text: &str, page_size: usize) -> QueryRequest {
    QueryRequest {
        sql: Some(text.into()),
        page_size: Some(page_size),
        ..Default::default()
    }
}

fn next(cursor: &QueryOutput, consistency: Option<Consistency>) -> QueryRequest {
    QueryRequest {
        cursor: cursor.cursor.clone(),
        consistency,
        ..Default::default()
    }
}

async fn all_pages(node: &Node, text: &str, page_size: usize) -> (Vec<Vec<Value>>, usize) {
    let mut output = node.query(sql(text, page_size)).await.unwrap();
    let mut rows = output.rows.clone();
    let mut pages = 1;
    while output.cursor.is_some() {
        output = node.query(next(&output, None)).await.unwrap();
        assert!(output.rows.len() <= page_size);
        rows.extend(output.rows.clone());
        pages += 1;
    }
    (rows, pages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_split_over_many_pages_equals_the_one_shot_result() {
    let node = node_with(QueryBudgets::default(), 600).await;
    for query in [
        "SELECT key, value FROM t",
        "SELECT key FROM t WHERE key >= 'k0100' AND key < 'k0400' LIMIT 150 OFFSET 20",
        "SELECT key, value FROM t ORDER BY value DESC, key LIMIT 300",
        "SELECT value, count(*), min(key) FROM t GROUP BY value ORDER BY value",
        "SELECT key, value FROM t ORDER BY key DESC",
        "SELECT key FROM t WHERE (key > 'k0100' AND key <= 'k0200') OR key >= 'k0500' ORDER BY key DESC LIMIT 150 OFFSET 20",
        "SELECT key FROM t WHERE key > 'k0123' AND value <> '3' ORDER BY key LIMIT 40",
    ] {
        let (one_shot, pages) = all_pages(&node, query, 10_000).await;
        assert_eq!(pages, 1, "{query}");
        let (paged, pages) = all_pages(&node, query, 7).await;
        assert!(pages > 1 || one_shot.len() <= 7, "{query}");
        assert_eq!(paged, one_shot, "{query}");
    }
    let (rows, _) = all_pages(&node, "SELECT key FROM t", 13).await;
    assert_eq!(rows.len(), 600);
    assert!(
        rows.windows(2).all(|w| w[0][0].total_cmp(&w[1][0]).is_lt()),
        "key order, no duplicates"
    );
    let (reversed, _) = all_pages(&node, "SELECT key FROM t ORDER BY key DESC", 13).await;
    assert_eq!(reversed.len(), 600);
    assert!(
        reversed
            .windows(2)
            .all(|w| w[0][0].total_cmp(&w[1][0]).is_gt()),
        "descending key order, no duplicates"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_ordered_limits_and_keyset_pages_visit_what_they_return_not_the_table() {
    let node = node_with(QueryBudgets::default(), 2000).await;
    let run = |text: &'static str| {
        let node = node.clone();
        async move { node.query(sql(text, 1000)).await.unwrap() }
    };
    let keys = |output: &QueryOutput| -> Vec<String> {
        output.rows.iter().map(|r| r[0].render()).collect()
    };
    // Four partitions: the merge, inline, visits the rows it passes (LIMIT
    // + OFFSET) and one record more in each partition (its next), in the
    // result's direction, whatever the table holds.
    let first = run("SELECT key FROM t ORDER BY key LIMIT 3").await;
    assert_eq!(keys(&first), ["k0000", "k0001", "k0002"]);
    assert!(
        first.stats.scanned <= 3 + 4,
        "scanned {}",
        first.stats.scanned
    );
    let last = run("SELECT key FROM t ORDER BY key DESC LIMIT 3 OFFSET 1").await;
    assert_eq!(keys(&last), ["k1998", "k1997", "k1996"]);
    assert!(
        last.stats.scanned <= 4 + 4,
        "scanned {}",
        last.stats.scanned
    );
    // Keyset pagination starts at its key in every partition.
    let keyset = run("SELECT key FROM t WHERE key > 'k1500' ORDER BY key LIMIT 5").await;
    assert_eq!(keys(&keyset), ["k1501", "k1502", "k1503", "k1504", "k1505"]);
    assert!(
        keyset.stats.scanned <= 5 + 4,
        "scanned {}",
        keyset.stats.scanned
    );
    let before = run("SELECT key FROM t WHERE key < 'k0500' ORDER BY key DESC LIMIT 2").await;
    assert_eq!(keys(&before), ["k0499", "k0498"]);
    assert!(
        before.stats.scanned <= 2 + 4,
        "scanned {}",
        before.stats.scanned
    );
    // EXPLAIN names the strategy.
    let explain = run("EXPLAIN SELECT key FROM t ORDER BY key DESC LIMIT 3").await;
    assert!(
        explain
            .rows
            .iter()
            .any(|r| r[0].render().contains("descending key order")),
        "{:?}",
        explain.rows
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inline_merge_hands_over_to_pages_at_its_bounds_with_the_same_answer() {
    // Four partitions: the inline merge may visit 4 x 64 records and read
    // 4 x 16 KiB of values; past either, pages go on from the last row
    // passed. Tombstones use up visits without making rows; 1 KiB values
    // use up the bytes.
    let node = node_with(QueryBudgets::default(), 0).await;
    let t = node.table("t").unwrap();
    let fast = PutOptions::default().durability(Durability::Memory);
    let mut live = Vec::new();
    for i in 0..900 {
        let key = format!("k{i:04}");
        t.put(&key, "v".repeat(1024), fast).await.unwrap();
        if i % 3 == 0 {
            live.push(key);
        } else {
            t.delete(&key, Durability::Memory).await.unwrap();
        }
    }
    let keys =
        |rows: &[Vec<Value>]| -> Vec<String> { rows.iter().map(|r| r[0].render()).collect() };
    let mut descending = live.clone();
    descending.reverse();
    for (query, expected) in [
        // 300 rows among 900 records: past the visits.
        ("SELECT key FROM t ORDER BY key", &live[..]),
        ("SELECT key FROM t ORDER BY key DESC", &descending[..]),
        (
            "SELECT key FROM t ORDER BY key LIMIT 200 OFFSET 90",
            &live[90..290],
        ),
        (
            "SELECT key FROM t ORDER BY key DESC LIMIT 150 OFFSET 100",
            &descending[100..250],
        ),
        // Values read: past the bytes after about 64 rows.
        (
            "SELECT key, value FROM t ORDER BY key LIMIT 120 OFFSET 30",
            &live[30..150],
        ),
        (
            "SELECT key, length(value) FROM t WHERE key > 'k0300' ORDER BY key LIMIT 100",
            &live[101..201],
        ),
        (
            "SELECT key, value FROM t WHERE value LIKE 'v%' ORDER BY key DESC LIMIT 90",
            &descending[..90],
        ),
    ] {
        let (one_shot, pages) = all_pages(&node, query, 10_000).await;
        assert_eq!(pages, 1, "{query}");
        assert_eq!(keys(&one_shot), expected, "{query}");
        for row in &one_shot {
            match row.get(1) {
                None | Some(Value::Int(1024)) => {}
                Some(Value::Bytes(value)) => assert_eq!(value[..], [b'v'; 1024], "{query}"),
                other => panic!("{query}: unexpected value {other:?}"),
            }
        }
        // Pages of 7 end inside the inline merge and continue from their
        // cursors.
        let (paged, _) = all_pages(&node, query, 7).await;
        assert_eq!(paged, one_shot, "{query}");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_between_pages_fails_guarded_and_continues_relaxed() {
    let node = node_with(QueryBudgets::default(), 100).await;
    let first = node.query(sql("SELECT key FROM t", 10)).await.unwrap();
    assert_eq!(first.rows.len(), 10);
    node.table("t")
        .unwrap()
        .put("k0050", "changed", PutOptions::default())
        .await
        .unwrap();
    node.table("t")
        .unwrap()
        .put("k9999", "new", PutOptions::default())
        .await
        .unwrap();

    match node.query(next(&first, None)).await {
        Err(QueryError::QueryChanged { .. }) => {}
        other => panic!("guarded continuation must fail, got {other:?}"),
    }
    let mut output = node
        .query(next(&first, Some(Consistency::Relaxed)))
        .await
        .unwrap();
    let mut keys: Vec<Value> = first.rows.iter().map(|r| r[0].clone()).collect();
    keys.extend(output.rows.iter().map(|r| r[0].clone()));
    while output.cursor.is_some() {
        output = node.query(next(&output, None)).await.unwrap();
        keys.extend(output.rows.iter().map(|r| r[0].clone()));
    }
    assert_eq!(
        keys.len(),
        101,
        "every key once, including the one written after the first page"
    );
    assert!(keys.windows(2).all(|w| w[0].total_cmp(&w[1]).is_lt()));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_records_never_appear() {
    let node = node_with(QueryBudgets::default(), 0).await;
    let t = node.table("t").unwrap();
    t.put("gone", "x", PutOptions::default().expires_at_ms(1))
        .await
        .unwrap();
    t.put(
        "soon",
        "x",
        PutOptions::default().ttl(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    t.put("kept", "x", PutOptions::default()).await.unwrap();
    let before = node.query(sql("SELECT key FROM t", 100)).await.unwrap();
    assert_eq!(
        before.rows,
        vec![vec![Value::text("kept")], vec![Value::text("soon")]]
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after = node
        .query(sql("SELECT key, count(*) FROM t GROUP BY key", 100))
        .await
        .unwrap();
    assert_eq!(after.rows, vec![vec![Value::text("kept"), Value::Int(1)]]);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_tampered_and_garbage_cursors_are_refused() {
    let node = node_with(QueryBudgets::default(), 50).await;
    let first = node.query(sql("SELECT key FROM t", 10)).await.unwrap();
    let cursor = first.cursor.clone().unwrap();

    let other_query = QueryRequest {
        sql: Some("SELECT value FROM t".into()),
        cursor: Some(cursor.clone()),
        ..Default::default()
    };
    assert!(matches!(
        node.query(other_query).await,
        Err(QueryError::InvalidCursor(_))
    ));

    let mut tampered = cursor.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = QueryRequest {
        cursor: Some(String::from_utf8(tampered).unwrap()),
        ..Default::default()
    };
    assert!(matches!(
        node.query(tampered).await,
        Err(QueryError::InvalidCursor(_))
    ));

    let garbage = QueryRequest {
        cursor: Some("not-a-cursor".into()),
        ..Default::default()
    };
    assert!(matches!(
        node.query(garbage).await,
        Err(QueryError::InvalidCursor(_))
    ));

    let other_node = node_with(QueryBudgets::default(), 50).await;
    let foreign = QueryRequest {
        cursor: Some(cursor),
        ..Default::default()
    };
    assert!(
        matches!(
            other_node.query(foreign).await,
            Err(QueryError::InvalidCursor(_))
        ),
        "another data dir's cursor"
    );
    node.shutdown().await.unwrap();
    other_node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_fail_the_query_with_their_name() {
    let tight = QueryBudgets {
        max_scanned_records: 300,
        max_groups: 5,
        max_order_buffer: 50,
        ..QueryBudgets::default()
    };
    let node = node_with(tight, 400).await;
    let budget_of = |result: Result<QueryOutput, QueryError>| match result {
        Err(QueryError::Budget { budget, .. }) => budget,
        other => panic!("expected a budget error, got {other:?}"),
    };
    assert_eq!(
        budget_of(node.query(sql("SELECT count(value) FROM t", 10)).await),
        "max_scanned_records"
    );
    assert_eq!(
        budget_of(
            node.query(sql(
                "SELECT key, count(*) FROM t WHERE key < 'k0100' GROUP BY key",
                10
            ))
            .await
        ),
        "max_groups"
    );
    assert_eq!(
        budget_of(
            node.query(sql(
                "SELECT key FROM t WHERE key < 'k0100' ORDER BY value",
                10
            ))
            .await
        ),
        "max_order_buffer"
    );
    // With a LIMIT, ORDER BY keeps only the top rows and fits.
    let top = node
        .query(sql(
            "SELECT key FROM t WHERE key < 'k0100' ORDER BY value DESC, key LIMIT 3",
            10,
        ))
        .await
        .unwrap();
    assert_eq!(top.rows.len(), 3);
    assert!(
        node.query(sql("SELECT key FROM t WHERE key = 'k0001'", 10))
            .await
            .is_ok(),
        "point queries scan one record"
    );
    node.shutdown().await.unwrap();

    let instant = QueryBudgets {
        timeout: Duration::ZERO,
        ..QueryBudgets::default()
    };
    let node = node_with(instant, 10).await;
    assert!(matches!(
        node.query(sql("SELECT key FROM t", 10)).await,
        Err(QueryError::Timeout(_))
    ));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_queries_touch_one_fragment_and_explain_says_so() {
    let node = node_with(QueryBudgets::default(), 100).await;
    let point = node
        .query(sql("SELECT key, value FROM t WHERE key = 'k0042'", 10))
        .await
        .unwrap();
    assert_eq!(
        point.rows,
        vec![vec![Value::text("k0042"), Value::Bytes("0".into())]]
    );
    assert_eq!(point.stats.pages, 1);
    assert_eq!(point.stats.scanned, 1);
    let explain = node
        .query(sql("EXPLAIN SELECT key FROM t WHERE key = 'k0042'", 10))
        .await
        .unwrap();
    let text: Vec<String> = explain.rows.iter().map(|r| r[0].render()).collect();
    assert!(
        text.iter()
            .any(|l| l.starts_with("fragments: [") && l.contains("pruned")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|l| l.contains("pushed down: (key = 'k0042')")),
        "{text:?}"
    );
    node.shutdown().await.unwrap();
}

/// `test.pages(key)`: the first key of every batch it folded, in the order
/// partial states merged. Its merge is associative but not commutative, and
/// each update waits a random moment, so pages finish in a different order
/// every run.
#[derive(Debug)]
struct MergeTrace;

fn trace_of(state: &ebb_query::AggState) -> String {
    match state.first() {
        Some(Value::Text(t)) => t.to_string(),
        _ => String::new(),
    }
}

impl ebb_query::AggregateFunction for MergeTrace {
    fn name(&self) -> &str {
        "test.pages"
    }

    fn arity(&self) -> ebb_query::Arity {
        ebb_query::Arity::Exact(1)
    }

    fn init(&self) -> Result<ebb_query::AggState, ebb_query::FunctionError> {
        Ok(vec![Value::text("")])
    }

    fn update(
        &self,
        state: &mut ebb_query::AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), ebb_query::FunctionError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        std::thread::sleep(Duration::from_micros(u64::from(nanos % 3000)));
        if rows > 0 {
            let first = args[0][0].render();
            *state = vec![Value::text(format!("{}{first};", trace_of(state)))];
        }
        Ok(())
    }

    fn merge(
        &self,
        left: ebb_query::AggState,
        right: ebb_query::AggState,
    ) -> Result<ebb_query::AggState, ebb_query::FunctionError> {
        Ok(vec![Value::text(format!(
            "{}{}",
            trace_of(&left),
            trace_of(&right)
        ))])
    }

    fn finish(&self, state: ebb_query::AggState) -> Result<Value, ebb_query::FunctionError> {
        Ok(Value::text(trace_of(&state)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_aggregates_merge_in_the_same_order_every_run() {
    // Small pages over 8 fragments: dozens of pages, finishing in a random
    // order; the result must not depend on that order.
    let budgets = QueryBudgets {
        page_visit_budget: 16,
        max_page_visit_budget: 32,
        ..QueryBudgets::default()
    };
    let config = NodeConfig::new("unused")
        .fragments(8)
        .query_budgets(budgets);
    let node = Node::open_with_store(config, Arc::new(MemoryStore::new()))
        .await
        .unwrap();
    node.register_aggregate("test", "pages", Arc::new(MergeTrace))
        .unwrap();
    let t = node.table("t").unwrap();
    let fast = PutOptions::default().durability(Durability::Memory);
    for i in 0..600 {
        t.put(&format!("k{i:04}"), "v", fast).await.unwrap();
    }
    let text = "SELECT test.pages(key) FROM t";
    let (first, _) = all_pages(&node, text, 10).await;
    let Value::Text(trace) = &first[0][0] else {
        panic!("a text result, got {first:?}");
    };
    assert!(trace.matches(';').count() > 20, "many pages: {trace}");
    for _ in 0..5 {
        let (again, _) = all_pages(&node, text, 10).await;
        assert_eq!(again, first);
    }
    node.shutdown().await.unwrap();
}

fn relaxed(text: &str, page_size: usize) -> QueryRequest {
    QueryRequest {
        consistency: Some(Consistency::Relaxed),
        ..sql(text, page_size)
    }
}

/// Every page of `request`, continued relaxed, with `between` run after each
/// page: the rows in the order returned.
async fn relaxed_pages(
    node: &Node,
    request: QueryRequest,
    mut between: impl AsyncFnMut(usize),
) -> Vec<Vec<Value>> {
    let mut output = node.query(request).await.unwrap();
    let mut rows = output.rows.clone();
    let mut page = 0;
    while output.cursor.is_some() {
        between(page).await;
        page += 1;
        output = node
            .query(next(&output, Some(Consistency::Relaxed)))
            .await
            .unwrap();
        rows.extend(output.rows.clone());
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaxed_continuations_in_key_order_return_every_key_once_under_a_concurrent_writer() {
    let node = node_with(QueryBudgets::default(), 300).await;
    let t = node.table("t").unwrap();
    // A writer runs through every query: new keys on both sides of any
    // position, and rewrites of existing keys with their own values (so
    // filters keep matching the same keys).
    // The queries start only once the writer has written, so a busy machine
    // that is slow to schedule the writer cannot make it miss them all.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let writer = {
        let (t, stop, started) = (t.clone(), stop.clone(), started.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let fast = PutOptions::default().durability(Durability::Memory);
                t.put(
                    &format!("k{:04}", n % 300),
                    format!("{}", (n % 300) % 7),
                    fast,
                )
                .await
                .unwrap();
                t.put(&format!("k{:04}w{n}", (n * 37) % 300), "w", fast)
                    .await
                    .unwrap();
                n += 1;
                if n == 1 {
                    started.notify_one();
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            n
        })
    };
    tokio::time::timeout(Duration::from_secs(30), started.notified())
        .await
        .expect("the writer wrote within 30 s");
    for (query, descending, originals) in [
        ("SELECT key FROM t", false, 300),
        ("SELECT key FROM t ORDER BY key", false, 300),
        ("SELECT key FROM t ORDER BY key DESC", true, 300),
        (
            "SELECT key, value FROM t WHERE CAST(value AS TEXT) <> '3' ORDER BY key DESC, value",
            true,
            300 - 300 / 7 - 1,
        ),
    ] {
        let rows = relaxed_pages(&node, relaxed(query, 17), async |page| {
            // And a write between every two pages, behind and ahead.
            let fast = PutOptions::default().durability(Durability::Memory);
            t.put(&format!("k0000b{page}"), "b", fast).await.unwrap();
            t.put(&format!("k9999b{page}"), "b", fast).await.unwrap();
        })
        .await;
        let keys: Vec<String> = rows.iter().map(|r| r[0].render()).collect();
        let ordered = keys
            .windows(2)
            .all(|w| if descending { w[0] > w[1] } else { w[0] < w[1] });
        assert!(ordered, "{query}: strictly ordered, so no key twice");
        let original = keys
            .iter()
            .filter(|k| k.len() == 5 && k.starts_with('k'))
            .count();
        assert_eq!(original, originals, "{query}: no original key skipped");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.await.unwrap() > 0, "the writer ran");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaxed_mode_refuses_orders_it_cannot_continue_exactly() {
    let node = node_with(QueryBudgets::default(), 50).await;
    for query in [
        "SELECT key FROM t ORDER BY value",
        "SELECT key FROM t ORDER BY length(key), key",
        "SELECT value, count(*) FROM t GROUP BY value",
        "SELECT count(*) FROM t",
    ] {
        let refused = |result: Result<QueryOutput, QueryError>| match result {
            Err(QueryError::InvalidRequest(message)) => {
                assert!(message.contains("key order"), "{query}: {message}")
            }
            other => panic!("{query}: relaxed must be refused, got {other:?}"),
        };
        refused(node.query(relaxed(query, 5)).await);
        // A guarded first page continued relaxed is refused too; guarded
        // continuations still work.
        let first = node.query(sql(query, 5)).await.unwrap();
        if first.cursor.is_some() {
            refused(node.query(next(&first, Some(Consistency::Relaxed))).await);
            node.query(next(&first, None)).await.unwrap();
        }
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_a_query_builds_are_bounded_per_page_and_a_small_limit_builds_few() {
    let node = node_with(QueryBudgets::default(), 2000).await;
    let big = Value::text("x".repeat(1_000_000));
    let four = |text: &str| QueryRequest {
        params: vec![big.clone(), big.clone(), big.clone(), big.clone()],
        ..sql(text, 1000)
    };
    // LIMIT 2 evaluates two rows per partition, not a full page of each.
    let two = node
        .query(four("SELECT ? || ? || ? || ? FROM t LIMIT 2"))
        .await
        .unwrap();
    assert_eq!(two.rows.len(), 2);
    assert!(two.rows.iter().all(|r| r[0].render().len() == 4_000_000));
    assert!(two.stats.scanned <= 2 * 4, "scanned {}", two.stats.scanned);
    // Without it, a page would build gigabytes: refused, naming the budget.
    match node.query(four("SELECT ? || ? || ? || ? FROM t")).await {
        Err(QueryError::Budget { budget, limit, .. }) => {
            assert_eq!((budget, limit), ("max_page_bytes", 64 << 20))
        }
        other => panic!("expected max_page_bytes, got {other:?}"),
    }
    // Values built by nested concatenations count as they are built.
    match node
        .query(QueryRequest {
            params: vec![big.clone()],
            ..sql(
                "SELECT (((($1||$1)||($1||$1))||(($1||$1)||($1||$1)))||((($1||$1)||($1||$1))||(($1||$1)||($1||$1))))||(((($1||$1)||($1||$1))||(($1||$1)||($1||$1)))||((($1||$1)||($1||$1))||(($1||$1)||($1||$1)))) FROM t LIMIT 1",
                10,
            )
        })
        .await
    {
        Err(QueryError::Budget { budget, .. }) => assert_eq!(budget, "max_page_bytes"),
        other => panic!("expected max_page_bytes, got {other:?}"),
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_holding_too_much_fails_with_max_query_bytes() {
    let tight = QueryBudgets {
        max_query_bytes: 64 * 1024,
        ..QueryBudgets::default()
    };
    let node = node_with(tight, 2000).await;
    let budget_of = |result: Result<QueryOutput, QueryError>| match result {
        Err(QueryError::Budget { budget, .. }) => budget,
        other => panic!("expected a budget error, got {other:?}"),
    };
    // Parameters count.
    let params = QueryRequest {
        params: vec![Value::text("p".repeat(100_000))],
        ..sql("SELECT key FROM t WHERE value = ?", 10)
    };
    assert_eq!(budget_of(node.query(params).await), "max_query_bytes");
    // The ORDER BY buffer counts.
    assert_eq!(
        budget_of(
            node.query(sql("SELECT key, key || key FROM t ORDER BY value", 10))
                .await
        ),
        "max_query_bytes"
    );
    // Group keys count.
    assert_eq!(
        budget_of(
            node.query(sql(
                "SELECT key || key || key || key, count(*) FROM t GROUP BY 1",
                10
            ))
            .await
        ),
        "max_query_bytes"
    );
    // Small queries are unaffected.
    let fine = node
        .query(sql("SELECT value, count(*) FROM t GROUP BY value", 10))
        .await
        .unwrap();
    assert_eq!(fine.rows.len(), 7);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_page_budget_still_pages_queries_that_build_nothing_and_refuses_the_rest() {
    let tiny = QueryBudgets {
        max_page_bytes: 1,
        ..QueryBudgets::default()
    };
    let node = node_with(tiny, 300).await;
    let (rows, _) = all_pages(&node, "SELECT key, value FROM t", 50).await;
    assert_eq!(rows.len(), 300);
    match node.query(sql("SELECT key || 'x' FROM t", 50)).await {
        Err(QueryError::Budget { budget, .. }) => assert_eq!(budget, "max_page_bytes"),
        other => panic!("expected max_page_bytes, got {other:?}"),
    }
    node.shutdown().await.unwrap();
}

/// The bytes a row counts against `max_result_bytes` (as the executor
/// counts them: text as is, bytes as base64, anything else 8).
fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|v| match v {
            Value::Text(t) => t.len() + 8,
            Value::Bytes(b) => b.len() * 4 / 3 + 16,
            _ => 8,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_end_early_at_max_result_bytes_and_one_row_over_it_fails() {
    let budgets = QueryBudgets {
        max_result_bytes: 200,
        ..QueryBudgets::default()
    };
    let node = node_with(budgets, 100).await;
    // Rows of 13 + 17 bytes: a response of 100 rows would be 3000 bytes.
    for query in [
        "SELECT key, value FROM t",
        "SELECT key, value FROM t ORDER BY value DESC, key",
    ] {
        let mut output = node.query(sql(query, 100)).await.unwrap();
        let mut rows = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let bytes: usize = output.rows.iter().map(|r| row_bytes(r)).sum();
            assert!(bytes <= 200, "{query}: a response of {bytes} bytes");
            assert!(
                !output.rows.is_empty(),
                "{query}: every response returns a row"
            );
            rows.extend(output.rows.clone());
            match output.cursor {
                Some(_) => output = node.query(next(&output, None)).await.unwrap(),
                None => break,
            }
        }
        assert_eq!(rows.len(), 100, "{query}");
        assert!(pages >= 15, "{query}: {pages} responses");
    }
    let t = node.table("t").unwrap();
    t.put("k0050x", "x".repeat(300), PutOptions::default())
        .await
        .unwrap();
    let over = |result: Result<QueryOutput, QueryError>| match result {
        Err(QueryError::Budget {
            budget,
            limit,
            message,
        }) => {
            assert_eq!((budget, limit), ("max_result_bytes", 200));
            assert!(message.contains("one result row is"), "{message}");
        }
        other => panic!("expected max_result_bytes, got {other:?}"),
    };
    over(
        node.query(sql("SELECT value FROM t WHERE key = 'k0050x'", 10))
            .await,
    );
    // Behind smaller rows, the page ends before the big one; the next
    // response, which starts with it, fails.
    let first = node
        .query(sql("SELECT key, value FROM t WHERE key >= 'k0049'", 10))
        .await
        .unwrap();
    assert_eq!(first.rows.len(), 2, "k0049 and k0050, then the big row");
    over(node.query(next(&first, None)).await);
    node.shutdown().await.unwrap();
}

/// The first page of `query` (`page_size` rows), then continuing it
/// guarded, with no write in between: the rows of every page.
async fn guarded_pages(node: &Node, query: &str, page_size: usize) -> Vec<Vec<Vec<Value>>> {
    let mut output = node.query(sql(query, page_size)).await.unwrap();
    let mut pages = vec![output.rows.clone()];
    while output.cursor.is_some() {
        output = node
            .query(next(&output, Some(Consistency::Guarded)))
            .await
            .unwrap();
        pages.push(output.rows.clone());
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_cursors_over_order_by_and_aggregates_return_exactly_the_rest_or_conflict() {
    let node = node_with(QueryBudgets::default(), 300).await;
    for (query, page_size) in [
        ("SELECT key, value FROM t ORDER BY value DESC, key", 40),
        (
            "SELECT key FROM t ORDER BY value, key DESC LIMIT 100 OFFSET 7",
            30,
        ),
        ("SELECT value, count(*), min(key) FROM t GROUP BY value", 3),
        (
            "SELECT value, count(*) AS n FROM t GROUP BY value HAVING n > 40 ORDER BY value DESC",
            2,
        ),
    ] {
        let whole = node.query(sql(query, 10_000)).await.unwrap();
        assert!(whole.cursor.is_none());
        assert!(whole.rows.len() > page_size, "{query}: pages are needed");
        // No write between pages: each continuation returns exactly the
        // rows that follow, in order.
        let pages = guarded_pages(&node, query, page_size).await;
        assert!(pages.iter().all(|p| p.len() <= page_size), "{query}");
        assert_eq!(pages.concat(), whole.rows, "{query}");

        // A write between pages, to a partition the query reads: the guarded
        // continuation answers the conflict, and a write to another table
        // does not.
        let first = node.query(sql(query, page_size)).await.unwrap();
        assert!(first.cursor.is_some());
        node.table("other")
            .unwrap()
            .put("k0001", "x", PutOptions::default())
            .await
            .unwrap();
        let rest = node.query(next(&first, None)).await.unwrap();
        assert_eq!(
            rest.rows,
            whole.rows[page_size..(2 * page_size).min(whole.rows.len())],
            "{query}"
        );
        node.table("t")
            .unwrap()
            .put("k0001", "9", PutOptions::default())
            .await
            .unwrap();
        match node.query(next(&first, None)).await {
            Err(QueryError::QueryChanged { fragment }) => {
                assert_eq!(fragment, node.fragment_of("k0001"), "{query}")
            }
            other => {
                panic!("{query}: a guarded continuation after a write must conflict, got {other:?}")
            }
        }
        // Put the value back: the partition still changed (its revision moved).
        node.table("t")
            .unwrap()
            .put("k0001", "1", PutOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(
                node.query(next(&first, None)).await,
                Err(QueryError::QueryChanged { .. })
            ),
            "{query}: the same value written again still changes the partition"
        );
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_pages_past_the_inline_bounds_run_on_the_query_threads_with_the_same_answer() {
    // Small key-ordered pages of built-ins run inline while they read at
    // most 16 KiB of values and build at most 1 MiB; past either, the page
    // runs on a query thread instead. The answer is the same either way.
    let node = node_with(QueryBudgets::default(), 0).await;
    let t = node.table("t").unwrap();
    let fast = PutOptions::default().durability(Durability::Memory);
    let mut expected = Vec::new();
    for i in 0..60 {
        // Every third value is larger than a whole inline page may read.
        let len = if i % 3 == 0 { 20_000 } else { 10 + i };
        let key = format!("k{i:04}");
        t.put(&key, "v".repeat(len), fast).await.unwrap();
        expected.push((key, len as i64));
    }
    let rows = |output: QueryOutput| -> Vec<(String, i64)> {
        output
            .rows
            .iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Text(k), Value::Int(n)) => (k.to_string(), *n),
                other => panic!("unexpected row {other:?}"),
            })
            .collect()
    };
    let ascending = node
        .query(sql(
            "SELECT key, length(value) FROM t ORDER BY key LIMIT 7",
            100,
        ))
        .await
        .unwrap();
    assert_eq!(rows(ascending), expected[..7]);
    let descending = node
        .query(sql(
            "SELECT key, length(value) FROM t ORDER BY key DESC LIMIT 7",
            100,
        ))
        .await
        .unwrap();
    let mut last: Vec<_> = expected[53..].to_vec();
    last.reverse();
    assert_eq!(rows(descending), last);
    let filtered = node
        .query(sql(
            "SELECT key, length(value) FROM t WHERE length(value) > 1000 ORDER BY key LIMIT 4",
            100,
        ))
        .await
        .unwrap();
    let big: Vec<_> = expected
        .iter()
        .filter(|(_, n)| *n > 1000)
        .take(4)
        .cloned()
        .collect();
    assert_eq!(rows(filtered), big);
    // A page of 25 records (LIMIT 60 over 4 partitions) whose values are
    // doubled seven times builds about 100 KB a row, past the inline 1 MiB
    // in one batch: the page runs on a query thread, with the full page
    // budget, and answers the same.
    for i in 0..60 {
        t.put(&format!("w{i:04}"), "w".repeat(400), fast)
            .await
            .unwrap();
    }
    let mut doubled = "value".to_string();
    for _ in 0..7 {
        doubled = format!("({doubled} || {doubled})");
    }
    let built = node
        .query(sql(
            &format!("SELECT key, length({doubled}) FROM t WHERE key >= 'w' ORDER BY key LIMIT 60"),
            100,
        ))
        .await
        .unwrap();
    let keys: Vec<_> = (0..60).map(|i| (format!("w{i:04}"), 400 * 128)).collect();
    assert_eq!(rows(built), keys);
    // printf may build far more than its arguments within one call: its
    // pages never run inline, and answer the same.
    let printed = node
        .query(sql(
            "SELECT key, length(printf('%0600000d', 1)) FROM t ORDER BY key LIMIT 3",
            100,
        ))
        .await
        .unwrap();
    let keys: Vec<_> = expected[..3]
        .iter()
        .map(|(k, _)| (k.clone(), 600_000))
        .collect();
    assert_eq!(rows(printed), keys);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_queries_with_other_parameters_get_their_own_answers() {
    // Plans of built-ins are cached by SQL text and parameters.
    let node = node_with(QueryBudgets::default(), 20).await;
    for round in 0..2 {
        for i in [3, 11, 3, 17] {
            let output = node
                .query(QueryRequest {
                    params: vec![Value::text(format!("k{i:04}"))],
                    ..sql("SELECT key, value FROM t WHERE key = ?", 10)
                })
                .await
                .unwrap();
            assert_eq!(
                output.rows,
                vec![vec![
                    Value::text(format!("k{i:04}")),
                    Value::Bytes(format!("{}", i % 7).into_bytes().into())
                ]],
                "round {round}, key {i}"
            );
        }
    }
    node.shutdown().await.unwrap();
}
