//! [`Plugin`]: a plugin's name, version and functions, its manifest, and the
//! entry points that answer a call (`ebb_call` runs [`Plugin::call_encoded`]).
//!
//! Below it: the function table (`registry.rs`), the general call path
//! (`dispatch.rs`) and the fast path for scalar batches and aggregate
//! updates (`fastpath.rs`).

use ebb_proto::Message;
use ebb_proto::plugin::v1 as proto;

use crate::aggregate::{Aggregate, AggregateOf, ErasedAggregate};
use crate::change::ChangeEvent;
use crate::dispatch::{self, error_response};
use crate::expiry::{ExpiryEvent, ExpiryOutput};
use crate::fastpath;
use crate::registry::{
    ChangeHandler, ExpiryHandler, Function, Handler, Registry, ScalarHandler, ScalarRefHandler,
};
use crate::scalar::{ScalarFn, ScalarOutput};
use crate::value::ValueRef;

/// The ABI version this SDK implements.
pub const ABI_VERSION: u32 = 1;

/// A plugin: its name, version and functions. Built once by [`export!`](crate::export)
/// and then only read, so dispatch never mutates it.
pub struct Plugin {
    version: String,
    pub(crate) registry: Registry,
}

impl Plugin {
    /// A plugin with no functions yet.
    pub fn new(name: &str, version: &str) -> Self {
        Plugin {
            version: version.to_owned(),
            registry: Registry::new(name),
        }
    }

    /// The plugin name from the manifest.
    pub fn name(&self) -> &str {
        &self.registry.plugin
    }

    /// The plugin version from the manifest.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn add(mut self, name: &str, description: &str, arg_count: i32, handler: Handler) -> Self {
        self.registry.add(Function {
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
        R: ScalarOutput,
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

    /// Registers a change handler: called with batches of the writes and
    /// deletes of the table it is bound to, it answers like an expiry
    /// handler (an `Err` fails the whole batch, which is delivered again).
    pub fn change<F, R>(self, name: &str, description: &str, f: F) -> Self
    where
        F: Fn(&[ChangeEvent]) -> R + Send + Sync + 'static,
        R: ExpiryOutput,
    {
        let call: ChangeHandler = Box::new(move |events| f(events).into_outcome());
        self.add(name, description, 1, Handler::Change(call))
    }

    /// The manifest the host reads at upload.
    pub fn manifest(&self) -> proto::Manifest {
        let functions = self
            .registry
            .functions
            .iter()
            .map(|f| proto::FunctionDecl {
                name: f.name.clone(),
                kind: match f.handler {
                    Handler::Scalar(_) | Handler::ScalarRef(_) => proto::FunctionKind::Scalar,
                    Handler::Aggregate(_) => proto::FunctionKind::Aggregate,
                    Handler::Expiry(_) => proto::FunctionKind::ExpiryHandler,
                    Handler::Change(_) => proto::FunctionKind::ChangeHandler,
                } as i32,
                arg_count: f.arg_count,
                description: f.description.clone(),
            })
            .collect();
        proto::Manifest {
            abi_version: ABI_VERSION,
            name: self.registry.plugin.clone(),
            version: self.version.clone(),
            functions,
        }
    }

    /// Answers one request. Every failure — unknown function, wrong call kind,
    /// bad arguments, an `Err` from the function — becomes
    /// `CallResponse { error }` naming `plugin.function`; this never panics on
    /// bad input.
    pub fn call(&self, request: proto::CallRequest) -> proto::CallResponse {
        dispatch::call(&self.registry, request)
    }

    /// [`Plugin::call`] on encoded bytes: decodes a `CallRequest`, encodes the
    /// `CallResponse`. This is exactly what `ebb_call` runs.
    pub fn call_encoded(&self, request: &[u8]) -> Vec<u8> {
        if let Some(response) = fastpath::answer(&self.registry, request) {
            return response;
        }
        let response = match proto::CallRequest::decode(request) {
            Ok(request) => self.call(request),
            Err(e) => error_response(format!("{}: malformed CallRequest: {e}", self.name())),
        };
        response.encode_to_vec()
    }
}
