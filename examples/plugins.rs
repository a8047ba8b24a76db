//! Use WASM plugins from the embedded API: install the bundled `json` and
//! `stats` plugins, write JSON records, and query them with plugin functions.
//!
//! Run `make plugins` first, then
//! `cargo run --release -p ebb-host --example plugins`.

use std::path::{Path, PathBuf};

use ebb_host::{Durability, Node, NodeConfig, PutOptions, QueryRequest};

fn module(name: &str) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    // The workspace's target dir, wherever this runs from.
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    let path = target.join(format!(
        "wasm32-unknown-unknown/release/ebb_plugin_{name}.wasm"
    ));
    std::fs::read(&path)
        .map_err(|e| format!("{}: {e} (run `make plugins` first)", path.display()).into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().await
}

/// The walk-through in a temporary data dir (`make test` runs it too).
pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let node = Node::open(NodeConfig::new(dir.path())).await?;

    // Installing validates, compiles and stores a new version (blocking work).
    let store = node.clone();
    let installed = tokio::task::spawn_blocking(
        move || -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
            let mut names = Vec::new();
            for name in ["json", "stats"] {
                let bytes = module(name).map_err(|e| e.to_string())?;
                let version = store.install_plugin(name, &bytes)?.version;
                names.push(format!(
                    "{} v{} ({} functions)",
                    version.name,
                    version.info.version,
                    version.manifest.functions.len()
                ));
            }
            Ok(names)
        },
    )
    .await?
    .map_err(|e| e.to_string())?;
    println!("installed: {}", installed.join(", "));

    let requests = node.table("requests")?;
    for i in 0..1000 {
        let path = ["/api/users", "/api/orders", "/health"][i % 3];
        let body = format!(r#"{{"path": "{path}", "ms": {}}}"#, (i * 37) % 500);
        requests
            .put(
                &format!("req:{i:04}"),
                body,
                PutOptions::default().durability(Durability::Memory),
            )
            .await?;
    }

    let sql = "SELECT json.get(value, '$.path') AS path, count(*) AS n, \
               stats.p95(json.get_float(value, '$.ms')) AS p95 \
               FROM requests GROUP BY path ORDER BY p95 DESC";
    let result = node
        .query(QueryRequest {
            sql: Some(sql.into()),
            ..Default::default()
        })
        .await?;
    println!("{sql}");
    for row in &result.rows {
        let cells: Vec<String> = row.iter().map(|v| v.render()).collect();
        println!("  {}", cells.join(" | "));
    }
    println!(
        "({} rows, {} records scanned, {:.1} ms)",
        result.stats.rows, result.stats.scanned, result.stats.elapsed_ms
    );
    node.shutdown().await?;
    Ok(())
}
