//! `ebb sql` at a terminal: a line editor (rustyline) with history kept
//! across sessions, statements that span lines until `;`, tab completion
//! of table, column, function and command names, and `\d`-style commands.

use std::path::PathBuf;
use std::process::ExitCode;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use serde_json::Value;

use super::Format;
use super::client::{Client, encode_segment};
use super::sql::{SqlOptions, run};

/// Most history entries kept.
const HISTORY_SIZE: usize = 1000;

/// SQL words offered by completion beside the server's names.
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT JOIN",
    "ON",
    "AS",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "IS",
    "IN",
    "LIKE",
    "BETWEEN",
    "DISTINCT",
    "COUNT",
    "EXPLAIN",
    "ASC",
    "DESC",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "HAVING",
];

/// The record columns every table has (docs/sql.md).
const COLUMNS: &[&str] = &["key", "value", "_version_ms", "_expires_at", "_fragment"];

/// SQL functions built in (a common subset, for completion only).
const BUILTINS: &[&str] = &[
    "length",
    "lower",
    "upper",
    "substr",
    "trim",
    "replace",
    "instr",
    "abs",
    "round",
    "coalesce",
    "ifnull",
    "typeof",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "group_concat",
    "json_extract",
    "datetime",
    "date",
    "unixepoch",
    "strftime",
    "printf",
    "hex",
];

/// The backslash commands.
const COMMANDS: &[(&str, &str)] = &[
    ("\\d", "list tables with their records and memory"),
    ("\\d TABLE", "describe a table: its columns and handlers"),
    ("\\df", "list plugin functions"),
    ("\\?", "this help"),
    ("\\q", "quit"),
];

/// Names to complete, read from the server when the prompt starts and
/// after `\d`.
#[derive(Default)]
struct Names {
    words: Vec<String>,
}

impl Names {
    fn load(client: &Client) -> Self {
        let mut words: Vec<String> = KEYWORDS
            .iter()
            .chain(COLUMNS)
            .chain(BUILTINS)
            .map(|w| w.to_string())
            .collect();
        words.extend(
            COMMANDS
                .iter()
                .map(|(c, _)| c.split(' ').next().unwrap_or(c).to_string()),
        );
        if let Ok(tables) = client
            .send("GET", "/v1/tables", None)
            .and_then(|r| r.json())
        {
            words.extend(
                tables["tables"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["name"].as_str().map(str::to_string)),
            );
        }
        if let Ok(plugins) = client
            .send("GET", "/v1/plugins", None)
            .and_then(|r| r.json())
        {
            for plugin in plugins["plugins"].as_array().into_iter().flatten() {
                let name = plugin["name"].as_str().unwrap_or_default();
                for function in plugin["functions"].as_array().into_iter().flatten() {
                    if let Some(f) = function["name"].as_str() {
                        words.push(format!("{name}.{f}"));
                    }
                }
            }
        }
        words.sort();
        words.dedup();
        Self { words }
    }
}

/// The editor's helper: completion and multi-line statements.
struct SqlHelper {
    names: Names,
}

impl Completer for SqlHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '\\'))
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        if word.is_empty() {
            return Ok((start, Vec::new()));
        }
        let lower = word.to_ascii_lowercase();
        let matches = self
            .names
            .words
            .iter()
            .filter(|w| w.to_ascii_lowercase().starts_with(&lower))
            .map(|w| {
                // Keywords complete in the case the user types.
                let replacement = if w.chars().any(|c| c.is_ascii_uppercase())
                    && word.chars().all(|c| !c.is_ascii_uppercase())
                {
                    w.to_ascii_lowercase()
                } else {
                    w.clone()
                };
                Pair {
                    display: w.clone(),
                    replacement,
                }
            })
            .collect();
        Ok((start, matches))
    }
}

impl Hinter for SqlHelper {
    type Hint = String;
}

impl Highlighter for SqlHelper {}

impl Validator for SqlHelper {
    /// A statement goes on until `;`; a backslash command, `exit`, `quit`
    /// and an empty line end at once.
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if complete(ctx.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Helper for SqlHelper {}

/// Whether `input` is a whole entry: a statement ending with `;`, a
/// backslash command, `exit`/`quit`, or nothing.
fn complete(input: &str) -> bool {
    let text = input.trim();
    text.is_empty()
        || text.starts_with('\\')
        || text.eq_ignore_ascii_case("exit")
        || text.eq_ignore_ascii_case("quit")
        || text.ends_with(';')
}

/// Where history is kept: `$EBB_HISTORY`, else `~/.ebb_history`.
fn history_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("EBB_HISTORY") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".ebb_history"))
}

/// Run the prompt until `\q`, `exit`, `quit` or end of input (Ctrl-D).
/// Ctrl-C abandons the statement being typed.
pub fn interactive(client: &Client, format: Format, options: &SqlOptions) -> ExitCode {
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_SIZE)
        .map(|b| b.auto_add_history(false).build())
        .unwrap_or_default();
    let mut editor: Editor<SqlHelper, DefaultHistory> = match Editor::with_config(config) {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("error: cannot start the line editor: {error}");
            return ExitCode::FAILURE;
        }
    };
    editor.set_helper(Some(SqlHelper {
        names: Names::load(client),
    }));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    println!("ebb sql: end statements with ;  \\? for help, \\q to quit");
    loop {
        let line = match editor.readline("ebb> ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                eprintln!("error: {error}");
                break;
            }
        };
        let entry = line.trim();
        if entry.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(entry);
        if let Some(path) = &history {
            // Saved after each entry, so a killed terminal keeps it.
            let _ = editor.save_history(path);
        }
        if entry == "\\q"
            || entry.eq_ignore_ascii_case("exit")
            || entry.eq_ignore_ascii_case("quit")
        {
            break;
        }
        if let Some(command) = entry.strip_prefix('\\') {
            backslash(client, command.trim_end_matches(';').trim());
            if let Some(helper) = editor.helper_mut() {
                helper.names = Names::load(client);
            }
            continue;
        }
        let query = entry.trim_end_matches(';').trim();
        if let Err(error) = run(client, format, Some(query), options) {
            eprintln!("error: {error}");
        }
    }
    ExitCode::SUCCESS
}

/// Run one backslash command.
fn backslash(client: &Client, command: &str) {
    let (name, argument) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(n, a)| (n, a.trim()));
    let answer = |path: &str| client.send("GET", path, None).and_then(|r| r.json());
    match (name, argument) {
        ("d", "") => match answer("/v1/tables") {
            Ok(json) => {
                println!(
                    "{:<32} {:>12} {:>12} {:>14}",
                    "table", "records", "tombstones", "memory bytes"
                );
                for table in json["tables"].as_array().into_iter().flatten() {
                    println!(
                        "{:<32} {:>12} {:>12} {:>14}",
                        table["name"].as_str().unwrap_or_default(),
                        table["live_records"].to_string(),
                        table["tombstones"].to_string(),
                        table["memory_bytes"].to_string()
                    );
                }
            }
            Err(error) => eprintln!("error: {error}"),
        },
        ("d", table) => describe(client, table),
        ("df", _) => match answer("/v1/plugins") {
            Ok(json) => {
                println!(
                    "{:<32} {:<16} {:>5}  description",
                    "function", "kind", "args"
                );
                for plugin in json["plugins"].as_array().into_iter().flatten() {
                    let name = plugin["name"].as_str().unwrap_or_default();
                    for f in plugin["functions"].as_array().into_iter().flatten() {
                        println!(
                            "{:<32} {:<16} {:>5}  {}",
                            format!("{name}.{}", f["name"].as_str().unwrap_or_default()),
                            f["kind"].as_str().unwrap_or_default(),
                            f["arg_count"].to_string(),
                            f["description"].as_str().unwrap_or_default()
                        );
                    }
                }
            }
            Err(error) => eprintln!("error: {error}"),
        },
        ("?", _) | ("h", _) | ("help", _) => {
            for (command, what) in COMMANDS {
                println!("{command:<10} {what}");
            }
            println!(
                "statements end with ; and may span lines; Tab completes names; Up and Down walk the history"
            );
        }
        _ => eprintln!("error: unknown command \\{command}; \\? lists the commands"),
    }
}

/// `\d TABLE`: its columns, size and handlers.
fn describe(client: &Client, table: &str) {
    let tables = client
        .send("GET", "/v1/tables", None)
        .and_then(|r| r.json());
    let found: Option<Value> = tables.ok().and_then(|json| {
        json["tables"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(table))
            })
            .cloned()
    });
    let Some(found) = found else {
        eprintln!("error: no table {table} (a table exists once written); \\d lists them");
        return;
    };
    println!("table {}", found["name"].as_str().unwrap_or(table));
    for (column, kind) in [
        ("key", "text"),
        ("value", "bytes"),
        ("_version_ms", "integer"),
        ("_expires_at", "integer or NULL"),
        ("_fragment", "integer"),
    ] {
        println!("  {column:<14} {kind}");
    }
    println!(
        "  {} records, {} tombstones, {} bytes of memory",
        found["live_records"], found["tombstones"], found["memory_bytes"]
    );
    for kind in ["expiry", "change"] {
        let path = format!("/v1/tables/{}/{kind}-handler", encode_segment(table));
        if let Ok(status) = client.send("GET", &path, None).and_then(|r| r.json())
            && let Some(binding) = status["binding"].as_object()
        {
            println!(
                "  {kind} handler: {}.{}",
                binding["plugin"].as_str().unwrap_or_default(),
                binding["function"].as_str().unwrap_or_default()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_go_on_until_a_semicolon_and_commands_end_at_once() {
        assert!(!complete("SELECT key"));
        assert!(!complete("SELECT key\nFROM t"));
        assert!(complete("SELECT key\nFROM t;"));
        assert!(complete("\\d"));
        assert!(complete("quit") && complete("  "));
    }
}
