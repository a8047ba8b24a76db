//! Use ebb as a library: open a node, write with TTLs and durability levels,
//! read, delete, batch, list tables, check health and shut down cleanly.
//!
//! Run with `make run` or `cargo run --release -p ebb-host --example embedded [data-dir]`.

use std::time::Duration;

use ebb_host::{BatchOp, BatchOutcome, Durability, Expiry, Node, NodeConfig, PutOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = std::env::args().nth(1).unwrap_or_else(|| "ebb-data".into());
    run(&data_dir).await
}

/// The walk-through over the data dir `data_dir` (`make test` runs it too).
pub async fn run(data_dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::open(NodeConfig::new(data_dir)).await?;
    let boot = node.boot_stats();
    println!(
        "opened {data_dir}: {} fragments, {} records loaded, {} had expired while down",
        node.fragment_count(),
        boot.records,
        boot.converted
    );

    let users = node.table("users")?;
    let version = users
        .put("user:1", r#"{"name":"Ada"}"#, PutOptions::default())
        .await?;
    println!("put user:1 (durability wal) -> version {version}");

    let fast = PutOptions::default().durability(Durability::Memory);
    users.put("user:2", r#"{"name":"Grace"}"#, fast).await?;
    println!("put user:2 (durability memory: acknowledged after the in-memory apply)");

    let sessions = node.table("sessions")?;
    let short = PutOptions::default().ttl(Duration::from_millis(300));
    sessions.put("session:abc", "user:1", short).await?;
    let entry = sessions
        .get("session:abc")
        .await?
        .expect("visible before its deadline");
    println!(
        "session:abc = {:?}, expires at {:?} ms",
        String::from_utf8_lossy(&entry.value),
        entry.expires_at_ms
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    println!(
        "after 400 ms session:abc is {}",
        if sessions.get("session:abc").await?.is_some() {
            "still there"
        } else {
            "gone"
        }
    );

    let outcomes = users
        .batch(
            vec![
                BatchOp::Put {
                    key: "user:3".into(),
                    value: "Edsger".into(),
                    expiry: Expiry::Never,
                },
                BatchOp::Delete {
                    key: "user:2".into(),
                },
                BatchOp::Delete {
                    key: "user:404".into(),
                },
            ],
            Durability::Wal,
        )
        .await;
    for outcome in outcomes {
        match outcome {
            Ok(BatchOutcome::Written(version)) => {
                println!("batch item: written, version {version}")
            }
            Ok(BatchOutcome::NotFound) => println!("batch item: nothing to delete"),
            Err(error) => println!("batch item failed: {error}"),
        }
    }

    for table in node.tables() {
        println!("table {}: {} live records", table.name, table.live_records);
    }
    let health = node.health().await;
    println!(
        "health: {} ({} fragments answering)",
        if health.is_healthy() {
            "ok"
        } else {
            "degraded"
        },
        health.fragments.iter().filter(|f| f.is_some()).count()
    );

    node.shutdown().await?;
    println!("shut down cleanly; run again to see the data reloaded from {data_dir}");
    Ok(())
}
