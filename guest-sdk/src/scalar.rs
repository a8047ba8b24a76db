//! Scalar functions: ordinary Rust functions called once per row.

use std::fmt::Display;

use crate::value::{FromValue, FromValueError, IntoValue, Value};

/// What a scalar function may return: any [`IntoValue`], or a
/// `Result<impl IntoValue, impl Display>` whose `Err` fails the call.
pub trait ScalarOutput {
    /// The row's value, or the error message of the call.
    fn into_output(self) -> Result<Value, String>;
}

impl<T: IntoValue> ScalarOutput for T {
    #[inline]
    fn into_output(self) -> Result<Value, String> {
        Ok(self.into_value())
    }
}

impl<T: IntoValue, E: Display> ScalarOutput for Result<T, E> {
    #[inline]
    fn into_output(self) -> Result<Value, String> {
        self.map(IntoValue::into_value).map_err(|e| e.to_string())
    }
}

/// Marker for variadic functions: `fn(&[Value]) -> R`.
pub struct Variadic;

/// A Rust function usable as a scalar SQL function.
///
/// Implemented for `Fn(A1, .., An) -> R` (n = 0..=6) where every `Ai` is
/// [`FromValue`] and `R` is [`ScalarOutput`], and for `Fn(&[Value]) -> R`
/// (variadic; arguments are passed unconverted). For fixed arity, a NULL
/// argument whose type is not an `Option` makes the row's result NULL
/// without calling the function.
pub trait ScalarFn<Args>: Send + Sync + 'static {
    /// Declared argument count; -1 for variadic.
    const ARG_COUNT: i32;

    /// Calls the function on one row.
    fn call_row(&self, args: Vec<Value>) -> Result<Value, String>;
}

impl<F, R> ScalarFn<Variadic> for F
where
    F: Fn(&[Value]) -> R + Send + Sync + 'static,
    R: ScalarOutput,
{
    const ARG_COUNT: i32 = -1;

    fn call_row(&self, args: Vec<Value>) -> Result<Value, String> {
        self(&args).into_output()
    }
}

/// Reads argument `position` (1-based); `Ok(None)` means "the row is NULL".
fn argument<T: FromValue>(value: Value, position: usize) -> Result<Option<T>, String> {
    match T::from_value(value) {
        Ok(v) => Ok(Some(v)),
        Err(FromValueError::Null) => Ok(None),
        Err(e) => Err(format!("argument {position}: {e}")),
    }
}

macro_rules! impl_scalar_fn {
    ($count:literal $(, $ty:ident $var:ident $pos:literal)*) => {
        impl<F, R $(, $ty)*> ScalarFn<($($ty,)*)> for F
        where
            F: Fn($($ty),*) -> R + Send + Sync + 'static,
            R: ScalarOutput,
            $($ty: FromValue,)*
        {
            const ARG_COUNT: i32 = $count;

            fn call_row(&self, args: Vec<Value>) -> Result<Value, String> {
                let [$($var),*]: [Value; $count] = args.try_into().map_err(|args: Vec<Value>| {
                    format!("takes {} arguments, got {}", $count, args.len())
                })?;
                $(
                    let Some($var) = argument::<$ty>($var, $pos)? else {
                        return Ok(Value::Null);
                    };
                )*
                self($($var),*).into_output()
            }
        }
    };
}

impl_scalar_fn!(0);
impl_scalar_fn!(1, A1 a1 1);
impl_scalar_fn!(2, A1 a1 1, A2 a2 2);
impl_scalar_fn!(3, A1 a1 1, A2 a2 2, A3 a3 3);
impl_scalar_fn!(4, A1 a1 1, A2 a2 2, A3 a3 3, A4 a4 4);
impl_scalar_fn!(5, A1 a1 1, A2 a2 2, A3 a3 3, A4 a4 4, A5 a5 5);
impl_scalar_fn!(6, A1 a1 1, A2 a2 2, A3 a3 3, A4 a4 4, A5 a5 5, A6 a6 6);

#[cfg(test)]
mod tests {
    use super::*;

    fn arity<Args, F: ScalarFn<Args>>(_: &F) -> i32 {
        F::ARG_COUNT
    }

    fn add(a: i64, b: i64) -> i64 {
        a + b
    }

    fn checked_div(a: i64, b: i64) -> Result<i64, String> {
        a.checked_div(b)
            .ok_or_else(|| "division by zero".to_owned())
    }

    fn count(args: &[Value]) -> i64 {
        args.len() as i64
    }

    fn or_zero(a: Option<i64>) -> i64 {
        a.unwrap_or(0)
    }

    #[test]
    fn arity_comes_from_the_signature() {
        assert_eq!(arity(&add), 2);
        assert_eq!(arity(&count), -1);
        assert_eq!(arity(&|| 1i64), 0);
    }

    #[test]
    fn converts_arguments_and_results() {
        assert_eq!(
            add.call_row(vec![Value::Int(2), Value::Int(3)]),
            Ok(Value::Int(5))
        );
        assert_eq!(count.call_row(vec![Value::Null; 3]), Ok(Value::Int(3)));
        assert_eq!(
            checked_div.call_row(vec![Value::Int(1), Value::Int(0)]),
            Err("division by zero".into())
        );
    }

    #[test]
    fn null_argument_gives_null_unless_optional() {
        assert_eq!(
            add.call_row(vec![Value::Null, Value::Int(3)]),
            Ok(Value::Null)
        );
        assert_eq!(or_zero.call_row(vec![Value::Null]), Ok(Value::Int(0)));
    }

    #[test]
    fn wrong_type_and_count_are_errors() {
        assert_eq!(
            add.call_row(vec![Value::Int(1), Value::Text("x".into())]),
            Err("argument 2: expected int, got text".into())
        );
        assert_eq!(
            add.call_row(vec![Value::Int(1)]),
            Err("takes 2 arguments, got 1".into())
        );
    }
}
