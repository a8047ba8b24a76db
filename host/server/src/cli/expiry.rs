//! `ebb expiry` and `ebb trigger`: bind, unbind and inspect a table's
//! expiry handler or change handler, list and redrive its dead letters.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::Format;
use super::client::{Client, ClientError, encode_segment};
use ebb_host::plugin::HandlerKind;

/// Handler commands (`ebb expiry` for expiry handlers, `ebb trigger` for
/// change handlers).
#[derive(Debug, Subcommand)]
pub enum ExpiryCommand {
    /// Run `<plugin>.<function>` for every expiry (`ebb expiry`) or every
    /// write and delete (`ebb trigger`) in a table.
    Bind {
        /// Table name.
        table: String,
        /// Plugin name.
        plugin: String,
        /// Function of the plugin (an expiry handler).
        function: String,
        /// Most events per handler call (1 to 4096; default 256).
        #[arg(long)]
        max_batch: Option<u32>,
        /// Deliveries of an event before it moves to dead letters (1 to 1000; default 10).
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Settings handed to every call of the handler, as JSON (at most
        /// 64 KiB), e.g. '{"table": "old_sessions"}' for archive.
        #[arg(long)]
        config: Option<String>,
        /// Change handlers only: handle only the writes of keys starting
        /// with this.
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Stop running the handler for a table's expiries.
    Unbind {
        /// Table name.
        table: String,
        /// Also delete the events waiting in the outbox.
        #[arg(long)]
        discard_pending: bool,
    },
    /// Show the binding and delivery status of a table.
    Status {
        /// Table name.
        table: String,
    },
    /// List a table's dead letters.
    DeadLetters {
        /// Table name.
        table: String,
        /// Most entries (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Continue after this id (printed as `next` by the previous page).
        #[arg(long)]
        after: Option<String>,
    },
    /// Move dead letters back into the outbox: all of them, or the given ids.
    Redrive {
        /// Table name.
        table: String,
        /// Event ids (hex) to redrive; none means all.
        ids: Vec<String>,
    },
}

fn handler_path(kind: HandlerKind, table: &str) -> String {
    format!(
        "/v1/tables/{}/{}-handler",
        encode_segment(table),
        kind.as_str()
    )
}

fn dead_letters_path(kind: HandlerKind, table: &str) -> String {
    format!(
        "/v1/tables/{}/{}/dead-letters",
        encode_segment(table),
        kind.as_str()
    )
}

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

fn or_dash(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Run one handler command for handlers of `kind`.
pub fn run(
    client: &Client,
    format: Format,
    command: ExpiryCommand,
    kind: HandlerKind,
) -> Result<ExitCode, ClientError> {
    let human = format == Format::Human;
    let events = match kind {
        HandlerKind::Expiry => "expiries",
        HandlerKind::Change => "writes",
    };
    match command {
        ExpiryCommand::Bind {
            table,
            plugin,
            function,
            max_batch,
            max_attempts,
            config,
            prefix,
        } => {
            let config: Option<Value> = match config.as_deref().map(serde_json::from_str) {
                None => None,
                Some(Ok(config)) => Some(config),
                Some(Err(error)) => {
                    eprintln!("error: --config is not JSON: {error}");
                    return Ok(ExitCode::from(2));
                }
            };
            let body = json!({
                "plugin": plugin,
                "function": function,
                "max_batch": max_batch,
                "max_attempts": max_attempts,
                "config": config,
                "prefix": prefix,
            })
            .to_string();
            let json = client
                .send(
                    "PUT",
                    &handler_path(kind, &table),
                    Some((body.as_bytes(), "application/json")),
                )?
                .json()?;
            if human {
                let covered = match json["prefix"].as_str() {
                    Some(prefix) => format!(" of keys starting with {prefix:?}"),
                    None => String::new(),
                };
                println!(
                    "bound: {} {events}{covered} run {}.{} (max_batch {}, max_attempts {})",
                    or_dash(&json["table"]),
                    or_dash(&json["plugin"]),
                    or_dash(&json["function"]),
                    json["max_batch"],
                    json["max_attempts"]
                );
            } else {
                print_json(&json);
            }
        }
        ExpiryCommand::Unbind {
            table,
            discard_pending,
        } => {
            let path = format!(
                "{}?discard_pending={discard_pending}",
                handler_path(kind, &table)
            );
            let json = client.send("DELETE", &path, None)?.json()?;
            if human {
                let unbound = &json["unbound"];
                println!(
                    "unbound: {} no longer runs {}.{}{}",
                    or_dash(&unbound["table"]),
                    or_dash(&unbound["plugin"]),
                    or_dash(&unbound["function"]),
                    if discard_pending {
                        " (pending events discarded)"
                    } else {
                        " (pending events kept)"
                    }
                );
            } else {
                print_json(&json);
            }
        }
        ExpiryCommand::Status { table } => {
            let json = client
                .send("GET", &handler_path(kind, &table), None)?
                .json()?;
            if human {
                let binding = &json["binding"];
                let status = &json["status"];
                match binding {
                    Value::Null => println!("table {}: no handler bound", or_dash(&json["table"])),
                    b => println!(
                        "table {}: {}.{} (max_batch {}, max_attempts {})",
                        or_dash(&json["table"]),
                        or_dash(&b["plugin"]),
                        or_dash(&b["function"]),
                        b["max_batch"],
                        b["max_attempts"]
                    ),
                }
                if let Some(prefix) = binding["prefix"].as_str() {
                    println!("  prefix      {prefix:?}");
                }
                if !binding["config"].is_null() {
                    println!("  config      {}", binding["config"]);
                }
                let oldest = match status["oldest_pending_age_ms"].as_u64() {
                    Some(age) if kind == HandlerKind::Expiry => {
                        format!(", oldest {age} ms past its deadline")
                    }
                    Some(age) => format!(", oldest written {age} ms ago"),
                    None => String::new(),
                };
                println!(
                    "  outbox      {} pending ({} in flight, {} backing off){oldest}",
                    status["outbox_depth"], status["in_flight"], status["backing_off"],
                );
                println!(
                    "  handled     {} events in {} calls ({} deliveries); {} calls failed, {} deliveries failed",
                    status["handled"],
                    status["calls"],
                    status["attempts"],
                    status["failed_calls"],
                    status["failed_events"]
                );
                let lag = &status["lag_ms"];
                println!(
                    "  lag         p50 <= {} ms, p99 <= {} ms, max {} ms",
                    or_dash(&lag["p50"]),
                    or_dash(&lag["p99"]),
                    or_dash(&lag["max"])
                );
                println!("  dead        {} dead letters", status["dead_letters"]);
                println!(
                    "  skipped     {} actions (their condition did not hold)",
                    status["skipped_actions"]
                );
                if let Some(error) = status["last_error"].as_str() {
                    println!("  last error  {error}");
                }
            } else {
                print_json(&json);
            }
        }
        ExpiryCommand::DeadLetters {
            table,
            limit,
            after,
        } => {
            let mut path = format!("{}?limit={limit}", dead_letters_path(kind, &table));
            if let Some(after) = after {
                path.push_str(&format!("&after={}", encode_segment(&after)));
            }
            let json = client.send("GET", &path, None)?.json()?;
            if human {
                let items = json["dead_letters"].as_array().cloned().unwrap_or_default();
                for item in &items {
                    println!(
                        "{}  key={}  attempts={}  error={}",
                        or_dash(&item["id"]),
                        or_dash(&item["key"]),
                        item["attempts"],
                        or_dash(&item["last_error"])
                    );
                }
                println!("({} dead letters)", items.len());
                if let Some(next) = json["next"].as_str() {
                    println!("more: --after {next}");
                }
            } else {
                print_json(&json);
            }
        }
        ExpiryCommand::Redrive { table, ids } => {
            let body = if ids.is_empty() {
                json!({})
            } else {
                json!({ "ids": ids })
            }
            .to_string();
            let path = format!("{}/redrive", dead_letters_path(kind, &table));
            // Redrive in rounds (each moves up to 10 000 events, fewer when
            // their values are large) while the server says more remain,
            // but no further than the events there were to move at the
            // start: the ids given, or the dead letters the status counted
            // (events that fail again are not chased).
            let to_move = if ids.is_empty() {
                // No status (nothing bound): one round, which reports why.
                client
                    .send("GET", &handler_path(kind, &table), None)
                    .and_then(|reply| reply.json())
                    .map_or(0, |status| {
                        status["status"]["dead_letters"].as_u64().unwrap_or(0)
                    })
            } else {
                ids.len() as u64
            };
            let mut total = 0;
            loop {
                let json = client
                    .send("POST", &path, Some((body.as_bytes(), "application/json")))?
                    .json()?;
                let moved = json["redriven"].as_u64().unwrap_or(0);
                let more = json["more"].as_bool().unwrap_or(false);
                total += moved;
                if !more || moved == 0 || total >= to_move {
                    if human && more {
                        println!(
                            "redriven: {total} events back in the outbox; more remain, run it again"
                        );
                    } else if human {
                        println!("redriven: {total} events back in the outbox");
                    } else {
                        print_json(&json!({ "redriven": total, "more": more }));
                    }
                    break;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
