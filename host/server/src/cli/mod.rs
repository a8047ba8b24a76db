//! The `ebb` command line: the server (`serve`) and a client for the HTTP API.
//!
//! Exit codes: 0 success, 1 the server (or the network) reported an error,
//! 2 bad usage.

pub mod backup;
pub mod client;
pub mod cluster;
pub mod duration;
pub mod expiry;
pub mod export;
pub mod handler_call;
pub mod import;
pub mod plugin;
pub mod prompt;
pub mod scaffold;
pub mod serve;
pub mod sql;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use client::{Client, ClientError, encode_segment};
use duration::parse_duration;
use ebb_host::plugin::HandlerKind;

/// ebb: a key/value database extended with WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "ebb", version)]
pub struct Cli {
    /// Server URL for client commands.
    #[arg(
        long,
        global = true,
        env = "EBB_URL",
        default_value = "http://127.0.0.1:7070"
    )]
    pub url: String,
    /// Bearer token for client commands.
    #[arg(long, global = true, env = "EBB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Trust the PEM certificates in this file for an https:// --url (the
    /// server's own self-signed certificate, or a private CA) instead of
    /// the built-in Mozilla roots.
    #[arg(long, global = true, env = "EBB_CACERT")]
    pub cacert: Option<std::path::PathBuf>,
    /// Output format of client commands.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Readable text.
    Human,
    /// JSON, for scripts.
    Json,
    /// One JSON document per line (`ebb sql` streams; other commands print JSON).
    Ndjson,
    /// Comma-separated values (`ebb sql`; other commands print JSON).
    Csv,
}

/// Commands.
// Parsed once per process: the size of `Serve` costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server until SIGINT or SIGTERM.
    Serve(serve::ServeArgs),
    /// Store a value (from the argument, or stdin when it is `-` or absent).
    Put {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// Value; `-` or absent reads stdin.
        value: Option<String>,
        /// Expire after this long, e.g. 30s, 5m, 1h.
        #[arg(long, value_parser = parse_duration, conflicts_with = "expires_at_ms")]
        ttl: Option<Duration>,
        /// Expire at this Unix time in milliseconds.
        #[arg(long)]
        expires_at_ms: Option<u64>,
        /// memory, wal (default) or sync.
        #[arg(long, default_value = "wal")]
        durability: String,
        #[command(flatten)]
        condition: ConditionArgs,
    },
    /// Print a value.
    Get {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// In a cluster, allow an answer this old from the member's own
        /// replica (e.g. 500ms); absent: linearizable.
        #[arg(long, value_parser = parse_duration)]
        max_staleness: Option<Duration>,
    },
    /// Delete a key.
    Del {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// memory, wal (default) or sync.
        #[arg(long, default_value = "wal")]
        durability: String,
        /// Delete only if the key holds this version (hlc_ms.counter@writer).
        #[arg(long)]
        if_version: Option<String>,
    },
    /// Change a record's TTL without sending its value again: `30s`, `5m`,
    /// ... from now, or `none` to clear it. An expired record cannot be
    /// extended.
    Ttl {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// The new TTL (e.g. 30s, 5m, 1h) or `none`.
        ttl: String,
        /// memory, wal (default) or sync.
        #[arg(long, default_value = "wal")]
        durability: String,
        /// Change it only if the key holds this version (hlc_ms.counter@writer).
        #[arg(long)]
        if_version: Option<String>,
    },
    /// List tables with their live records, tombstones and memory.
    Tables,
    /// Build, upload, list, show, remove plugins; call one locally.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Make a scoped token for `ebb serve --tokens FILE`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Bind, unbind and inspect expiry handlers; list and redrive dead letters.
    #[command(subcommand)]
    Expiry(expiry::ExpiryCommand),
    /// Bind, unbind and inspect change handlers (triggers on a table's
    /// writes and deletes); list and redrive their dead letters.
    #[command(subcommand)]
    Trigger(expiry::ExpiryCommand),
    /// Run a SQL query; without one, read queries from stdin (a prompt on a terminal).
    Sql {
        /// The query.
        query: Option<String>,
        /// A parameter for ?/$n: JSON (42, "text", null, {"base64": ...}) or plain text. Repeatable.
        #[arg(long = "param", short = 'p')]
        params: Vec<String>,
        /// Rows per page (server default 1000).
        #[arg(long)]
        page_size: Option<usize>,
        /// Follow cursors and print every row.
        #[arg(long)]
        all: bool,
        /// guarded (default) or relaxed.
        #[arg(long)]
        consistency: Option<String>,
        /// Continue from a cursor printed by an earlier page.
        #[arg(long, conflicts_with = "query")]
        cursor: Option<String>,
        /// In a cluster, allow data this old from the member's own
        /// replicas (e.g. 500ms); absent: linearizable.
        #[arg(long, value_parser = parse_duration)]
        max_staleness: Option<Duration>,
    },
    /// Inspect the cluster the server belongs to.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Write an online, consistent copy of the whole node into DIR, a path
    /// on the server (missing or empty); serve it with `ebb serve --data-dir DIR`.
    Backup {
        /// Target directory; a relative path is made absolute against the
        /// current directory.
        dir: PathBuf,
    },
    /// Write a table's live records as NDJSON lines
    /// {"key", "value" (text or {"base64"}), "expires_at_ms"?}, in key order.
    Export {
        /// Table name.
        table: String,
        /// Export only records matching this SQL condition (over key, value,
        /// _expires_at, ...).
        #[arg(long = "where")]
        filter: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Import an NDJSON file into a table: the lines `ebb export` writes, or
    /// any batch item ({"key", "value", "ttl_ms" | "expires_at_ms"} or
    /// {"op": "delete", "key"}). Lines whose expires_at_ms has passed are
    /// skipped and counted.
    Import {
        /// The file; `-` reads stdin.
        file: PathBuf,
        /// Target table.
        #[arg(long)]
        table: String,
        /// Items per request.
        #[arg(long, default_value_t = 1000)]
        batch_size: usize,
        /// memory, wal (default) or sync.
        #[arg(long, default_value = "wal")]
        durability: String,
    },
}

/// The condition of a put: at most one of `--if-version` and `--if-absent`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConditionArgs {
    /// Write only if the key holds this version (hlc_ms.counter@writer, as
    /// `ebb get --format json` prints it).
    #[arg(long, conflicts_with = "if_absent")]
    pub if_version: Option<String>,
    /// Write only if the key has no visible record (create only).
    #[arg(long)]
    pub if_absent: bool,
}

impl ConditionArgs {
    /// The `If-Match` / `If-None-Match` header the condition sends.
    fn header(&self) -> Option<(&'static str, &str)> {
        match (&self.if_version, self.if_absent) {
            (Some(version), _) => Some(("if-match", version)),
            (None, true) => Some(("if-none-match", "*")),
            (None, false) => None,
        }
    }
}

/// Print the answer to a put or a TTL change: the version and deadline
/// (`no_deadline` after the version when there is none).
fn print_written(format: Format, json: &Value, no_deadline: &str) {
    let version = json["version"].as_str().unwrap_or("?");
    match format {
        Format::Json | Format::Ndjson | Format::Csv => print_json(json),
        Format::Human => match json["expires_at_ms"].as_u64() {
            Some(at) => println!("ok: version {version} (expires at {at} ms)"),
            None => println!("ok: version {version}{no_deadline}"),
        },
    }
}

/// `/v1/tables/{t}/keys/{k}?durability=D`.
fn durable_key_path(table: &str, key: &str, durability: &str) -> String {
    format!(
        "{}?durability={}",
        key_path(table, key),
        encode_segment(durability)
    )
}

/// The `If-Match` header of `--if-version`, if given.
fn if_match(version: Option<&str>) -> Vec<(&'static str, &str)> {
    version.map(|v| ("if-match", v)).into_iter().collect()
}

/// The log filter when `RUST_LOG` is not set: openraft at `warn`, except
/// the modules that warn of each failed heartbeat and replication attempt
/// (their siblings that warn of contract violations stay at `warn`).
const DEFAULT_LOG: &str = concat!(
    "info,openraft=warn",
    ",openraft::core::heartbeat::worker=error",
    ",openraft::engine::handler::replication_handler=error",
    ",openraft::replication=error",
    ",openraft::replication::stream_state=warn",
    ",openraft::replication::snapshot_transmitter=warn",
    ",openraft::replication::replication_handle=warn",
);

/// Parse the arguments and run; the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // openraft narrates every election and vote at info, and
                // warns of every failed heartbeat and replication attempt
                // (one line per group per heartbeat while a member is down);
                // the cluster transport logs each member's link instead.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cli.command {
        Command::Serve(args) => match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            // A worker that parks may have just freed a large response.
            .on_thread_park(ebb_host::alloc::release_idle_memory)
            .build()
        {
            Ok(runtime) => runtime.block_on(serve::run(args)),
            Err(error) => {
                eprintln!("error: cannot start the async runtime: {error}");
                ExitCode::FAILURE
            }
        },
        command => {
            let client =
                match Client::with_cacert(&cli.url, cli.token.clone(), cli.cacert.as_deref()) {
                    Ok(client) => client,
                    Err(error) => {
                        eprintln!("error: {error}");
                        return ExitCode::FAILURE;
                    }
                };
            match run_client(&client, cli.format, command) {
                Ok(code) => code,
                Err(error) => {
                    eprintln!("error: {error}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn key_path(table: &str, key: &str) -> String {
    format!(
        "/v1/tables/{}/keys/{}",
        encode_segment(table),
        encode_segment(key)
    )
}

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

fn run_client(client: &Client, format: Format, command: Command) -> Result<ExitCode, ClientError> {
    match command {
        Command::Serve(_) => unreachable!("handled by main"),
        Command::Put {
            table,
            key,
            value,
            ttl,
            expires_at_ms,
            durability,
            condition,
        } => {
            let bytes = match value.as_deref() {
                Some("-") | None => {
                    let mut buffer = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut buffer)
                        .map_err(|e| ClientError::Protocol(format!("cannot read stdin: {e}")))?;
                    buffer
                }
                Some(text) => text.as_bytes().to_vec(),
            };
            let mut path = format!(
                "{}?durability={}",
                key_path(&table, &key),
                encode_segment(&durability)
            );
            if let Some(ttl) = ttl {
                path.push_str(&format!("&ttl_ms={}", ttl.as_millis()));
            }
            if let Some(at) = expires_at_ms {
                path.push_str(&format!("&expires_at_ms={at}"));
            }
            let headers: Vec<_> = condition.header().into_iter().collect();
            let reply = client.send_with_headers(
                "PUT",
                &path,
                Some((&bytes, "application/octet-stream")),
                &headers,
            )?;
            print_written(format, &reply.json()?, "");
            Ok(ExitCode::SUCCESS)
        }
        Command::Get {
            table,
            key,
            max_staleness,
        } => {
            let mut path = key_path(&table, &key);
            if let Some(bound) = max_staleness {
                path.push_str(&format!("?max_staleness_ms={}", bound.as_millis()));
            }
            let reply = client.send("GET", &path, None)?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => {
                    let value = ebb_host::codec::bytes_json(&reply.body);
                    let expires: Option<u64> =
                        reply.header("ebb-expires-at").and_then(|v| v.parse().ok());
                    let mut out = json!({
                        "key": key,
                        "value": value,
                        "version": reply.header("ebb-version"),
                        "expires_at_ms": expires,
                    });
                    if let Some(ms) = reply.header("ebb-staleness-ms") {
                        out["staleness_ms"] = json!(ms.parse::<u64>().ok());
                    }
                    print_json(&out);
                }
                Format::Human => {
                    let mut stdout = std::io::stdout().lock();
                    let _ = stdout.write_all(&reply.body);
                    if stdout.is_terminal() && !reply.body.ends_with(b"\n") {
                        let _ = stdout.write_all(b"\n");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Del {
            table,
            key,
            durability,
            if_version,
        } => {
            let path = durable_key_path(&table, &key, &durability);
            let headers = if_match(if_version.as_deref());
            let json = client
                .send_with_headers("DELETE", &path, None, &headers)?
                .json()?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => print_json(&json),
                Format::Human => println!(
                    "deleted: version {}",
                    json["version"].as_str().unwrap_or("?")
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ttl {
            table,
            key,
            ttl,
            durability,
            if_version,
        } => {
            let body = match ttl.trim() {
                "none" => json!({ "ttl_ms": null }),
                text => match parse_duration(text) {
                    Ok(ttl) => {
                        json!({ "ttl_ms": u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX) })
                    }
                    Err(error) => {
                        eprintln!("error: {error}, or none to clear the TTL");
                        return Ok(ExitCode::from(2));
                    }
                },
            };
            let path = durable_key_path(&table, &key, &durability);
            let headers = if_match(if_version.as_deref());
            let body = body.to_string();
            let json = client
                .send_with_headers(
                    "PATCH",
                    &path,
                    Some((body.as_bytes(), "application/json")),
                    &headers,
                )?
                .json()?;
            print_written(format, &json, " (no TTL)");
            Ok(ExitCode::SUCCESS)
        }
        Command::Sql {
            query,
            params,
            page_size,
            all,
            consistency,
            cursor,
            max_staleness,
        } => {
            let options = sql::SqlOptions {
                params,
                page_size,
                all,
                consistency,
                cursor,
                max_staleness,
            };
            if query.is_none() && options.cursor.is_none() {
                return Ok(sql::prompt(client, format, &options));
            }
            sql::run(client, format, query.as_deref(), &options)
        }
        Command::Plugin(command) => plugin::run(client, format, command),
        Command::Token(command) => Ok(token(command)),
        Command::Expiry(command) => expiry::run(client, format, command, HandlerKind::Expiry),
        Command::Trigger(command) => expiry::run(client, format, command, HandlerKind::Change),
        Command::Tables => {
            let json = client.send("GET", "/v1/tables", None)?.json()?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => print_json(&json),
                Format::Human => {
                    let tables = json["tables"].as_array().cloned().unwrap_or_default();
                    let width = tables
                        .iter()
                        .filter_map(|t| t["name"].as_str().map(str::len))
                        .max()
                        .unwrap_or(0)
                        .max("TABLE".len());
                    println!(
                        "{:<width$}  {:>12}  {:>10}  {:>10}",
                        "TABLE", "LIVE RECORDS", "TOMBSTONES", "MEMORY"
                    );
                    for table in &tables {
                        println!(
                            "{:<width$}  {:>12}  {:>10}  {:>10}",
                            table["name"].as_str().unwrap_or("?"),
                            table["live_records"].as_u64().unwrap_or(0),
                            table["tombstones"].as_u64().unwrap_or(0),
                            human_bytes(table["memory_bytes"].as_u64().unwrap_or(0)),
                        );
                    }
                    let plural = if tables.len() == 1 { "" } else { "s" };
                    println!("({} table{plural})", tables.len());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster(cluster::ClusterCommand::Status) => {
            let status = cluster::status(client)?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => print_json(&status),
                Format::Human => cluster::print_status(&status),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup { dir } => {
            let report = backup::backup(client, &dir)?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => print_json(&report),
                Format::Human => println!(
                    "backup written to {}: {} files, {} bytes in {} ms",
                    report["dir"].as_str().unwrap_or("?"),
                    report["files"].as_u64().unwrap_or(0),
                    report["bytes"].as_u64().unwrap_or(0),
                    report["duration_ms"].as_u64().unwrap_or(0)
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export {
            table,
            filter,
            output,
        } => {
            let summary = match &output {
                Some(path) => {
                    let file = std::fs::File::create(path).map_err(|e| {
                        ClientError::Local(format!("cannot create {}: {e}", path.display()))
                    })?;
                    let mut out = std::io::BufWriter::new(file);
                    export::export(client, &table, filter.as_deref(), &mut out)?
                }
                None => {
                    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                    export::export(client, &table, filter.as_deref(), &mut out)?
                }
            };
            // The records may be on stdout: the summary goes to stderr.
            match format {
                Format::Json | Format::Ndjson | Format::Csv => {
                    eprintln!("{}", json!({ "exported": summary.records, "table": table }))
                }
                Format::Human => eprintln!("exported {} records from {table}", summary.records),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Import {
            file,
            table,
            batch_size,
            durability,
        } => {
            let summary = import::import(
                client,
                &file,
                &table,
                batch_size.clamp(1, 10_000),
                &durability,
            )?;
            match format {
                Format::Json | Format::Ndjson | Format::Csv => print_json(&json!({
                    "written": summary.written,
                    "skipped_expired": summary.expired,
                    "failed": summary.failed.iter().map(|(line, message)| json!({"line": line, "message": message})).collect::<Vec<_>>(),
                })),
                Format::Human => {
                    println!("imported {} records into {table}", summary.written);
                    if summary.expired > 0 {
                        println!(
                            "skipped {} records whose expires_at_ms had passed",
                            summary.expired
                        );
                    }
                    for (line, message) in summary.failed.iter().take(20) {
                        eprintln!("line {line}: {message}");
                    }
                    if summary.failed.len() > 20 {
                        eprintln!("... and {} more failures", summary.failed.len() - 20);
                    }
                    if !summary.failed.is_empty() {
                        eprintln!("{} records failed", summary.failed.len());
                    }
                }
            }
            Ok(if summary.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// Bytes in the largest binary unit that keeps a whole part: `512 B`,
/// `1.5 KiB`, `20.0 MiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod human_bytes_tests {
    use super::human_bytes;

    #[test]
    fn bytes_print_in_the_largest_binary_unit() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(20 << 20), "20.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}

/// Token commands (local: nothing is sent to a server).
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a random token: prints the token (give it to its user) and
    /// the entry to add to the tokens file (it holds only the token's hash).
    New {
        /// A name for the token (shown in errors and logs).
        name: String,
        /// A scope it gets: read, write or admin; repeatable.
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// A table it may touch; repeatable; none means every table.
        #[arg(long = "table")]
        tables: Vec<String>,
    },
    /// Print the SHA-256 of a token read from stdin, as the tokens file
    /// stores it.
    Hash,
}

fn token(command: TokenCommand) -> ExitCode {
    use crate::http::tokens;
    match command {
        TokenCommand::New {
            name,
            scopes,
            tables,
        } => {
            let scopes = match scopes
                .iter()
                .map(|s| s.parse::<tokens::Scope>())
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(scopes) => scopes,
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            if let Some(bad) = tables
                .iter()
                .find_map(|t| ebb_host::names::TableName::new(t).err())
            {
                eprintln!("error: {bad}");
                return ExitCode::from(2);
            }
            let tables = (!tables.is_empty()).then_some(tables);
            let (token, entry) = tokens::new_token(&name, scopes, tables);
            println!("token: {token}");
            println!(
                "entry: {}",
                serde_json::to_string(&entry).unwrap_or_default()
            );
            eprintln!(
                "add the entry to the tokens file's \"tokens\" list and send the server SIGHUP; the token is not stored anywhere"
            );
            ExitCode::SUCCESS
        }
        TokenCommand::Hash => {
            let mut text = String::new();
            if std::io::stdin().read_to_string(&mut text).is_err() {
                eprintln!("error: cannot read the token from stdin");
                return ExitCode::from(2);
            }
            println!("{}", ebb_host::hex::encode(&tokens::hash(text.trim())));
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing_subscriber::layer::SubscriberExt;

    use super::DEFAULT_LOG;

    /// Counts the events that pass the filter.
    struct Count(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a warning of `target` passes the default filter.
    fn warns(target: &'static str) -> bool {
        let seen = Arc::new(AtomicUsize::new(0));
        let filter =
            tracing_subscriber::EnvFilter::try_new(DEFAULT_LOG).expect("the default filter parses");
        let subscriber = tracing_subscriber::registry()
            .with(filter)
            .with(Count(seen.clone()));
        tracing::subscriber::with_default(subscriber, || match target {
            "openraft::core::heartbeat::worker" => {
                tracing::warn!(target: "openraft::core::heartbeat::worker", "w")
            }
            "openraft::replication" => tracing::warn!(target: "openraft::replication", "w"),
            "openraft::engine::handler::replication_handler" => {
                tracing::warn!(target: "openraft::engine::handler::replication_handler", "w")
            }
            "openraft::replication::stream_state" => {
                tracing::warn!(target: "openraft::replication::stream_state", "w")
            }
            "openraft::replication::snapshot_transmitter" => {
                tracing::warn!(target: "openraft::replication::snapshot_transmitter", "w")
            }
            "openraft::core::raft_core" => tracing::warn!(target: "openraft::core::raft_core", "w"),
            "ebb_server::cluster::transport" => {
                tracing::warn!(target: "ebb_server::cluster::transport", "w")
            }
            other => panic!("no event for {other}"),
        });
        seen.load(Ordering::Relaxed) == 1
    }

    #[test]
    fn the_default_log_drops_openrafts_per_attempt_warnings_and_keeps_the_rest() {
        for quiet in [
            "openraft::core::heartbeat::worker",
            "openraft::replication",
            "openraft::engine::handler::replication_handler",
        ] {
            assert!(!warns(quiet), "{quiet} warns by default");
        }
        for loud in [
            "openraft::replication::stream_state",
            "openraft::replication::snapshot_transmitter",
            "openraft::core::raft_core",
            "ebb_server::cluster::transport",
        ] {
            assert!(warns(loud), "{loud} is silent by default");
        }
    }
}
