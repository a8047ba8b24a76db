//! Native test helpers that drive a plugin through the encoded ABI path.
//!
//! Every helper encodes a `CallRequest`, runs it through
//! [`Plugin::call_encoded`] (what `ebb_call` runs in wasm) and decodes the
//! `CallResponse`, so tests exercise the same encoding the host sees.

use ebb_proto::Message;
use ebb_proto::plugin::v1 as proto;
use proto::call_request::Call;
use proto::call_response::Result as Reply;

use crate::change::ChangeEvent;
use crate::expiry::{Action, ExpiryEvent, ExpiryOutcome};
use crate::plugin::Plugin;
use crate::value::Value;

/// Sends `request` through the encoded path and decodes the response.
pub fn call(plugin: &Plugin, request: proto::CallRequest) -> proto::CallResponse {
    let bytes = plugin.call_encoded(&request.encode_to_vec());
    proto::CallResponse::decode(bytes.as_slice()).expect("the SDK encodes valid responses")
}

fn request(plugin: &Plugin, function: &str, call_kind: Call) -> Result<Reply, String> {
    let response = call(
        plugin,
        proto::CallRequest {
            function: function.to_owned(),
            call: Some(call_kind),
        },
    );
    match response.result {
        Some(Reply::Error(e)) => Err(e),
        Some(reply) => Ok(reply),
        None => Err("empty response".to_owned()),
    }
}

fn rows(rows: Vec<Vec<Value>>) -> Vec<proto::Row> {
    rows.into_iter()
        .map(|args| proto::Row {
            args: args.into_iter().map(Into::into).collect(),
        })
        .collect()
}

fn unexpected<T>(reply: Reply) -> Result<T, String> {
    Err(format!("unexpected response {reply:?}"))
}

fn state(reply: Reply) -> Result<Vec<u8>, String> {
    match reply {
        Reply::State(state) => Ok(state.to_vec()),
        other => unexpected(other),
    }
}

/// Calls scalar `function` on a batch of rows; one value per row.
pub fn scalar_batch(
    plugin: &Plugin,
    function: &str,
    batch: Vec<Vec<Value>>,
) -> Result<Vec<Value>, String> {
    let batch = proto::ScalarBatch { rows: rows(batch) };
    match request(plugin, function, Call::Scalar(batch))? {
        Reply::Scalar(result) => result
            .values
            .into_iter()
            .map(|v| Value::try_from(v).map_err(|e| e.to_string()))
            .collect(),
        other => unexpected(other),
    }
}

/// Calls scalar `function` on one row.
pub fn scalar(plugin: &Plugin, function: &str, args: Vec<Value>) -> Result<Value, String> {
    let mut values = scalar_batch(plugin, function, vec![args])?;
    match (values.pop(), values.is_empty()) {
        (Some(value), true) => Ok(value),
        _ => Err("expected exactly one value".to_owned()),
    }
}

/// `agg_init`: the state of an empty input.
pub fn agg_init(plugin: &Plugin, function: &str) -> Result<Vec<u8>, String> {
    state(request(plugin, function, Call::AggInit(proto::AggInit {}))?)
}

/// `agg_update`: folds `batch` into `state`.
pub fn agg_update(
    plugin: &Plugin,
    function: &str,
    state_bytes: &[u8],
    batch: Vec<Vec<Value>>,
) -> Result<Vec<u8>, String> {
    let update = proto::AggUpdate {
        state: state_bytes.to_vec().into(),
        rows: rows(batch),
    };
    state(request(plugin, function, Call::AggUpdate(update))?)
}

/// `agg_merge`: combines two partial states.
pub fn agg_merge(
    plugin: &Plugin,
    function: &str,
    left: &[u8],
    right: &[u8],
) -> Result<Vec<u8>, String> {
    let merge = proto::AggMerge {
        left: left.to_vec().into(),
        right: right.to_vec().into(),
    };
    state(request(plugin, function, Call::AggMerge(merge))?)
}

/// `agg_finish`: the result of a state.
pub fn agg_finish(plugin: &Plugin, function: &str, state_bytes: &[u8]) -> Result<Value, String> {
    let finish = proto::AggFinish {
        state: state_bytes.to_vec().into(),
    };
    match request(plugin, function, Call::AggFinish(finish))? {
        Reply::Value(value) => Value::try_from(value).map_err(|e| e.to_string()),
        other => unexpected(other),
    }
}

/// Runs aggregate `function` the way the host does over partitions: one
/// state per partition (init + update), merged left to right, then finished.
/// No partitions is empty input (`finish(init())`).
pub fn aggregate(
    plugin: &Plugin,
    function: &str,
    partitions: Vec<Vec<Vec<Value>>>,
) -> Result<Value, String> {
    let mut total = agg_init(plugin, function)?;
    for partition in partitions {
        let init = agg_init(plugin, function)?;
        let partial = agg_update(plugin, function, &init, partition)?;
        total = agg_merge(plugin, function, &total, &partial)?;
    }
    agg_finish(plugin, function, &total)
}

/// Calls expiry handler `function` on a batch of events, as a binding
/// without `config` would.
pub fn expiry(
    plugin: &Plugin,
    function: &str,
    events: Vec<ExpiryEvent>,
) -> Result<ExpiryOutcome, String> {
    expiry_with_config(plugin, function, events, "")
}

/// Calls expiry handler `function` on a batch of events, as a binding
/// whose `config` is the JSON text `config` would (empty: none); the
/// handler reads it with [`crate::binding::config`].
pub fn expiry_with_config(
    plugin: &Plugin,
    function: &str,
    events: Vec<ExpiryEvent>,
    config: &str,
) -> Result<ExpiryOutcome, String> {
    let batch = proto::ExpiryBatch {
        events: events.into_iter().map(Into::into).collect(),
        config: config.to_owned(),
    };
    outcome(request(plugin, function, Call::Expiry(batch))?)
}

/// Calls change handler `function` on a batch of events, as a binding
/// without `config` would.
pub fn change(
    plugin: &Plugin,
    function: &str,
    events: Vec<ChangeEvent>,
) -> Result<ExpiryOutcome, String> {
    change_with_config(plugin, function, events, "")
}

/// Calls change handler `function` on a batch of events, as a binding
/// whose `config` is the JSON text `config` would (empty: none); the
/// handler reads it with [`crate::binding::config`].
pub fn change_with_config(
    plugin: &Plugin,
    function: &str,
    events: Vec<ChangeEvent>,
    config: &str,
) -> Result<ExpiryOutcome, String> {
    let batch = proto::ChangeBatch {
        events: events.into_iter().map(Into::into).collect(),
        config: config.to_owned(),
    };
    outcome(request(plugin, function, Call::Change(batch))?)
}

/// The outcome an expiry or change handler answered.
fn outcome(reply: Reply) -> Result<ExpiryOutcome, String> {
    let result = match reply {
        Reply::Expiry(result) => result,
        other => return unexpected(other),
    };
    let actions = result
        .actions
        .into_iter()
        .map(|action| {
            Action::from_proto(action).ok_or_else(|| "Action has no field set".to_owned())
        })
        .collect::<Result<_, String>>()?;
    Ok(ExpiryOutcome {
        actions,
        failed: result.failed,
    })
}

/// Makes [`crate::get`]`(table, key)` answer `record` in this thread's
/// native tests (what a handler would read from the host); replaces any
/// record there.
#[cfg(not(target_arch = "wasm32"))]
pub fn put_record(table: &str, key: &str, record: crate::read::Record) {
    crate::read::imp::RECORDS.with(|records| {
        records
            .borrow_mut()
            .insert((table.to_owned(), key.to_owned()), record);
    });
}

/// Forgets every record given to [`put_record`] in this thread.
#[cfg(not(target_arch = "wasm32"))]
pub fn clear_records() {
    crate::read::imp::RECORDS.with(|records| records.borrow_mut().clear());
}
