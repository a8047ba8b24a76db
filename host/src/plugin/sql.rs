//! Plugin functions in SQL: adapters from the planner's function traits to
//! ABI calls, and the registry the planner resolves `plugin.function` in
//! (native functions of the embedding application first, then plugins).

use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::plugin::v1 as abi;
use ebb_query::{
    AggState, AggregateFunction, Arity, Builtins, FunctionError, FunctionRegistry, LookupError,
    ScalarFunction, Value,
};

use super::encode;
use super::error::PluginCallError;
use super::registry::PluginRegistry;
use super::version::PluginVersion;
use ebb_proto::wire::{self, Reader, WIRE_LEN};

use super::error::CallCause;
use crate::codec::{from_proto, from_wire};
use crate::native::NativeFunctions;

fn arity(decl: &abi::FunctionDecl) -> Arity {
    if decl.arg_count < 0 {
        Arity::AtLeast(0)
    } else {
        Arity::Exact(decl.arg_count as usize)
    }
}

fn sql_error(error: PluginCallError) -> FunctionError {
    FunctionError {
        function: format!("{}.{}", error.plugin, error.function),
        host: matches!(
            error.cause,
            CallCause::NoInstance(_) | CallCause::Starved { .. }
        ),
        message: error.cause.to_string(),
        plugin: true,
    }
}

fn malformed(version: &PluginVersion, function: &str, what: &str) -> FunctionError {
    FunctionError {
        function: format!("{}.{function}", version.name),
        message: format!("returned a malformed response: {what}"),
        plugin: true,
        host: false,
    }
}

/// A plugin scalar function, called once per batch of rows.
#[derive(Debug)]
pub struct PluginScalar {
    qualified: String,
    decl: abi::FunctionDecl,
    version: Arc<PluginVersion>,
}

impl std::fmt::Debug for PluginVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.info.version)
    }
}

impl ScalarFunction for PluginScalar {
    fn name(&self) -> &str {
        &self.qualified
    }

    fn arity(&self) -> Arity {
        arity(&self.decl)
    }

    fn is_plugin(&self) -> bool {
        true
    }

    fn call(&self, args: &[Vec<Value>], n: usize) -> Result<Vec<Value>, FunctionError> {
        let deadline = self.version.runtime_query_deadline();
        with_request_buffer(|request| {
            let start = encode::scalar_request(request, &self.decl.name, args, n);
            self.version
                .call_encoded_with(
                    &self.decl.name,
                    &request[start..],
                    n as u64,
                    deadline,
                    |bytes| scalar_values(bytes, n),
                )
                .map_err(sql_error)
        })
    }
}

/// Largest request buffer a thread keeps between calls.
const KEPT_REQUEST_BYTES: usize = 1 << 20;

thread_local! {
    static REQUEST: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's request buffer (a fresh one if it is in use),
/// so encoding a batch does not allocate; a buffer grown past
/// [`KEPT_REQUEST_BYTES`] is released afterwards.
fn with_request_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    REQUEST.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            let result = f(&mut buffer);
            if buffer.capacity() > KEPT_REQUEST_BYTES {
                *buffer = Vec::new();
            }
            result
        }
        Err(_) => f(&mut Vec::new()),
    })
}

/// The `n` values of a `CallResponse { scalar: ScalarResult }`, read where
/// the response lies. The common shape (one `scalar` field) is read by
/// hand; anything else goes through prost.
fn scalar_values(bytes: &[u8], n: usize) -> Result<Vec<Value>, CallCause> {
    let malformed = |what: String| CallCause::Malformed(what);
    let mut reader = Reader::new(bytes);
    let body = match reader.key() {
        Ok((1, WIRE_LEN)) => reader.delimited().ok().filter(|_| reader.is_empty()),
        _ => None,
    };
    let Some(body) = body else {
        return match super::version::response(bytes)?.result {
            Some(abi::call_response::Result::Scalar(result)) if result.values.len() == n => result
                .values
                .iter()
                .map(|v| from_proto(v).map_err(|e| malformed(e.to_string())))
                .collect(),
            Some(abi::call_response::Result::Scalar(result)) => Err(malformed(format!(
                "{} values for {n} rows",
                result.values.len()
            ))),
            _ => Err(malformed("expected a ScalarResult".into())),
        };
    };
    let mut values = Vec::with_capacity(n);
    let mut reader = Reader::new(body);
    while !reader.is_empty() {
        match reader.key().map_err(|e| malformed(e.to_string()))? {
            (1, WIRE_LEN) => {
                let value = reader
                    .delimited()
                    .and_then(wire::read_value)
                    .map_err(|e| malformed(e.to_string()))?
                    .ok_or_else(|| malformed("a value with no field set".into()))?;
                values.push(from_wire(value));
            }
            (1, _) => return Err(malformed("invalid wire type".into())),
            (_, wire) => reader.skip(wire).map_err(|e| malformed(e.to_string()))?,
        }
    }
    if values.len() != n {
        return Err(malformed(format!("{} values for {n} rows", values.len())));
    }
    Ok(values)
}

/// A plugin aggregate; its state is the guest's bytes.
#[derive(Debug)]
pub struct PluginAggregate {
    qualified: String,
    decl: abi::FunctionDecl,
    version: Arc<PluginVersion>,
}

impl PluginAggregate {
    fn state_call(&self, call: abi::call_request::Call) -> Result<AggState, FunctionError> {
        let deadline = self.version.runtime_query_deadline();
        let response = self
            .version
            .call(&self.decl.name, call, deadline)
            .map_err(sql_error)?;
        self.state_of(response)
    }

    fn state_of(&self, response: abi::CallResponse) -> Result<AggState, FunctionError> {
        match response.result {
            Some(abi::call_response::Result::State(state)) => Ok(vec![Value::Bytes(state)]),
            _ => Err(malformed(
                &self.version,
                &self.decl.name,
                "expected a state",
            )),
        }
    }
}

fn state_bytes(state: &AggState) -> Bytes {
    match state.first() {
        Some(Value::Bytes(b)) => b.clone(),
        _ => Bytes::new(),
    }
}

impl AggregateFunction for PluginAggregate {
    fn name(&self) -> &str {
        &self.qualified
    }

    fn arity(&self) -> Arity {
        arity(&self.decl)
    }

    fn is_plugin(&self) -> bool {
        true
    }

    fn init(&self) -> Result<AggState, FunctionError> {
        self.state_call(abi::call_request::Call::AggInit(abi::AggInit {}))
    }

    fn update(
        &self,
        state: &mut AggState,
        args: &[Vec<Value>],
        n: usize,
    ) -> Result<(), FunctionError> {
        let deadline = self.version.runtime_query_deadline();
        let response = with_request_buffer(|request| {
            let start =
                encode::agg_update_request(request, &self.decl.name, &state_bytes(state), args, n);
            self.version
                .call_encoded(&self.decl.name, &request[start..], n as u64, deadline)
                .map_err(sql_error)
        })?;
        *state = self.state_of(response)?;
        Ok(())
    }

    fn merge(&self, left: AggState, right: AggState) -> Result<AggState, FunctionError> {
        self.state_call(abi::call_request::Call::AggMerge(abi::AggMerge {
            left: state_bytes(&left),
            right: state_bytes(&right),
        }))
    }

    fn finish(&self, state: AggState) -> Result<Value, FunctionError> {
        let deadline = self.version.runtime_query_deadline();
        let response = self
            .version
            .call(
                &self.decl.name,
                abi::call_request::Call::AggFinish(abi::AggFinish {
                    state: state_bytes(&state),
                }),
                deadline,
            )
            .map_err(sql_error)?;
        match response.result {
            Some(abi::call_response::Result::Value(value)) => from_proto(&value)
                .map_err(|e| malformed(&self.version, &self.decl.name, &e.to_string())),
            _ => Err(malformed(
                &self.version,
                &self.decl.name,
                "expected a Value",
            )),
        }
    }
}

impl PluginVersion {
    fn runtime_query_deadline(&self) -> std::time::Duration {
        self.runtime().limits().query_deadline
    }
}

/// Built-ins plus the installed plugins, as the planner sees them.
pub struct HostFunctions {
    plugins: Arc<PluginRegistry>,
    natives: Arc<NativeFunctions>,
}

impl HostFunctions {
    /// Functions over `natives` and `plugins`.
    pub fn new(plugins: Arc<PluginRegistry>, natives: Arc<NativeFunctions>) -> Self {
        Self { plugins, natives }
    }

    fn lookup(
        &self,
        plugin: &str,
        name: &str,
    ) -> Result<(Arc<PluginVersion>, abi::FunctionDecl), LookupError> {
        let version = self
            .plugins
            .get(plugin)
            .ok_or_else(|| LookupError::UnknownPlugin {
                plugin: plugin.to_string(),
                name: name.to_string(),
            })?;
        let decl = version
            .function(name)
            .cloned()
            .ok_or_else(|| LookupError::NoSuchFunction {
                plugin: plugin.to_string(),
                name: name.to_string(),
                available: version
                    .manifest
                    .functions
                    .iter()
                    .map(|f| f.name.clone())
                    .collect(),
            })?;
        if super::kind::is_handler(&decl) {
            return Err(LookupError::ExpiryHandler {
                plugin: plugin.to_string(),
                name: name.to_string(),
            });
        }
        Ok((version, decl))
    }

    /// A namespace only native functions use (no plugin of that name).
    fn native_only(&self, namespace: &str) -> bool {
        self.natives.has_namespace(namespace) && self.plugins.get(namespace).is_none()
    }
}

impl FunctionRegistry for HostFunctions {
    fn scalar(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn ScalarFunction>>, LookupError> {
        let Some(plugin) = namespace else {
            return Builtins.scalar(None, name);
        };
        if let Some(native) = self.natives.scalar(plugin, name) {
            return Ok(Some(native));
        }
        if self.native_only(plugin) {
            return Err(LookupError::UnknownFunction {
                namespace: plugin.to_string(),
                name: name.to_string(),
            });
        }
        let (version, decl) = self.lookup(plugin, name)?;
        if decl.kind != abi::FunctionKind::Scalar as i32 {
            return Err(LookupError::NotScalar {
                namespace: plugin.to_string(),
                name: name.to_string(),
            });
        }
        Ok(Some(Arc::new(PluginScalar {
            qualified: format!("{plugin}.{}", decl.name),
            decl,
            version,
        })))
    }

    fn aggregate(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn AggregateFunction>>, LookupError> {
        let Some(plugin) = namespace else {
            return Builtins.aggregate(None, name);
        };
        if let Some(native) = self.natives.aggregate(plugin, name) {
            return Ok(Some(native));
        }
        if self.native_only(plugin) {
            return Ok(None);
        }
        let (version, decl) = self.lookup(plugin, name)?;
        if decl.kind != abi::FunctionKind::Aggregate as i32 {
            return Ok(None);
        }
        Ok(Some(Arc::new(PluginAggregate {
            qualified: format!("{plugin}.{}", decl.name),
            decl,
            version,
        })))
    }
}

#[cfg(test)]
mod tests {
    use ebb_proto::Message;

    use super::*;

    fn response(result: abi::call_response::Result) -> Vec<u8> {
        abi::CallResponse {
            result: Some(result),
        }
        .encode_to_vec()
    }

    fn scalar(values: Vec<abi::Value>) -> Vec<u8> {
        response(abi::call_response::Result::Scalar(abi::ScalarResult {
            values,
        }))
    }

    fn value(kind: abi::value::Kind) -> abi::Value {
        abi::Value { kind: Some(kind) }
    }

    #[test]
    fn scalar_results_read_by_hand_match_prost() {
        use abi::value::Kind;
        let values = vec![
            value(Kind::Int(-7)),
            value(Kind::Null(true)),
            value(Kind::Text("é".into())),
            value(Kind::Bytes(vec![1, 2].into())),
            value(Kind::Float(2.5)),
            value(Kind::Boolean(false)),
        ];
        let expected: Vec<Value> = values.iter().map(|v| from_proto(v).unwrap()).collect();
        assert_eq!(scalar_values(&scalar(values.clone()), 6), Ok(expected));
        assert_eq!(scalar_values(&scalar(Vec::new()), 0), Ok(Vec::new()));
        // A response of another shape takes prost's path: a repeated
        // `scalar` field merges into one result.
        let mut repeated = scalar(values[..1].to_vec());
        repeated.extend(scalar(values[..1].to_vec()));
        assert_eq!(
            scalar_values(&repeated, 2),
            Ok(vec![Value::Int(-7), Value::Int(-7)])
        );
    }

    #[test]
    fn bad_scalar_results_are_malformed_and_guest_errors_stay_guest_errors() {
        use abi::value::Kind;
        let malformed =
            |bytes: &[u8], n| matches!(scalar_values(bytes, n), Err(CallCause::Malformed(_)));
        assert!(
            malformed(&scalar(vec![value(Kind::Int(1))]), 2),
            "too few values"
        );
        assert!(
            malformed(&scalar(vec![abi::Value { kind: None }]), 1),
            "empty value"
        );
        assert!(malformed(&[0x0a, 0x05, 0x0a], 1), "truncated");
        assert!(
            malformed(&[0x0a, 0x03, 0x0a, 0x01, 0x2a], 1),
            "truncated value"
        );
        assert!(
            malformed(&[0x0a, 0x04, 0x0a, 0x02, 0x2a, 0x01], 1),
            "text cut short"
        );
        assert!(
            malformed(&[0x0a, 0x05, 0x0a, 0x03, 0x2a, 0x01, 0xff], 1),
            "text not UTF-8"
        );
        assert!(malformed(
            &response(abi::call_response::Result::State(vec![1].into())),
            1
        ));
        assert!(malformed(&[], 1), "empty response");
        assert_eq!(
            scalar_values(&response(abi::call_response::Result::Error("no".into())), 1),
            Err(CallCause::Guest("no".into()))
        );
    }

    /// Any bytes a plugin answers are read as values or refused with a
    /// typed cause, never a panic; what the hand-written reader accepts,
    /// prost reads the same.
    mod fuzz {
        use proptest::prelude::*;

        use super::*;
        use crate::plugin::fuzz::{config, response_bytes};

        fn check_scalar(bytes: &[u8], n: usize) -> Result<(), TestCaseError> {
            let by_prost = abi::CallResponse::decode(bytes);
            match scalar_values(bytes, n) {
                Ok(values) => {
                    prop_assert_eq!(values.len(), n);
                    let Ok(abi::CallResponse {
                        result: Some(abi::call_response::Result::Scalar(result)),
                    }) = by_prost
                    else {
                        return Err(TestCaseError::fail(format!(
                            "read as {values:?}, but prost reads {by_prost:?}"
                        )));
                    };
                    let expected: Vec<String> = result
                        .values
                        .iter()
                        .map(|v| format!("{:?}", from_proto(v)))
                        .collect();
                    let got: Vec<String> = values
                        .iter()
                        .map(|v| format!("{:?}", Ok::<_, String>(v)))
                        .collect();
                    prop_assert_eq!(got, expected);
                }
                Err(CallCause::Guest(message)) => {
                    let guest_error = matches!(
                        by_prost,
                        Ok(abi::CallResponse { result: Some(abi::call_response::Result::Error(m)) }) if m == message
                    );
                    prop_assert!(guest_error, "a guest error prost does not read: {message}");
                }
                Err(CallCause::Malformed(_)) => {}
                Err(other) => prop_assert!(false, "an unexpected cause: {other:?}"),
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn any_scalar_answer_is_n_values_or_a_malformed_or_guest_error(
                bytes in response_bytes(),
                n in 0usize..6,
            ) {
                check_scalar(&bytes, n)?;
            }

            #[test]
            fn any_aggregate_answer_is_a_state_a_value_or_a_typed_error(bytes in response_bytes()) {
                match crate::plugin::version::response(&bytes) {
                    Ok(response) => match response.result {
                        Some(abi::call_response::Result::Value(value)) => {
                            let read = from_proto(&value);
                            prop_assert_eq!(read.is_err(), value.kind.is_none());
                        }
                        Some(abi::call_response::Result::Error(_)) | None => {
                            prop_assert!(false, "an error or empty response read as a result");
                        }
                        Some(_) => {}
                    },
                    Err(CallCause::Guest(_) | CallCause::Malformed(_)) => {}
                    Err(other) => prop_assert!(false, "an unexpected cause: {other:?}"),
                }
            }
        }
    }
}
