//! The embedded API's two examples (`examples/embedded.rs`,
//! `examples/plugins.rs`) run as tests: compiled into this binary rather
//! than linked as two more (about a minute of a cold build each), and run,
//! so an example that stops working fails `make test`, not its reader.

use ebb_host::{Node, NodeConfig};

// Each file's `main` reads its arguments; the tests call `run`.
#[allow(dead_code)]
#[path = "../examples/embedded.rs"]
mod embedded;
#[allow(dead_code)]
#[path = "../examples/plugins.rs"]
mod plugins;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_walk_through_runs_and_reopens_its_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    embedded::run(data_dir).await.unwrap();
    // A second run reloads what the first wrote, as the example says.
    embedded::run(data_dir).await.unwrap();
    let node = Node::open(NodeConfig::new(data_dir)).await.unwrap();
    let users = node.table("users").unwrap();
    assert!(users.get("user:1").await.unwrap().is_some());
    assert_eq!(
        users.get("user:3").await.unwrap().map(|entry| entry.value),
        Some("Edsger".into())
    );
    assert!(
        users.get("user:2").await.unwrap().is_none(),
        "the batch deleted it"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_walk_through_runs() {
    plugins::run().await.unwrap();
}
