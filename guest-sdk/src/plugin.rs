//! The function registry of a plugin, its manifest, and request dispatch.

use ebb_proto::Message;
use ebb_proto::plugin::v1 as proto;
use proto::call_request::Call;
use proto::call_response::Result as Reply;

use crate::aggregate::{Aggregate, AggregateOf, ErasedAggregate};
use crate::expiry::{ExpiryEvent, ExpiryOutput};
use crate::scalar::ScalarFn;
use crate::value::{Value, ValueRef};

/// The ABI version this SDK implements.
pub const ABI_VERSION: u32 = 1;

type ScalarHandler = Box<dyn Fn(Vec<Value>) -> Result<Value, String> + Send + Sync>;
pub(crate) type ScalarRefHandler =
    Box<dyn Fn(&[ValueRef<'_>]) -> Result<Value, String> + Send + Sync>;
type ExpiryHandler =
    Box<dyn Fn(&[ExpiryEvent]) -> Result<crate::ExpiryOutcome, String> + Send + Sync>;

enum Handler {
    Scalar(ScalarHandler),
    ScalarRef(ScalarRefHandler),
    Aggregate(Box<dyn ErasedAggregate>),
    Expiry(ExpiryHandler),
}

struct Function {
    name: String,
    description: String,
    arg_count: i32,
    handler: Handler,
}

/// A plugin: its name, version and functions. Built once by [`export!`](crate::export)
/// and then only read, so dispatch never mutates it.
pub struct Plugin {
    name: String,
    version: String,
    functions: Vec<Function>,
}

impl Plugin {
    /// A plugin with no functions yet.
    pub fn new(name: &str, version: &str) -> Self {
        Plugin {
            name: name.to_owned(),
            version: version.to_owned(),
            functions: Vec::new(),
        }
    }

    /// The plugin name from the manifest.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin version from the manifest.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn add(mut self, name: &str, description: &str, arg_count: i32, handler: Handler) -> Self {
        // Two functions with one name is a bug in the plugin's source; it
        // shows in the first native test that builds the plugin.
        assert!(
            self.function(name).is_none(),
            "plugin `{}` declares function `{name}` twice",
            self.name
        );
        self.functions.push(Function {
            name: name.to_owned(),
            description: description.to_owned(),
            arg_count,
            handler,
        });
        self
    }

    /// Registers a scalar function; its arity comes from its signature.
    pub fn scalar<Args, F: ScalarFn<Args>>(self, name: &str, description: &str, f: F) -> Self {
        let call: ScalarHandler = Box::new(move |args| f.call_row(args));
        self.add(name, description, F::ARG_COUNT, Handler::Scalar(call))
    }

    /// Registers an aggregate function.
    pub fn aggregate<A: Aggregate>(self, name: &str, description: &str) -> Self {
        let erased = AggregateOf::<A>::new();
        let arg_count = erased.arg_count();
        self.add(
            name,
            description,
            arg_count,
            Handler::Aggregate(Box::new(erased)),
        )
    }

    /// Registers a scalar function of `arg_count` arguments (-1: variadic)
    /// that reads its arguments borrowed: text and bytes point into the
    /// request, so a row costs no allocation. The function gets NULLs too.
    pub fn scalar_ref<F, R>(self, name: &str, description: &str, arg_count: i32, f: F) -> Self
    where
        F: Fn(&[ValueRef<'_>]) -> R + Send + Sync + 'static,
        R: crate::ScalarOutput,
    {
        let call: ScalarRefHandler = Box::new(move |args| f(args).into_output());
        self.add(name, description, arg_count, Handler::ScalarRef(call))
    }

    /// Registers an expiry handler.
    pub fn expiry<F, R>(self, name: &str, description: &str, f: F) -> Self
    where
        F: Fn(&[ExpiryEvent]) -> R + Send + Sync + 'static,
        R: ExpiryOutput,
    {
        let call: ExpiryHandler = Box::new(move |events| f(events).into_outcome());
        self.add(name, description, 1, Handler::Expiry(call))
    }

    fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The manifest the host reads at upload.
    pub fn manifest(&self) -> proto::Manifest {
        let functions = self
            .functions
            .iter()
            .map(|f| proto::FunctionDecl {
                name: f.name.clone(),
                kind: match f.handler {
                    Handler::Scalar(_) | Handler::ScalarRef(_) => proto::FunctionKind::Scalar,
                    Handler::Aggregate(_) => proto::FunctionKind::Aggregate,
                    Handler::Expiry(_) => proto::FunctionKind::ExpiryHandler,
                } as i32,
                arg_count: f.arg_count,
                description: f.description.clone(),
            })
            .collect();
        proto::Manifest {
            abi_version: ABI_VERSION,
            name: self.name.clone(),
            version: self.version.clone(),
            functions,
        }
    }

    /// The handler and declared argument count of scalar function `name`.
    pub(crate) fn scalar_handler(&self, name: &str) -> Option<(ScalarKind<'_>, i32)> {
        match self.function(name) {
            Some(Function {
                handler: Handler::Scalar(handler),
                arg_count,
                ..
            }) => Some((ScalarKind::Owned(handler), *arg_count)),
            Some(Function {
                handler: Handler::ScalarRef(handler),
                arg_count,
                ..
            }) => Some((ScalarKind::Borrowed(handler), *arg_count)),
            _ => None,
        }
    }

    /// The aggregate and declared argument count of aggregate `name`.
    pub(crate) fn aggregate_handler(&self, name: &str) -> Option<(&dyn ErasedAggregate, i32)> {
        match self.function(name) {
            Some(Function {
                handler: Handler::Aggregate(aggregate),
                arg_count,
                ..
            }) => Some((aggregate.as_ref(), *arg_count)),
            _ => None,
        }
    }

    /// Answers one request. Every failure — unknown function, wrong call kind,
    /// bad arguments, an `Err` from the function — becomes
    /// `CallResponse { error }` naming `plugin.function`; this never panics on
    /// bad input.
    pub fn call(&self, request: proto::CallRequest) -> proto::CallResponse {
        let qualified = format!("{}.{}", self.name, request.function);
        let result = match self.function(&request.function) {
            None if request.function.is_empty() => {
                return error_response(format!("{}: request names no function", self.name));
            }
            Some(function) => dispatch(function, request.call),
            None => Err(format!(
                "no such function (the plugin has: {})",
                self.functions
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

    /// [`Plugin::call`] on encoded bytes: decodes a `CallRequest`, encodes the
    /// `CallResponse`. This is exactly what `ebb_call` runs.
    pub fn call_encoded(&self, request: &[u8]) -> Vec<u8> {
        if let Some(response) = crate::fastpath::answer(self, request) {
            return response;
        }
        let response = match proto::CallRequest::decode(request) {
            Ok(request) => self.call(request),
            Err(e) => error_response(format!("{}: malformed CallRequest: {e}", self.name)),
        };
        response.encode_to_vec()
    }
}

/// A scalar handler as the fast path calls it.
pub(crate) enum ScalarKind<'p> {
    /// Takes owned values.
    Owned(&'p ScalarHandler),
    /// Takes values borrowed from the request.
    Borrowed(&'p ScalarRefHandler),
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
            let outcome = f(&events)?;
            Ok(Reply::Expiry(outcome.into_proto(events.len())?))
        }
        (handler, call) => Err(format!(
            "is {}; it cannot answer a {} call",
            match handler {
                Handler::Scalar(_) | Handler::ScalarRef(_) => "a scalar function",
                Handler::Aggregate(_) => "an aggregate",
                Handler::Expiry(_) => "an expiry handler",
            },
            match call {
                Call::Scalar(_) => "scalar",
                Call::AggInit(_) => "agg_init",
                Call::AggUpdate(_) => "agg_update",
                Call::AggMerge(_) => "agg_merge",
                Call::AggFinish(_) => "agg_finish",
                Call::Expiry(_) => "expiry",
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
