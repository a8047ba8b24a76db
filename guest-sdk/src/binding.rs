//! The settings of the binding whose handler is running: the `config` JSON
//! a table's binding carries, set for the length of one handler call.

use std::cell::RefCell;

thread_local! {
    static CONFIG: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The `config` of the binding that called the running handler, as JSON
/// text (`ebb expiry bind ... --config '{"table": "t"}'`); `None` when the
/// binding has none, and outside a handler call. Parse it with the JSON
/// crate of your choice; the host checked that it is JSON.
pub fn config() -> Option<String> {
    CONFIG.with(|config| {
        let config = config.borrow();
        (!config.is_empty()).then(|| config.clone())
    })
}

/// Run `call` with `config` as the binding's settings (empty: none), then
/// restore what was there, even when `call` panics natively.
pub(crate) fn with_config<R>(config: String, call: impl FnOnce() -> R) -> R {
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONFIG.with(|config| *config.borrow_mut() = std::mem::take(&mut self.0));
        }
    }
    let previous = CONFIG.with(|slot| std::mem::replace(&mut *slot.borrow_mut(), config));
    let _restore = Restore(previous);
    call()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_set_for_the_call_only() {
        assert_eq!(config(), None);
        let seen = with_config(r#"{"table":"t"}"#.into(), config);
        assert_eq!(seen.as_deref(), Some(r#"{"table":"t"}"#));
        assert_eq!(config(), None);
        assert_eq!(with_config(String::new(), config), None);
    }
}
