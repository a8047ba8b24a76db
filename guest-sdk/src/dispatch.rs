//! The general call path: a decoded `CallRequest` answered by kind (scalar
//! batch, aggregate init/update/merge/finish, expiry or change batch), every
//! failure turned into a `CallResponse` error. The fast path (`fastpath.rs`)
//! takes the hot calls first and answers exactly as this path would.

use ebb_proto::plugin::v1 as proto;
use proto::call_request::Call;
use proto::call_response::Result as Reply;

use crate::change::ChangeEvent;
use crate::expiry::ExpiryEvent;
use crate::registry::{Function, Handler, Registry};
use crate::value::{Value, ValueRef};

/// Answers one request from `registry`. Every failure — unknown function,
/// wrong call kind, bad arguments, an `Err` from the function — becomes
/// `CallResponse { error }` naming `plugin.function`; this never panics on
/// bad input.
pub(crate) fn call(registry: &Registry, request: proto::CallRequest) -> proto::CallResponse {
    let qualified = format!("{}.{}", registry.plugin, request.function);
    let result = match registry.function(&request.function) {
        None if request.function.is_empty() => {
            return error_response(format!("{}: request names no function", registry.plugin));
        }
        Some(function) => dispatch(function, request.call),
        None => Err(format!(
            "no such function (the plugin has: {})",
            registry
                .functions
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    match result {
        Ok(reply) => proto::CallResponse {
            result: Some(reply),
        },
        Err(e) => error_response(format!("{qualified}: {e}")),
    }
}

/// A response carrying only `message` as its error.
pub(crate) fn error_response(message: String) -> proto::CallResponse {
    proto::CallResponse {
        result: Some(Reply::Error(message)),
    }
}

fn dispatch(function: &Function, call: Option<Call>) -> Result<Reply, String> {
    let call = call.ok_or("request has no call set")?;
    match (&function.handler, call) {
        (Handler::Scalar(f), Call::Scalar(batch)) => {
            let mut values = Vec::with_capacity(batch.rows.len());
            for (index, row) in batch.rows.into_iter().enumerate() {
                let args = row_values(function.arg_count, row, index)?;
                let value = f(args).map_err(|e| format!("row {index}: {e}"))?;
                values.push(value.into());
            }
            Ok(Reply::Scalar(proto::ScalarResult { values }))
        }
        (Handler::ScalarRef(f), Call::Scalar(batch)) => {
            let mut values = Vec::with_capacity(batch.rows.len());
            for (index, row) in batch.rows.into_iter().enumerate() {
                let args = row_values(function.arg_count, row, index)?;
                let borrowed: Vec<ValueRef<'_>> = args.iter().map(Value::as_ref).collect();
                let value = f(&borrowed).map_err(|e| format!("row {index}: {e}"))?;
                values.push(value.into());
            }
            Ok(Reply::Scalar(proto::ScalarResult { values }))
        }
        (Handler::Aggregate(agg), Call::AggInit(_)) => Ok(Reply::State(agg.init().into())),
        (Handler::Aggregate(agg), Call::AggUpdate(update)) => {
            let rows = update
                .rows
                .into_iter()
                .enumerate()
                .map(|(index, row)| row_values(function.arg_count, row, index))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Reply::State(agg.update(&update.state, rows)?.into()))
        }
        (Handler::Aggregate(agg), Call::AggMerge(merge)) => {
            Ok(Reply::State(agg.merge(&merge.left, &merge.right)?.into()))
        }
        (Handler::Aggregate(agg), Call::AggFinish(finish)) => {
            Ok(Reply::Value(agg.finish(&finish.state)?.into()))
        }
        (Handler::Expiry(f), Call::Expiry(batch)) => {
            let events: Vec<ExpiryEvent> = batch.events.into_iter().map(Into::into).collect();
            let outcome = crate::binding::with_config(batch.config, || f(&events))?;
            Ok(Reply::Expiry(outcome.into_proto(events.len())?))
        }
        (Handler::Change(f), Call::Change(batch)) => {
            let events: Vec<ChangeEvent> = batch.events.into_iter().map(Into::into).collect();
            let outcome = crate::binding::with_config(batch.config, || f(&events))?;
            Ok(Reply::Expiry(outcome.into_proto(events.len())?))
        }
        (handler, call) => Err(format!(
            "is {}; it cannot answer {} call",
            match handler {
                Handler::Scalar(_) | Handler::ScalarRef(_) => "a scalar function",
                Handler::Aggregate(_) => "an aggregate",
                Handler::Expiry(_) => "an expiry handler",
                Handler::Change(_) => "a change handler",
            },
            match call {
                Call::Scalar(_) => "a scalar",
                Call::AggInit(_) => "an agg_init",
                Call::AggUpdate(_) => "an agg_update",
                Call::AggMerge(_) => "an agg_merge",
                Call::AggFinish(_) => "an agg_finish",
                Call::Expiry(_) => "an expiry",
                Call::Change(_) => "a change",
            }
        )),
    }
}

/// Converts one row's arguments, checking the declared argument count.
fn row_values(arg_count: i32, row: proto::Row, index: usize) -> Result<Vec<Value>, String> {
    if arg_count >= 0 && row.args.len() != arg_count as usize {
        return Err(format!(
            "row {index}: takes {arg_count} arguments, got {}",
            row.args.len()
        ));
    }
    row.args
        .into_iter()
        .enumerate()
        .map(|(position, arg)| {
            Value::try_from(arg).map_err(|e| format!("row {index}, argument {}: {e}", position + 1))
        })
        .collect()
}
