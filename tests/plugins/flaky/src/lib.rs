//! Test plugin `flaky`: an expiry handler `copy` that behaves by value prefix,
//! for the expiry tests.
//!
//! - `poison…`: traps (panics), failing the whole call;
//! - `fail…`: asks for a retry of that event, and records the attempt as a
//!   put of `<table>_attempts/<key>:<attempt>`;
//! - `slow…`: spins for a while before handling the event normally;
//! - anything else: copied into `<table>_archive`, like the `archive` plugin.
//!
//! Replacing it with `archive` (same function name `copy`) "fixes" it.

use ebb_guest::{ExpiryEvent, ExpiryOutcome};

/// Handle a batch as described in the module docs.
pub fn copy(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for (index, event) in events.iter().enumerate() {
        let value = event.value.as_slice();
        if value.starts_with(b"poison") {
            panic!("poison event {}", event.key);
        }
        if value.starts_with(b"fail") {
            let attempts = format!("{}_attempts", event.table);
            let key = format!("{}:{}", event.key, event.attempt);
            outcome.put(&attempts, &key, Vec::new(), 0);
            outcome.retry(index);
            continue;
        }
        if value.starts_with(b"slow") {
            spin(30_000_000);
        }
        outcome.put(
            &format!("{}_archive", event.table),
            &event.key,
            event.value.clone(),
            0,
        );
    }
    outcome
}

/// Burn CPU for roughly `rounds` loop iterations.
fn spin(rounds: u64) {
    let mut x = 0u64;
    for i in 0..rounds {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    std::hint::black_box(x);
}

ebb_guest::export! {
    name: "flaky",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        expiry "copy" => copy, "Archive, retry (fail*), trap (poison*) or stall (slow*) by value prefix";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str, value: &[u8]) -> ExpiryEvent {
        ExpiryEvent {
            id: vec![0; 32],
            table: "t".into(),
            key: key.into(),
            value: value.to_vec(),
            version_ms: 1,
            version_counter: 0,
            expires_at_ms: 2,
            observed_at_ms: 3,
            attempt: 2,
        }
    }

    #[test]
    fn failing_events_are_retried_and_recorded_others_archived() {
        let outcome = copy(&[event("a", b"fail"), event("b", b"ok")]);
        assert_eq!(outcome.failed, vec![0]);
        assert_eq!(outcome.actions.len(), 2);
        assert!(
            matches!(&outcome.actions[0], ebb_guest::Action::Put { table, key, .. } if table == "t_attempts" && key == "a:2")
        );
        assert!(
            matches!(&outcome.actions[1], ebb_guest::Action::Put { table, .. } if table == "t_archive")
        );
    }

    #[test]
    #[should_panic(expected = "poison")]
    fn poison_traps() {
        copy(&[event("p", b"poison")]);
    }
}
