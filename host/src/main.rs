//! The `ebb` binary: command-line entry point.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ebb_host::{Node, NodeConfig};

#[derive(Parser)]
#[command(
    name = "ebb",
    version,
    about = "ebb: a key/value database extended with WebAssembly"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open a data directory and run the node until SIGINT or SIGTERM.
    Serve {
        /// Data directory (created if missing).
        #[arg(long, default_value = "ebb-data", env = "EBB_DATA_DIR")]
        data_dir: PathBuf,
        /// Fragment count of a new data dir; must match an existing one.
        #[arg(long)]
        fragments: Option<u32>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve {
                data_dir,
                fragments,
            } => serve(data_dir, fragments).await,
        }
    })
}

async fn serve(data_dir: PathBuf, fragments: Option<u32>) -> ExitCode {
    let mut config = NodeConfig::new(data_dir);
    config.fragments = fragments;
    let node = match Node::open(config).await {
        Ok(node) => node,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let boot = node.boot_stats();
    println!(
        "ebb node {} open: data dir {}, {} fragments, {} records loaded ({} expired while down)",
        node.node_id(),
        node.data_dir().display(),
        node.fragment_count(),
        boot.records,
        boot.converted
    );
    println!("the HTTP API is not part of this build yet; press Ctrl-C to stop");
    wait_for_signal().await;
    println!("shutting down (a second signal exits at once)");
    let shutdown = node.shutdown();
    tokio::select! {
        result = shutdown => match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: shutdown failed: {error}");
                ExitCode::FAILURE
            }
        },
        _ = wait_for_signal() => {
            eprintln!("second signal: exiting without finishing shutdown");
            ExitCode::from(130)
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
