//! `ebb serve`: open the node, serve HTTP, shut down gracefully on a signal.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::duration::{HumanDuration, parse_duration, positive_duration};
use crate::cluster::{ClusterListener, HttpTransport, serve_cluster};
use crate::http::auth::Auth;
use crate::http::tls::Tls;
use crate::http::tokens::Tokens;
use crate::http::{App, AppState, HttpLimits, serve};
use ebb_host::Node;
use ebb_host::cluster::ClusterConfig;
use ebb_host::node::config::{ClusterSetup, NodeConfig};

/// Options of `ebb serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:7070", env = "EBB_LISTEN")]
    pub listen: SocketAddr,
    /// Data directory (created if missing).
    #[arg(long, default_value = "ebb-data", env = "EBB_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Fragment count of a new data dir (default 16); must match an existing one.
    #[arg(long)]
    pub fragments: Option<u32>,
    /// Require `Authorization: Bearer <token>` on every /v1 route: a
    /// token with every scope on every table (beside any of --tokens).
    #[arg(long, env = "EBB_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// Scoped tokens: a JSON file of token hashes with their scopes (read,
    /// write, admin) and tables (`ebb token new` writes entries); reloaded
    /// on SIGHUP. See docs/security.md.
    #[arg(long, env = "EBB_TOKENS")]
    pub tokens: Option<PathBuf>,
    /// Serve /metrics without a token even when tokens are required.
    #[arg(long)]
    pub metrics_open: bool,
    /// Serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate chain,
    /// leaf first; needs --tls-key. Reloaded with the key on SIGHUP.
    #[arg(long, env = "EBB_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "EBB_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Do not serve the web console at `/` (the API is unchanged).
    #[arg(long)]
    pub no_console: bool,
    /// Allow browser pages from this origin (e.g. https://app.example.com)
    /// to call the API (CORS); repeatable. None by default.
    #[arg(long = "cors-origin")]
    pub cors_origins: Vec<String>,
    /// Largest value in bytes (at most 16 MiB).
    #[arg(long, default_value_t = ebb_host::node::config::DEFAULT_MAX_VALUE_BYTES)]
    pub max_value_bytes: usize,
    /// Largest batch request body in bytes.
    #[arg(long, default_value_t = HttpLimits::default().max_body_bytes)]
    pub max_body_bytes: usize,
    /// Most items in one batch request.
    #[arg(long, default_value_t = HttpLimits::default().max_batch_items)]
    pub max_batch_items: usize,
    /// How often buffered (`memory`) writes are flushed, e.g. 100ms.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    pub flush_interval: Duration,
    /// The cleaner's fallback sweep interval (it also wakes at deadlines).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub clean_interval: Duration,
    /// Purge tombstones (deletes, expired records) once they stood this
    /// long, e.g. 60s, 10m; 0s purges them at the cleaner's next run.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub tombstone_retention: Duration,
    /// Longest a SQL query may run, e.g. 30s.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub query_timeout: Duration,
    /// Linear memory per plugin instance, in MiB.
    #[arg(long, default_value_t = (ebb_host::plugin::PluginLimits::default().max_memory_bytes >> 20) as u64)]
    pub plugin_memory_mib: u64,
    /// Deadline (CPU time) of one plugin call from SQL (a batch of rows), e.g. 100ms.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    pub plugin_deadline: Duration,
    /// Threads that run query work calling plugins (1 to 256; default: the
    /// machine's cores). More wait their turn.
    #[arg(long, default_value_t = ebb_host::plugin::PluginLimits::default().threads)]
    pub plugin_threads: usize,
    /// Deadline (CPU time) of one expiry handler call (a batch of events), e.g. 1s.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub expiry_deadline: Duration,
    /// Delay before the first retry of a failed expiry event; it doubles per
    /// attempt (with jitter) up to --expiry-backoff-max.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    pub expiry_backoff: Duration,
    /// Longest delay between two attempts of an expiry event.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub expiry_backoff_max: Duration,
    /// Expiry handler calls running at once over the node (1 to 256).
    #[arg(long, default_value_t = ebb_host::expiry::ExpiryConfig::default().concurrency)]
    pub expiry_concurrency: usize,
    /// Largest plugin module upload in bytes.
    #[arg(long, default_value_t = ebb_host::plugin::PluginLimits::default().max_module_bytes)]
    pub max_plugin_bytes: usize,
    /// Install (or update) every `*.wasm` in this directory at start; the
    /// plugin name is the file name without `.wasm` and an `ebb_plugin_` prefix.
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// Load a small demo table `requests` (JSON values) when it is empty.
    #[arg(long)]
    pub demo: bool,
    /// Most records one SQL query may visit.
    #[arg(long, default_value_t = ebb_host::exec::QueryBudgets::default().max_scanned_records)]
    pub max_scanned_records: u64,
    /// Bytes of values one page of a SQL query may build.
    #[arg(long, default_value_t = ebb_host::exec::QueryBudgets::default().max_page_bytes)]
    pub max_page_bytes: usize,
    /// Bytes one SQL query may hold at once (parameters, buffered rows, groups).
    #[arg(long, default_value_t = ebb_host::exec::QueryBudgets::default().max_query_bytes)]
    pub max_query_bytes: usize,
    /// Versions recorded per plugin, the current one included (0 counts as
    /// 1); older ones are deleted.
    #[arg(long, default_value_t = ebb_host::plugin::PluginLimits::default().max_versions)]
    pub max_plugin_versions: usize,
    /// Idle instances kept per plugin version for the next call (0 keeps
    /// none: every call instantiates its own). The engine reserves address
    /// space for 64 plugins × this many instances; lower it where that
    /// reservation fails.
    #[arg(long, default_value_t = ebb_host::plugin::PluginLimits::default().idle_instances)]
    pub plugin_idle_instances: usize,
    /// Longest a client may take to send a request's line and headers
    /// (from the accept for a connection's first request, from the first
    /// byte for later ones); past it the connection is closed.
    #[arg(long, value_parser = positive_duration,
          default_value_t = HumanDuration(HttpLimits::default().header_read_timeout))]
    pub header_read_timeout: HumanDuration,
    /// Longest a request body may stall (nothing arriving) while it is
    /// read; past it the request fails with 408 and the connection closes.
    #[arg(long, value_parser = positive_duration,
          default_value_t = HumanDuration(HttpLimits::default().body_read_timeout))]
    pub body_read_timeout: HumanDuration,
    /// Longest a keep-alive connection may wait for its next request.
    #[arg(long, value_parser = positive_duration,
          default_value_t = HumanDuration(HttpLimits::default().idle_timeout))]
    pub idle_timeout: HumanDuration,
    /// Most HTTP connections open at once; more are answered 503 and closed
    /// at once [default: half the open-files limit, 32 to 16384; the soft
    /// limit is first raised to the hard one].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Bound on the process's resident memory: bytes with an optional unit
    /// (536870912, 512MiB, 2GB), a percentage of the machine's memory or
    /// the cgroup's limit if lower (80%), or none. A put that would pass it
    /// is refused (507 memory_full); reads, deletes and expiry keep working.
    #[arg(long, default_value_t = ebb_host::node::memory::DEFAULT_MAX_MEMORY)]
    pub max_memory: ebb_host::node::memory::MaxMemory,
    /// Cluster mode: this node's id among --peers (with --cluster-listen
    /// and --peers; see docs/cluster.md).
    #[arg(long, requires_all = ["cluster_listen", "peers"])]
    pub node_id: Option<u64>,
    /// Cluster mode: the internal port other members reach this node at.
    #[arg(long, requires = "node_id")]
    pub cluster_listen: Option<SocketAddr>,
    /// Cluster mode: every member's id and cluster address, this node
    /// included: 1=HOST:PORT,2=HOST:PORT,3=HOST:PORT. The same on every node.
    #[arg(long, requires = "node_id", value_parser = parse_peers_arg)]
    pub peers: Option<BTreeMap<u64, String>>,
    /// Cluster mode: replicas per fragment (default 3, or the member count
    /// if smaller).
    #[arg(long, requires = "node_id")]
    pub replication: Option<usize>,
    /// Cluster mode: a secret every member sends with its internal
    /// messages; messages without it are refused.
    #[arg(
        long,
        requires = "node_id",
        env = "EBB_CLUSTER_SECRET",
        hide_env_values = true
    )]
    pub cluster_secret: Option<String>,
    /// Cluster mode: each fragment's group snapshots after this many new
    /// log entries and purges its log behind the snapshot, keeping a tenth
    /// of that; 0 keeps the whole log (it grows without bound).
    #[arg(long, requires = "node_id", default_value_t = ebb_host::raft::LogRetention::default().snapshot_every)]
    pub raft_snapshot_every: u64,
}

fn parse_peers_arg(text: &str) -> Result<BTreeMap<u64, String>, String> {
    ebb_host::cluster::parse_peers(text)
}

/// With the cluster flags: bind the cluster port and build what the node
/// needs to be a member. `Err` is the message to print.
async fn cluster_setup(
    args: &ServeArgs,
) -> Result<Option<(ClusterSetup, tokio::net::TcpListener, Arc<ClusterListener>)>, String> {
    let (Some(node_id), Some(listen), Some(peers)) =
        (args.node_id, args.cluster_listen, args.peers.clone())
    else {
        return Ok(None);
    };
    let mut config = ClusterConfig::new(node_id, peers.clone());
    if let Some(replication) = args.replication {
        config.replication = replication;
    }
    config.secret = args.cluster_secret.clone();
    config.retention = ebb_host::raft::LogRetention {
        snapshot_every: args.raft_snapshot_every,
        keep: args.raft_snapshot_every / 10,
    };
    let socket = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on --cluster-listen {listen}: {e}"))?;
    let transport = HttpTransport::new(node_id, &peers, config.secret.clone());
    let listener = ClusterListener::new(peers, config.secret.clone());
    Ok(Some((ClusterSetup { config, transport }, socket, listener)))
}

/// Install the modules in `dir` whose bytes differ from the installed
/// version (in a cluster: on every member, through the metadata group).
async fn install_plugin_dir(node: &Node, dir: &std::path::Path) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("warning: cannot read plugin dir {}: {error}", dir.display());
            return;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.sort();
    for file in files {
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let name = stem.strip_prefix("ebb_plugin_").unwrap_or(stem).to_string();
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        match node.put_plugin(&name, bytes.into()).await {
            Ok(change) if change.unchanged => {}
            Ok(change) => {
                if let Some(version) = change.version {
                    println!(
                        "plugin {} version {} installed from {}",
                        version.name,
                        version.info.version,
                        file.display()
                    );
                }
            }
            Err(error) => eprintln!("warning: {}: {error}", file.display()),
        }
    }
}

/// Fill table `requests` with JSON request logs when it is empty; the
/// number of records written.
async fn load_demo(node: &Node) -> Result<usize, ebb_host::Error> {
    let table = node.table("requests")?;
    if table.get("req:0000").await?.is_some() {
        return Ok(0);
    }
    let paths = ["/api/users", "/api/orders", "/api/search", "/health"];
    let ops: Vec<ebb_host::BatchOp> = (0..400)
        .map(|i| ebb_host::BatchOp::Put {
            key: format!("req:{i:04}"),
            value: format!(
                r#"{{"path": "{}", "ms": {:.1}, "status": {}}}"#,
                paths[i % paths.len()],
                (i * 37 % 250) as f64 + 0.5 + (i % 4) as f64 * 40.0,
                if i % 19 == 0 { 500 } else { 200 }
            )
            .into(),
            expiry: ebb_host::Expiry::Never,
        })
        .collect();
    let count = ops.len();
    for outcome in table.batch(ops, ebb_host::Durability::Wal).await {
        outcome?;
    }
    Ok(count)
}

/// With `--demo`: expiries of `sessions` run `archive.copy` (into
/// `sessions_archive`), unless `sessions` is bound already or the archive
/// plugin is not installed.
async fn bind_demo_archive(node: &Node) {
    let Ok(table) = ebb_host::names::TableName::new("sessions") else {
        return;
    };
    if node.plugins().get("archive").is_none()
        || node.expiry_bindings().iter().any(|(t, _)| *t == table)
    {
        return;
    }
    let request = ebb_host::BindRequest {
        plugin: "archive".into(),
        function: "copy".into(),
        ..ebb_host::BindRequest::default()
    };
    match node.bind_expiry("sessions", request).await {
        Ok(_) => println!("demo: expiries of table sessions are copied into sessions_archive"),
        Err(error) => eprintln!("warning: demo expiry handler not bound: {error}"),
    }
}

/// SIGINT and SIGTERM, caught from the moment this is made: one that
/// arrives while the node starts (or before the task that waits for it
/// runs) is acted on once the server waits for it, never the default
/// action, which would end the process without a clean shutdown.
struct Signals {
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn catch() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Self {
            interrupt: signal(SignalKind::interrupt()).ok(),
            terminate: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) {
        async fn one(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(&mut self.interrupt) => {}
            () = one(&mut self.terminate) => {}
        }
    }
}

/// The tokens the server starts with: the tokens file's, and
/// `--auth-token` with every scope.
fn tokens(args: &ServeArgs) -> Result<Tokens, String> {
    let tokens = match &args.tokens {
        Some(path) => Tokens::load(path)?,
        None => Tokens::default(),
    };
    Ok(match &args.auth_token {
        Some(token) => tokens.with_token(token),
        None => tokens,
    })
}

/// What SIGHUP reloads: the tokens file (with `--auth-token` added back)
/// and the TLS certificate and key.
struct Reloadable {
    auth: Arc<Auth>,
    tokens: Option<PathBuf>,
    auth_token: Option<String>,
    tls: Option<Arc<Tls>>,
}

/// Reload the tokens file and the TLS certificate and key on every SIGHUP;
/// one that does not load leaves what is in force, and says why.
fn reload_on_hangup(reload: Reloadable) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        eprintln!(
            "warning: cannot catch SIGHUP; the tokens file and TLS certificate are read at start only"
        );
        return;
    };
    let reload = Arc::new(reload);
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            // File reads: off the tokio workers.
            let reload = reload.clone();
            let done = tokio::task::spawn_blocking(move || reload_now(&reload)).await;
            if let Err(error) = done {
                eprintln!("error: reloading on SIGHUP failed: {error}");
            }
        }
    });
}

fn reload_now(reload: &Reloadable) {
    if let Some(path) = &reload.tokens {
        match Tokens::load(path) {
            Ok(tokens) => {
                let tokens = match &reload.auth_token {
                    Some(token) => tokens.with_token(token),
                    None => tokens,
                };
                reload.auth.replace(tokens);
                println!("auth: reloaded {}", path.display());
            }
            Err(error) => eprintln!("error: {error}; the tokens in force stay"),
        }
    }
    if let Some(tls) = &reload.tls {
        match tls.reload() {
            Ok(()) => println!("tls: reloaded {}", tls.cert_path().display()),
            Err(error) => eprintln!("error: {error}; the certificate in force stays"),
        }
    }
}

/// Run the server until SIGINT or SIGTERM; a second signal exits at once.
pub async fn run(args: ServeArgs) -> ExitCode {
    let mut signals = Signals::catch();
    let tokens = match tokens(&args) {
        Ok(tokens) => tokens,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let auth = Arc::new(Auth::new(tokens, args.metrics_open));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match Tls::load(cert, key) {
            Ok(tls) => Some(Arc::new(tls)),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    if args.tokens.is_some() || tls.is_some() {
        reload_on_hangup(Reloadable {
            auth: auth.clone(),
            tokens: args.tokens.clone(),
            auth_token: args.auth_token.clone(),
            tls: tls.clone(),
        });
    }
    // Before the store opens its files: connections and the store share the limit.
    let open_files = crate::http::server::raise_open_files_limit();
    let mut config = NodeConfig::new(&args.data_dir)
        .max_value_bytes(args.max_value_bytes)
        .flush_interval(args.flush_interval)
        .clean_interval(args.clean_interval)
        .tombstone_retention(args.tombstone_retention)
        .query_budgets(ebb_host::exec::QueryBudgets {
            timeout: args.query_timeout,
            max_scanned_records: args.max_scanned_records,
            max_page_bytes: args.max_page_bytes,
            max_query_bytes: args.max_query_bytes,
            ..ebb_host::exec::QueryBudgets::default()
        });
    config.fragments = args.fragments;
    config.plugins.max_module_bytes = args.max_plugin_bytes;
    config.plugins.max_memory_bytes = (args.plugin_memory_mib as usize) << 20;
    config.plugins.query_deadline = args.plugin_deadline;
    config.plugins.threads = args.plugin_threads;
    config.plugins.expiry_deadline = args.expiry_deadline;
    config.expiry.backoff_base = args.expiry_backoff;
    config.expiry.backoff_max = args.expiry_backoff_max;
    config.expiry.concurrency = args.expiry_concurrency;
    config.plugins.max_versions = args.max_plugin_versions;
    config.plugins.idle_instances = args.plugin_idle_instances;
    config.max_memory = args.max_memory;
    let cluster = match cluster_setup(&args).await {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut cluster_listener = None;
    if let Some((setup, socket, listener)) = cluster {
        // Serve the cluster port before the node opens: the groups reach
        // each other while they form (answered 503 until the node is set).
        tokio::spawn(serve_cluster(socket, listener.clone()));
        config.cluster = Some(setup);
        cluster_listener = Some(listener);
    }
    let node = match Node::open(config).await {
        Ok(node) => node,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(listener) = &cluster_listener {
        listener.set_node(node.clone());
    }
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("error: cannot listen on {}: {error}", args.listen);
            let _ = node.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    let address = listener.local_addr().map_or(args.listen, |a| a);
    let boot = node.boot_stats();
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("ebb listening on {scheme}://{address}");
    println!(
        "data dir {} ({} fragments, {} records loaded, {} expired while down)",
        node.data_dir().display(),
        node.fragment_count(),
        boot.records,
        boot.converted
    );
    let memory = node.memory();
    println!(
        "memory: bound {} ({}), {} resident",
        memory
            .limit_bytes
            .map_or_else(|| "none".to_string(), |n| format!("{n} bytes")),
        args.max_memory,
        memory
            .resident_bytes
            .map_or_else(|| "unknown".to_string(), |n| format!("{n} bytes")),
    );
    if auth.required() {
        println!(
            "auth: bearer token required on /v1{}",
            if args.metrics_open {
                ""
            } else {
                " and /metrics"
            }
        );
    }
    if !args.cors_origins.is_empty() {
        println!(
            "cors: pages of {} may call the API",
            args.cors_origins.join(", ")
        );
    }
    if let (Some(id), Some(listen)) = (args.node_id, args.cluster_listen) {
        println!(
            "cluster: node {id} of {}, internal port {listen}",
            args.peers.as_ref().map_or(0, BTreeMap::len)
        );
    }
    // After the listening line, which stays the first line printed;
    // connections wait in the listen queue until serving starts below.
    if let Some(dir) = &args.plugin_dir {
        if node.cluster().is_some() {
            // Through the metadata group, which may elect its leader only
            // once the other members are up: serving does not wait for it.
            let (node, dir) = (node.clone(), dir.clone());
            tokio::spawn(async move { install_plugin_dir(&node, &dir).await });
        } else {
            install_plugin_dir(&node, dir).await;
        }
    }
    if args.demo {
        match load_demo(&node).await {
            Ok(0) => {}
            Ok(n) => println!("demo: loaded {n} records into table requests"),
            Err(error) => eprintln!("warning: demo data not loaded: {error}"),
        }
        bind_demo_archive(&node).await;
    }
    let max_connections = args.max_connections.map_or_else(
        || crate::http::server::default_max_connections(open_files),
        |n| n as usize,
    );
    println!(
        "http: at most {max_connections} connections (open-files limit {}); timeouts: header {}, body {}, idle {}",
        open_files.map_or_else(|| "unknown".to_string(), |n| n.to_string()),
        args.header_read_timeout,
        args.body_read_timeout,
        args.idle_timeout
    );
    let state = AppState::new(App {
        node: node.clone(),
        limits: HttpLimits {
            max_body_bytes: args.max_body_bytes,
            max_batch_items: args.max_batch_items,
            header_read_timeout: args.header_read_timeout.0,
            body_read_timeout: args.body_read_timeout.0,
            idle_timeout: args.idle_timeout.0,
            max_connections: Some(max_connections),
        },
        auth,
        cors_origins: args.cors_origins.clone().into(),
        metrics: Default::default(),
        draining: Default::default(),
        tls,
        console: !args.no_console,
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, state, async {
        let _ = stop_rx.await;
    }));
    signals.next().await;
    println!("shutting down: finishing requests, flushing (a second signal exits at once)");
    // A second signal ends the process without waiting.
    tokio::spawn(async move {
        signals.next().await;
        eprintln!("second signal: exiting now");
        std::process::exit(130);
    });
    let _ = stop_tx.send(());
    match tokio::time::timeout(Duration::from_secs(30), server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => eprintln!("warning: HTTP server ended with an error: {error}"),
        Ok(Err(error)) => eprintln!("warning: HTTP server task failed: {error}"),
        Err(_) => {
            eprintln!("warning: requests still running after 30 s; shutting down the node anyway")
        }
    }
    match node.shutdown().await {
        Ok(()) => {
            println!("shut down cleanly");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: shutdown failed: {error}");
            ExitCode::FAILURE
        }
    }
}
