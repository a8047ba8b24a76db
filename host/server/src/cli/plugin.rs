//! `ebb plugin`: build, upload, list, show, remove plugins, and call a
//! module locally in the same sandbox as the server.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Subcommand;
use ebb_proto::plugin::v1 as abi;
use serde_json::Value;

use super::Format;
use super::client::{Client, ClientError, encode_segment};
use super::handler_call;
use ebb_host::codec::{from_proto, to_proto};
use ebb_host::plugin::{PluginLimits, PluginRuntime};

/// Plugin commands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Build a plugin crate for wasm32-unknown-unknown and check its manifest.
    Build {
        /// The crate directory.
        dir: PathBuf,
    },
    /// Create a plugin crate NAME with an example scalar, aggregate and
    /// expiry handler and passing native tests (`cargo test`).
    New {
        /// Plugin name (a-z, 0-9, _), also the crate name.
        name: String,
        /// Directory to create (default ./NAME); must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The guest SDK to depend on (default: the guest-sdk directory of
        /// the checkout this ebb was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Upload a module, or build a crate directory and upload it.
    Push {
        /// A .wasm file or a plugin crate directory.
        path: PathBuf,
        /// Name to install it as (default: the manifest's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// List installed plugins.
    Ls,
    /// Show one plugin: functions and versions.
    Show {
        /// Plugin name.
        name: String,
    },
    /// Remove a plugin.
    Rm {
        /// Plugin name.
        name: String,
    },
    /// Run a function of a local module in the server's sandbox. Scalars get
    /// the arguments as one row; aggregates get each argument as a row;
    /// expiry handlers get each argument as an event, a JSON object such as
    /// '{"key": "s1", "value": "alice", "table": "sessions"}', and print
    /// their actions.
    Call {
        /// The .wasm file.
        file: PathBuf,
        /// Function name.
        function: String,
        /// Arguments: JSON (42, "text", null, {"base64": ...}) or plain
        /// text; for a handler, one JSON event object each.
        args: Vec<String>,
        /// For a handler: the binding's config, as JSON.
        #[arg(long)]
        config: Option<String>,
        /// For a handler: a record its ebb.get finds, TABLE/KEY=VALUE
        /// (repeatable; other keys read as absent).
        #[arg(long = "record")]
        records: Vec<String>,
    },
}

fn fail(message: String) -> ClientError {
    ClientError::Local(message)
}

fn compile(path: &Path) -> Result<(Vec<u8>, abi::Manifest), ClientError> {
    let bytes =
        std::fs::read(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let runtime =
        PluginRuntime::new(PluginLimits::default(), 0).map_err(|e| fail(e.to_string()))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("plugin");
    let compiled = runtime
        .compile(name, &bytes)
        .map_err(|e| fail(e.to_string()))?;
    Ok((bytes, compiled.manifest))
}

/// Build the crate in `dir` for wasm32; the path of the module.
fn build(dir: &Path) -> Result<PathBuf, ClientError> {
    let manifest_path = dir.join("Cargo.toml");
    let status = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-unknown-unknown",
            "--manifest-path",
        ])
        .arg(&manifest_path)
        .status()
        .map_err(|e| fail(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(fail(format!("cargo build failed for {}", dir.display())));
    }
    let metadata = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(&manifest_path)
        .output()
        .map_err(|e| fail(format!("cannot run cargo metadata: {e}")))?;
    let metadata: Value = serde_json::from_slice(&metadata.stdout)
        .map_err(|e| fail(format!("cargo metadata: {e}")))?;
    let target = metadata["target_directory"]
        .as_str()
        .unwrap_or("target")
        .to_string();
    let wanted = std::fs::canonicalize(&manifest_path).ok();
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| {
            packages.iter().find(|p| {
                p["manifest_path"]
                    .as_str()
                    .and_then(|m| std::fs::canonicalize(m).ok())
                    == wanted
            })
        })
        .ok_or_else(|| fail(format!("{} is not a package", manifest_path.display())))?;
    let lib = package["name"]
        .as_str()
        .unwrap_or_default()
        .replace('-', "_");
    Ok(PathBuf::from(target).join(format!("wasm32-unknown-unknown/release/{lib}.wasm")))
}

fn print_manifest(manifest: &abi::Manifest, size: usize) {
    println!(
        "plugin {} {} (ABI v{}), {size} bytes",
        manifest.name, manifest.version, manifest.abi_version
    );
    for f in &manifest.functions {
        let args = if f.arg_count < 0 {
            "variadic".to_string()
        } else {
            format!("{} args", f.arg_count)
        };
        println!(
            "  {:<16} {:<15} {:<9} {}",
            f.name,
            crate::http::plugins::kind_name(f.kind),
            args,
            f.description
        );
    }
}

/// A command-line argument: JSON scalars and `{"base64": ...}` as such,
/// anything else (plain words, JSON documents) as text.
fn arg_value(text: &str) -> ebb_query::Value {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|json| ebb_host::codec::from_json(&json).ok())
        .unwrap_or_else(|| ebb_query::Value::text(text))
}

/// Run a plugin command.
pub fn run(
    client: &Client,
    format: Format,
    command: PluginCommand,
) -> Result<ExitCode, ClientError> {
    match command {
        PluginCommand::New { name, dir, sdk } => {
            let dir = super::scaffold::new_plugin(&name, dir, sdk).map_err(fail)?;
            println!(
                "created {}: cd there and run cargo test, then ebb plugin build . and ebb plugin push .",
                dir.display()
            );
        }
        PluginCommand::Build { dir } => {
            let wasm = build(&dir)?;
            let (bytes, manifest) = compile(&wasm)?;
            print_manifest(&manifest, bytes.len());
            println!("built {}", wasm.display());
        }
        PluginCommand::Push { path, name } => {
            let wasm = if path.is_dir() { build(&path)? } else { path };
            let (bytes, manifest) = compile(&wasm)?;
            let name = name.unwrap_or(manifest.name);
            let reply = client.send(
                "PUT",
                &format!("/v1/plugins/{}", encode_segment(&name)),
                Some((&bytes, "application/wasm")),
            )?;
            let body = reply.json()?;
            match format {
                Format::Human => println!(
                    "{} {} version {} (sha256 {})",
                    if body["unchanged"] == true {
                        "already installed:"
                    } else {
                        "installed"
                    },
                    body["name"].as_str().unwrap_or("?"),
                    body["version"],
                    body["sha256"].as_str().unwrap_or("?")
                ),
                _ => println!(
                    "{}",
                    serde_json::to_string_pretty(&body).unwrap_or_default()
                ),
            }
        }
        PluginCommand::Ls => {
            let body = client.send("GET", "/v1/plugins", None)?.json()?;
            match format {
                Format::Human => {
                    println!(
                        "{:<20} {:>7} {:>10}  FUNCTIONS",
                        "PLUGIN", "VERSION", "BYTES"
                    );
                    for p in body["plugins"].as_array().into_iter().flatten() {
                        let functions: Vec<&str> = p["functions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|f| f["name"].as_str())
                            .collect();
                        println!(
                            "{:<20} {:>7} {:>10}  {}",
                            p["name"].as_str().unwrap_or("?"),
                            p["version"].as_u64().unwrap_or(0),
                            p["size"].as_u64().unwrap_or(0),
                            functions.join(", ")
                        );
                    }
                }
                _ => println!(
                    "{}",
                    serde_json::to_string_pretty(&body).unwrap_or_default()
                ),
            }
        }
        PluginCommand::Show { name } => {
            let body = client
                .send(
                    "GET",
                    &format!("/v1/plugins/{}", encode_segment(&name)),
                    None,
                )?
                .json()?;
            println!(
                "{}",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            );
        }
        PluginCommand::Rm { name } => {
            client.send(
                "DELETE",
                &format!("/v1/plugins/{}", encode_segment(&name)),
                None,
            )?;
            println!("removed {name}");
        }
        PluginCommand::Call {
            file,
            function,
            args,
            config,
            records,
        } => {
            let bytes = std::fs::read(&file)
                .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
            let runtime =
                PluginRuntime::new(PluginLimits::default(), 0).map_err(|e| fail(e.to_string()))?;
            let store = ebb_host::store::MemoryStore::new();
            let registry = ebb_host::plugin::PluginRegistry::load(runtime, &store)
                .map_err(|e| fail(e.to_string()))?;
            let version = registry
                .install(&store, "local", &bytes)
                .map_err(|e| fail(e.to_string()))?;
            let decl = version.function(&function).cloned().ok_or_else(|| {
                let names: Vec<&str> = version
                    .manifest
                    .functions
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect();
                fail(format!(
                    "the module has no function {function}; it has: {}",
                    names.join(", ")
                ))
            })?;
            if ebb_host::plugin::is_handler(&decl) {
                return call_handler(&version, &decl, &args, config, &records, format);
            }
            let values: Vec<ebb_query::Value> = args.iter().map(|a| arg_value(a)).collect();
            let deadline = version.runtime().limits().query_deadline;
            let call = |call: abi::call_request::Call| {
                version
                    .call(&decl.name, call, deadline)
                    .map_err(|e| fail(e.to_string()))
            };
            let result = match abi::FunctionKind::try_from(decl.kind) {
                Ok(abi::FunctionKind::Scalar) => {
                    let row = abi::Row {
                        args: values.iter().map(to_proto).collect(),
                    };
                    match call(abi::call_request::Call::Scalar(abi::ScalarBatch {
                        rows: vec![row],
                    }))?
                    .result
                    {
                        Some(abi::call_response::Result::Scalar(r)) if r.values.len() == 1 => {
                            r.values[0].clone()
                        }
                        other => return Err(fail(format!("unexpected response {other:?}"))),
                    }
                }
                Ok(abi::FunctionKind::Aggregate) => {
                    let state = |r: abi::CallResponse| match r.result {
                        Some(abi::call_response::Result::State(s)) => Ok(s),
                        other => Err(fail(format!("unexpected response {other:?}"))),
                    };
                    let init = state(call(abi::call_request::Call::AggInit(abi::AggInit {}))?)?;
                    let rows = values
                        .iter()
                        .map(|v| abi::Row {
                            args: vec![to_proto(v)],
                        })
                        .collect();
                    let updated =
                        state(call(abi::call_request::Call::AggUpdate(abi::AggUpdate {
                            state: init,
                            rows,
                        }))?)?;
                    match call(abi::call_request::Call::AggFinish(abi::AggFinish {
                        state: updated,
                    }))?
                    .result
                    {
                        Some(abi::call_response::Result::Value(v)) => v,
                        other => return Err(fail(format!("unexpected response {other:?}"))),
                    }
                }
                _ => {
                    return Err(fail(format!(
                        "{function} is of a kind this ebb cannot call ({})",
                        decl.kind
                    )));
                }
            };
            let value = from_proto(&result).map_err(|e| fail(e.to_string()))?;
            match format {
                Format::Human => println!(
                    "{}",
                    if value.is_null() {
                        "NULL".to_string()
                    } else {
                        value.render()
                    }
                ),
                _ => println!("{}", ebb_host::codec::to_json(&value)),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `plugin call` on an expiry or change handler: the arguments are its
/// events (of its kind), and the answer is printed as actions and retries.
/// A guest error or trap is an error (exit 1).
fn call_handler(
    version: &ebb_host::plugin::PluginVersion,
    decl: &abi::FunctionDecl,
    args: &[String],
    config: Option<String>,
    records: &[String],
    format: Format,
) -> Result<ExitCode, ClientError> {
    let function = decl.name.as_str();
    let config = match config {
        None => String::new(),
        Some(text) => serde_json::from_str::<Value>(&text)
            .map_err(|e| fail(format!("--config is not JSON: {e}")))?
            .to_string(),
    };
    let reader = std::sync::Arc::new(handler_call::Records::parse(records).map_err(fail)?);
    let deadline = version.runtime().limits().expiry_deadline;
    let call = if ebb_host::plugin::is_expiry_handler(decl) {
        let events = handler_call::events(args).map_err(fail)?;
        abi::call_request::Call::Expiry(abi::ExpiryBatch { events, config })
    } else {
        let events = handler_call::change_events(args).map_err(fail)?;
        abi::call_request::Call::Change(abi::ChangeBatch { events, config })
    };
    let response = version
        .call_handler(function, call, deadline, reader)
        .map_err(|e| fail(e.to_string()))?;
    let Some(abi::call_response::Result::Expiry(result)) = response.result else {
        return Err(fail(format!(
            "{function} answered no ExpiryResult: {response:?}"
        )));
    };
    match format {
        Format::Human => {
            for line in handler_call::answer_lines(&result) {
                println!("{line}");
            }
        }
        _ => println!("{}", handler_call::answer_json(&result)),
    }
    Ok(ExitCode::SUCCESS)
}
