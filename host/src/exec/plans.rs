//! A bounded, process-wide cache of logical plans that call only built-in
//! functions, by SQL text and parameters: planning (parsing included) is a
//! fixed cost of every query, as large as a whole small key-ordered page.
//!
//! Such a plan is a pure function of its SQL and parameters: unqualified
//! names resolve only to built-ins, which never change, and the planner
//! folds nothing that depends on time or data. Plans that call a plugin or
//! an embedder's native are never cached (they resolve against what is
//! installed now), nor are failed plans (their errors are recomputed).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use ebb_query::{Plan, Value};
use parking_lot::Mutex;
use prost::Message;

use crate::codec::to_proto;

/// Plans held at most; a full cache drops an arbitrary entry per insert.
pub(crate) const MAX_PLANS: usize = 512;

/// Longest key (SQL and encoded parameters) cached: at most
/// `MAX_PLANS * MAX_KEY_BYTES` (2 MiB) of keys, plus their plans.
pub(crate) const MAX_KEY_BYTES: usize = 4096;

static PLANS: LazyLock<Mutex<HashMap<Vec<u8>, Arc<Plan>>>> =
    LazyLock::new(|| Mutex::new(HashMap::with_capacity(MAX_PLANS)));

/// The cache key of `sql` with `params`: the SQL's bytes, a byte no UTF-8
/// text contains, then each parameter's protobuf encoding (length
/// delimited). `None` when it is longer than [`MAX_KEY_BYTES`].
pub(crate) fn key(sql: &str, params: &[Value]) -> Option<Vec<u8>> {
    if sql.len() >= MAX_KEY_BYTES {
        return None;
    }
    let mut key = Vec::with_capacity(sql.len() + 1 + 16 * params.len());
    key.extend_from_slice(sql.as_bytes());
    key.push(0xff);
    for param in params {
        to_proto(param).encode_length_delimited(&mut key).ok()?;
        if key.len() > MAX_KEY_BYTES {
            return None;
        }
    }
    Some(key)
}

/// The cached plan of `key`, if any.
pub(crate) fn get(key: &[u8]) -> Option<Arc<Plan>> {
    PLANS.lock().get(key).cloned()
}

/// Cache `plan` under `key` when it calls only built-ins.
pub(crate) fn insert(key: Vec<u8>, plan: &Arc<Plan>) {
    if !plan.calls_only_builtins() {
        return;
    }
    let mut plans = PLANS.lock();
    if plans.len() >= MAX_PLANS
        && !plans.contains_key(&key)
        && let Some(evicted) = plans.keys().next().cloned()
    {
        plans.remove(&evicted);
    }
    plans.insert(key, plan.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tell_parameters_apart_and_refuse_long_queries() {
        let one = key("SELECT ?", &[Value::Int(1)]).unwrap();
        let text = key("SELECT ?", &[Value::text("1")]).unwrap();
        let none = key("SELECT ?", &[]).unwrap();
        assert!(one != text && one != none && text != none);
        assert_eq!(one, key("SELECT ?", &[Value::Int(1)]).unwrap());
        assert!(key(&"x".repeat(MAX_KEY_BYTES), &[]).is_none());
        assert!(key("SELECT ?", &[Value::text("y".repeat(MAX_KEY_BYTES))]).is_none());
    }
}
