//! A plugin's function table: each function's name, description, declared
//! argument count and handler, looked up by name on every call. Both call
//! paths (`dispatch.rs`, `fastpath.rs`) answer from it.

use crate::aggregate::ErasedAggregate;
use crate::change::ChangeEvent;
use crate::expiry::{ExpiryEvent, ExpiryOutcome};
use crate::value::{Value, ValueRef};

pub(crate) type ScalarHandler = Box<dyn Fn(Vec<Value>) -> Result<Value, String> + Send + Sync>;
pub(crate) type ScalarRefHandler =
    Box<dyn Fn(&[ValueRef<'_>]) -> Result<Value, String> + Send + Sync>;
pub(crate) type ExpiryHandler =
    Box<dyn Fn(&[ExpiryEvent]) -> Result<ExpiryOutcome, String> + Send + Sync>;
pub(crate) type ChangeHandler =
    Box<dyn Fn(&[ChangeEvent]) -> Result<ExpiryOutcome, String> + Send + Sync>;

/// What runs a function, by kind.
pub(crate) enum Handler {
    Scalar(ScalarHandler),
    ScalarRef(ScalarRefHandler),
    Aggregate(Box<dyn ErasedAggregate>),
    Expiry(ExpiryHandler),
    Change(ChangeHandler),
}

/// One function of a plugin.
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Declared argument count; -1 for variadic.
    pub(crate) arg_count: i32,
    pub(crate) handler: Handler,
}

/// A scalar handler as the fast path calls it.
pub(crate) enum ScalarKind<'p> {
    /// Takes owned values.
    Owned(&'p ScalarHandler),
    /// Takes values borrowed from the request.
    Borrowed(&'p ScalarRefHandler),
}

/// The functions of plugin `plugin`.
pub(crate) struct Registry {
    /// The plugin's name, which prefixes every error message.
    pub(crate) plugin: String,
    pub(crate) functions: Vec<Function>,
}

impl Registry {
    /// An empty table for plugin `plugin`.
    pub(crate) fn new(plugin: &str) -> Self {
        Registry {
            plugin: plugin.to_owned(),
            functions: Vec::new(),
        }
    }

    /// Adds a function; a name declared twice panics.
    pub(crate) fn add(&mut self, function: Function) {
        // Two functions with one name is a bug in the plugin's source; it
        // shows in the first native test that builds the plugin.
        assert!(
            self.function(&function.name).is_none(),
            "plugin `{}` declares function `{}` twice",
            self.plugin,
            function.name
        );
        self.functions.push(function);
    }

    /// The function called `name`.
    pub(crate) fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The handler and declared argument count of scalar function `name`.
    pub(crate) fn scalar(&self, name: &str) -> Option<(ScalarKind<'_>, i32)> {
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
    pub(crate) fn aggregate(&self, name: &str) -> Option<(&dyn ErasedAggregate, i32)> {
        match self.function(name) {
            Some(Function {
                handler: Handler::Aggregate(aggregate),
                arg_count,
                ..
            }) => Some((aggregate.as_ref(), *arg_count)),
            _ => None,
        }
    }
}
