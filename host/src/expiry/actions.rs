//! A handler's answer: validating it into actions, and writing them through
//! [`ActionWriter`], the node's write path seen from expiry (the node
//! implements it; expiry does not depend on the node).

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use ebb_proto::plugin::v1 as abi;
use futures::future::BoxFuture;

use super::error::{Failure, HandlerFailed, HostFailed, InvalidAction, InvalidAnswer};
use crate::clock::now_ms;
use crate::names::{TableName, validate_key};
use crate::record::{MAX_EXPIRES_AT_MS, Version};
use crate::write::{Condition, Origin};

/// One validated action of a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Put `value` at `key`, expiring `ttl_ms` after the write (0: never).
    Put {
        /// The key (valid).
        key: String,
        /// The value (within `max_value_bytes`).
        value: Bytes,
        /// Time to live in ms; 0 for none.
        ttl_ms: u64,
        /// When the put applies.
        condition: Condition,
    },
    /// Delete `key`.
    Delete {
        /// The key (valid).
        key: String,
        /// When the delete applies.
        condition: Condition,
    },
}

impl Action {
    fn key(&self) -> &str {
        match self {
            Action::Put { key, .. } | Action::Delete { key, .. } => key,
        }
    }
}

/// An action skipped because its condition did not hold: reported, not a
/// failure of the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// The action's table.
    pub table: TableName,
    /// The action's key.
    pub key: String,
    /// The key's visible version when the action was judged (`None`: no
    /// visible record).
    pub current: Option<Version>,
}

/// Why the node did not write a set of actions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ActionError {
    /// The write path refused an action (bad name, value too large, bad
    /// TTL): the handler's fault, charged.
    #[error("{0}")]
    Rejected(String),
    /// The node could not apply them (overloaded, store failing, shutting
    /// down): not charged.
    #[error("{0}")]
    Unavailable(String),
}

/// Where handler actions are written: the node's normal write path, with
/// `wal` durability.
pub(crate) trait ActionWriter: Send + Sync + 'static {
    /// Apply `actions` to `table`, each independently, and return once all
    /// are durable (`wal`) or one failed. No key repeats among them. `Ok`
    /// lists the actions whose condition did not hold (nothing written for
    /// them). `origin` is who they are written as: a change handler's
    /// writes emit no change events.
    fn write(
        &self,
        table: TableName,
        actions: Vec<Action>,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Vec<Skipped>, ActionError>>;
}

/// A handler's answer, validated.
#[derive(Debug)]
pub(crate) struct HandlerOutcome {
    /// The actions to apply, in order.
    pub actions: Vec<(TableName, Action)>,
    /// Indexes of the events to retry.
    pub failed: Vec<u32>,
}

/// What a handler answered for a batch of `count` events, validated: the
/// actions to apply and the indexes of the events to retry. Anything out
/// of range (an index past the batch, too many actions, a bad table, key,
/// value or TTL) fails the whole call.
pub(crate) fn handler_outcome(
    response: abi::CallResponse,
    handler: &str,
    count: usize,
    max_actions_per_event: usize,
    max_value_bytes: usize,
) -> Result<HandlerOutcome, InvalidAnswer> {
    let Some(abi::call_response::Result::Expiry(result)) = response.result else {
        return Err(InvalidAnswer::NotExpiryResult {
            handler: handler.to_string(),
        });
    };
    if let Some(&index) = result.failed.iter().find(|&&i| i as usize >= count) {
        return Err(InvalidAnswer::FailedOutOfRange { index, count });
    }
    if result.actions.len() > count * max_actions_per_event {
        return Err(InvalidAnswer::TooManyActions {
            actions: result.actions.len(),
            count,
            per_event: max_actions_per_event,
        });
    }
    let actions = result
        .actions
        .into_iter()
        .enumerate()
        .map(|(index, action)| {
            to_action(action, max_value_bytes)
                .map_err(|reason| InvalidAnswer::Action { index, reason })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HandlerOutcome {
        actions,
        failed: result.failed,
    })
}

/// A validated action.
fn to_action(
    action: abi::Action,
    max_value_bytes: usize,
) -> Result<(TableName, Action), InvalidAction> {
    match action.action {
        Some(abi::action::Action::Put(put)) => {
            let table = TableName::new(&put.table)?;
            validate_key(&put.key)?;
            if put.value.len() > max_value_bytes {
                return Err(InvalidAction::ValueTooLarge {
                    len: put.value.len(),
                    limit: max_value_bytes,
                });
            }
            let condition = condition(&put.if_version, put.if_absent)?;
            if put.ttl_ms > 0 {
                let deadline = now_ms().saturating_add(put.ttl_ms);
                if deadline > MAX_EXPIRES_AT_MS {
                    return Err(InvalidAction::Deadline {
                        deadline,
                        max: MAX_EXPIRES_AT_MS,
                    });
                }
            }
            Ok((
                table,
                Action::Put {
                    key: put.key,
                    value: put.value,
                    ttl_ms: put.ttl_ms,
                    condition,
                },
            ))
        }
        Some(abi::action::Action::Delete(delete)) => {
            let table = TableName::new(&delete.table)?;
            validate_key(&delete.key)?;
            let condition = condition(&delete.if_version, false)?;
            Ok((
                table,
                Action::Delete {
                    key: delete.key,
                    condition,
                },
            ))
        }
        None => Err(InvalidAction::Empty),
    }
}

/// An action's condition from its `if_version` (empty: none) and
/// `if_absent` fields.
fn condition(if_version: &str, if_absent: bool) -> Result<Condition, InvalidAction> {
    match (if_version, if_absent) {
        ("", false) => Ok(Condition::Always),
        ("", true) => Ok(Condition::Absent),
        (_, true) => Err(InvalidAction::TwoConditions),
        (text, false) => Ok(Condition::Version(text.parse()?)),
    }
}

/// Rounds of actions in which no `(table, key)` repeats, each grouped by
/// table, so that applying the rounds one after the other (and a round's
/// tables concurrently) applies several actions on one key in order.
fn rounds(actions: Vec<(TableName, Action)>) -> Vec<BTreeMap<TableName, Vec<Action>>> {
    let mut rounds: Vec<BTreeMap<TableName, Vec<Action>>> = Vec::new();
    let mut seen: Vec<HashSet<(TableName, String)>> = Vec::new();
    for (table, action) in actions {
        let id = (table.clone(), action.key().to_string());
        let round = seen
            .iter()
            .rposition(|keys| keys.contains(&id))
            .map_or(0, |last| last + 1);
        if round == rounds.len() {
            rounds.push(BTreeMap::new());
            seen.push(HashSet::new());
        }
        // Later rounds never hold the key, so it may join the first round
        // after its last occurrence.
        seen[round].insert(id);
        rounds[round].entry(table).or_default().push(action);
    }
    rounds
}

/// Apply actions through `writer` with `wal` durability, in order: rounds
/// in which no key repeats, one after the other, each round's tables at
/// once. `Ok` lists the actions skipped because their condition did not
/// hold.
pub(crate) async fn apply(
    writer: &dyn ActionWriter,
    actions: Vec<(TableName, Action)>,
    origin: Origin,
) -> Result<Vec<Skipped>, Failure> {
    let mut skipped = Vec::new();
    for round in rounds(actions) {
        let writes = round.into_iter().map(|(table, actions)| {
            let name = table.to_string();
            let write = writer.write(table, actions, origin);
            async move {
                write.await.map_err(|error| match error {
                    ActionError::Rejected(reason) => Failure::Handler(HandlerFailed::Rejected {
                        table: name,
                        reason,
                    }),
                    ActionError::Unavailable(reason) => Failure::Host(HostFailed::Unavailable {
                        table: name,
                        reason,
                    }),
                })
            }
        });
        for result in futures::future::join_all(writes).await {
            skipped.extend(result?);
        }
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(table: &str, key: &str, value: &str) -> (TableName, Action) {
        (
            TableName::new(table).unwrap(),
            Action::Put {
                key: key.into(),
                value: Bytes::from(value.to_string()),
                ttl_ms: 0,
                condition: Condition::Always,
            },
        )
    }

    #[test]
    fn actions_on_one_key_go_in_separate_rounds_in_order() {
        let rounds = rounds(vec![
            put("a", "k", "1"),
            put("b", "k", "x"),
            put("a", "k", "2"),
            put("a", "j", "y"),
            put("a", "k", "3"),
        ]);
        let values = |round: &BTreeMap<TableName, Vec<Action>>, table: &str| -> Vec<String> {
            round
                .get(&TableName::new(table).unwrap())
                .into_iter()
                .flatten()
                .map(|a| match a {
                    Action::Put { key, value, .. } => {
                        format!("{key}={}", String::from_utf8_lossy(value))
                    }
                    Action::Delete { key, .. } => format!("-{key}"),
                })
                .collect()
        };
        assert_eq!(rounds.len(), 3);
        assert_eq!(values(&rounds[0], "a"), vec!["k=1", "j=y"]);
        assert_eq!(values(&rounds[0], "b"), vec!["k=x"]);
        assert_eq!(values(&rounds[1], "a"), vec!["k=2"]);
        assert_eq!(values(&rounds[2], "a"), vec!["k=3"]);
    }

    #[test]
    fn an_out_of_range_ttl_fails_the_answer() {
        let response = abi::CallResponse {
            result: Some(abi::call_response::Result::Expiry(abi::ExpiryResult {
                actions: vec![abi::Action {
                    action: Some(abi::action::Action::Put(abi::Put {
                        table: "t".into(),
                        key: "k".into(),
                        value: Bytes::new(),
                        ttl_ms: u64::MAX,
                        ..abi::Put::default()
                    })),
                }],
                failed: vec![],
            })),
        };
        let error = handler_outcome(response, "p.h", 1, 16, 1024).unwrap_err();
        assert!(
            matches!(
                error,
                InvalidAnswer::Action {
                    index: 0,
                    reason: InvalidAction::Deadline { .. }
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("invalid TTL"), "{error}");
    }

    /// Whatever a handler answers is validated actions or an error for
    /// the whole call, never a panic or an action out of bounds.
    mod fuzz {
        use ebb_proto::Message;
        use proptest::prelude::*;

        use super::*;
        use crate::plugin::fuzz::{config, response_bytes};

        const MAX_ACTIONS: usize = 16;
        const MAX_VALUE: usize = 1024;

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn any_handler_answer_is_validated_actions_or_an_error(
                bytes in response_bytes(),
                count in 1usize..20,
            ) {
                let Ok(response) = abi::CallResponse::decode(bytes.as_slice()) else {
                    return Ok(());
                };
                match handler_outcome(response, "p.h", count, MAX_ACTIONS, MAX_VALUE) {
                    Ok(HandlerOutcome { actions, failed }) => {
                        prop_assert!(failed.iter().all(|&i| (i as usize) < count));
                        prop_assert!(actions.len() <= count * MAX_ACTIONS);
                        for (_, action) in &actions {
                            match action {
                                Action::Put { key, value, ttl_ms, .. } => {
                                    prop_assert!(validate_key(key).is_ok());
                                    prop_assert!(value.len() <= MAX_VALUE);
                                    prop_assert!(now_ms().saturating_add(*ttl_ms) <= MAX_EXPIRES_AT_MS);
                                }
                                Action::Delete { key, .. } => prop_assert!(validate_key(key).is_ok()),
                            }
                        }
                    }
                    Err(error) => prop_assert!(!error.to_string().is_empty()),
                }
            }
        }
    }
}
