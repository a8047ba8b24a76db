//! The `archive` plugin: an expiry handler that writes each expired value
//! into `<table>_archive` under the same key, without a TTL.
//!
//! Bind it to a table with `PUT /v1/tables/{t}/expiry-handler`
//! `{"plugin": "archive", "function": "copy"}`. Delivery is at least once, so
//! the same event may arrive twice: writing the same key and value again is
//! harmless.

use ebb_guest::{ExpiryEvent, ExpiryOutcome};

/// Longest table name: an archive table name must fit it.
const MAX_TABLE_NAME: usize = 63;

/// Copy every expired record into `<table>_archive`.
pub fn copy(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for (index, event) in events.iter().enumerate() {
        let archive = format!("{}_archive", event.table);
        if archive.len() > MAX_TABLE_NAME {
            // Cannot be written anywhere: let it retry and dead-letter, visibly.
            ebb_guest::log!(
                ebb_guest::Level::Warn,
                "table name {archive} is too long; event {index} not archived"
            );
            outcome.retry(index);
            continue;
        }
        outcome.put(&archive, &event.key, event.value.clone(), 0);
    }
    outcome
}

ebb_guest::export! {
    name: "archive",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        expiry "copy" => copy, "Copy each expired record into <table>_archive (same key, no TTL)";
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
        }
    }

    #[test]
    fn expired_records_are_copied_to_the_archive_table() {
        let outcome = copy(&[
            event("sessions", "s1", b"alice"),
            event("sessions", "s2", b""),
        ]);
        assert!(outcome.failed.is_empty());
        assert_eq!(outcome.actions.len(), 2);
        match &outcome.actions[0] {
            Action::Put {
                table,
                key,
                value,
                ttl_ms,
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
        let outcome = copy(&[event(&long, "k", b"v"), event("ok", "k", b"v")]);
        assert_eq!(outcome.failed, vec![0]);
        assert_eq!(outcome.actions.len(), 1);
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
