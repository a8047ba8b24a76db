//! The `archive` plugin: an expiry handler that writes each expired value
//! into an archive table under the same key.
//!
//! Bind it to a table with `PUT /v1/tables/{t}/expiry-handler`
//! `{"plugin": "archive", "function": "copy"}`: records go to
//! `<table>_archive`, without a TTL. The binding's `config` may name the
//! target and give the copies a TTL:
//! `{"table": "old_sessions", "ttl_ms": 86400000}` (both optional; other
//! fields are refused, so a typo does not archive to the wrong place).
//! Delivery is at least once, so the same event may arrive twice: writing
//! the same key and value again is harmless.

use ebb_guest::{ExpiryEvent, ExpiryOutcome};
use serde::Deserialize;

/// Longest table name: an archive table name must fit it.
const MAX_TABLE_NAME: usize = 63;

/// The binding's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Target table; `<table>_archive` when absent.
    table: Option<String>,
    /// TTL of the copies in ms; none when absent or 0.
    #[serde(default)]
    ttl_ms: u64,
}

/// Copy every expired record into the archive table.
pub fn copy(events: &[ExpiryEvent]) -> Result<ExpiryOutcome, String> {
    let config: Config = match ebb_guest::binding::config() {
        None => Config::default(),
        // A bad config fails every batch (retried, then dead-lettered, with
        // this message in the status) until the binding is fixed.
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| format!("archive: bad binding config {text}: {e}"))?,
    };
    let mut outcome = ExpiryOutcome::default();
    for (index, event) in events.iter().enumerate() {
        let archive = match &config.table {
            Some(table) => table.clone(),
            None => format!("{}_archive", event.table),
        };
        if archive.len() > MAX_TABLE_NAME {
            // Cannot be written anywhere: let it retry and dead-letter, visibly.
            ebb_guest::log!(
                ebb_guest::Level::Warn,
                "table name {archive} is too long; event {index} not archived"
            );
            outcome.retry(index);
            continue;
        }
        outcome.put(&archive, &event.key, event.value.clone(), config.ttl_ms);
    }
    Ok(outcome)
}

ebb_guest::export! {
    name: "archive",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        expiry "copy" => copy, "Copy each expired record into <table>_archive, or the config's table (same key; config ttl_ms, default none)";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_guest::Action;

    fn event(table: &str, key: &str, value: &[u8]) -> ExpiryEvent {
        ExpiryEvent {
            id: vec![1; 32],
            table: table.into(),
            key: key.into(),
            value: value.to_vec(),
            version_ms: 1,
            version_counter: 0,
            expires_at_ms: 2,
            observed_at_ms: 3,
            attempt: 1,
            ..ExpiryEvent::default()
        }
    }

    #[test]
    fn expired_records_are_copied_to_the_archive_table() {
        let outcome = copy(&[
            event("sessions", "s1", b"alice"),
            event("sessions", "s2", b""),
        ])
        .unwrap();
        assert!(outcome.failed.is_empty());
        assert_eq!(outcome.actions.len(), 2);
        match &outcome.actions[0] {
            Action::Put {
                table,
                key,
                value,
                ttl_ms,
                ..
            } => {
                assert_eq!(
                    (table.as_str(), key.as_str(), value.as_slice(), *ttl_ms),
                    ("sessions_archive", "s1", &b"alice"[..], 0)
                );
            }
            other => panic!("expected a put, got {other:?}"),
        }
    }

    #[test]
    fn a_table_whose_archive_name_is_too_long_is_retried_not_dropped() {
        let long = "t".repeat(60);
        let outcome = copy(&[event(&long, "k", b"v"), event("ok", "k", b"v")]).unwrap();
        assert_eq!(outcome.failed, vec![0]);
        assert_eq!(outcome.actions.len(), 1);
    }

    #[test]
    fn the_binding_config_names_the_target_and_the_ttl() {
        let events = vec![event("sessions", "s1", b"alice")];
        let outcome = ebb_guest::testing::expiry_with_config(
            plugin(),
            "copy",
            events.clone(),
            r#"{"table": "old_sessions", "ttl_ms": 60000}"#,
        )
        .unwrap();
        assert_eq!(
            outcome.actions,
            vec![Action::Put {
                table: "old_sessions".into(),
                key: "s1".into(),
                value: b"alice".to_vec(),
                ttl_ms: 60_000,
                condition: ebb_guest::Condition::Always,
            }]
        );
        let error =
            ebb_guest::testing::expiry_with_config(plugin(), "copy", events, r#"{"tabel": "x"}"#)
                .unwrap_err();
        assert!(error.contains("bad binding config"), "{error}");
    }

    #[test]
    fn the_manifest_declares_an_expiry_handler() {
        let manifest = plugin().manifest();
        assert_eq!(manifest.name, "archive");
        assert_eq!(manifest.functions[0].name, "copy");
        assert_eq!(
            manifest.functions[0].kind,
            ebb_guest::proto::FunctionKind::ExpiryHandler as i32
        );
    }
}
