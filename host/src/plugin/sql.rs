//! Plugin functions in SQL: adapters from the planner's function traits to
//! ABI calls, and the registry the planner resolves `plugin.function` in
//! (native functions of the embedding application first, then plugins).

use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::plugin::v1 as abi;
use ebb_query::{
    AggState, AggregateFunction, Arity, Builtins, FunctionError, FunctionRegistry, ScalarFunction,
    Value,
};

use super::encode;
use super::error::PluginCallError;
use super::registry::{PluginRegistry, PluginVersion};
use crate::exec::convert::from_proto;
use crate::exec::native::NativeFunctions;

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
        message: error.cause.to_string(),
        plugin: true,
    }
}

fn malformed(version: &PluginVersion, function: &str, what: &str) -> FunctionError {
    FunctionError {
        function: format!("{}.{function}", version.name),
        message: format!("returned a malformed response: {what}"),
        plugin: true,
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
        let request = encode::scalar_request(&self.decl.name, args, n);
        let response = self
            .version
            .call_encoded(&self.decl.name, &request, n as u64, deadline)
            .map_err(sql_error)?;
        let Some(abi::call_response::Result::Scalar(result)) = response.result else {
            return Err(malformed(
                &self.version,
                &self.decl.name,
                "expected a ScalarResult",
            ));
        };
        if result.values.len() != n {
            return Err(malformed(
                &self.version,
                &self.decl.name,
                &format!("{} values for {n} rows", result.values.len()),
            ));
        }
        result
            .values
            .iter()
            .map(|v| from_proto(v).map_err(|e| malformed(&self.version, &self.decl.name, &e)))
            .collect()
    }
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
        let request = encode::agg_update_request(&self.decl.name, &state_bytes(state), args, n);
        let response = self
            .version
            .call_encoded(&self.decl.name, &request, n as u64, deadline)
            .map_err(sql_error)?;
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
            Some(abi::call_response::Result::Value(value)) => {
                from_proto(&value).map_err(|e| malformed(&self.version, &self.decl.name, &e))
            }
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
    ) -> Result<(Arc<PluginVersion>, abi::FunctionDecl), String> {
        let version = self
            .plugins
            .get(plugin)
            .ok_or_else(|| format!("unknown plugin {plugin} in {plugin}.{name}: install it with PUT /v1/plugins/{plugin}"))?;
        let decl = version.function(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = version
                .manifest
                .functions
                .iter()
                .map(|f| f.name.as_str())
                .collect();
            format!(
                "plugin {plugin} has no function {name} (it has: {})",
                names.join(", ")
            )
        })?;
        if decl.kind == abi::FunctionKind::ExpiryHandler as i32 {
            return Err(format!(
                "{plugin}.{name} is an expiry handler and cannot be called in SQL"
            ));
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
    ) -> Result<Option<Arc<dyn ScalarFunction>>, String> {
        let Some(plugin) = namespace else {
            return Builtins.scalar(None, name);
        };
        if let Some(native) = self.natives.scalar(plugin, name) {
            return Ok(Some(native));
        }
        if self.native_only(plugin) {
            return Err(format!("no function {plugin}.{name}"));
        }
        let (version, decl) = self.lookup(plugin, name)?;
        if decl.kind != abi::FunctionKind::Scalar as i32 {
            return Err(format!(
                "{plugin}.{name} is an aggregate; use it where an aggregate fits"
            ));
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
    ) -> Result<Option<Arc<dyn AggregateFunction>>, String> {
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
