//! Dispatch through the encoded ABI path: manifest, every call kind, and every error path.

use ebb_guest::proto::{self, call_request::Call, call_response::Result as Reply};
use ebb_guest::{
    Aggregate, ChangeEvent, ChangeOutcome, ExpiryEvent, ExpiryOutcome, Message, Value, testing,
};

fn concat(args: &[Value]) -> String {
    args.iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_owned())
}

fn greet(name: Option<String>) -> String {
    format!("hello {}", name.as_deref().unwrap_or("nobody"))
}

struct Count;

impl Aggregate for Count {
    type State = u64;
    fn init() -> u64 {
        0
    }
    fn update(state: &mut u64, _: &[Value]) -> Result<(), String> {
        *state += 1;
        Ok(())
    }
    fn merge(left: u64, right: u64) -> u64 {
        left + right
    }
    fn finish(state: u64) -> Value {
        Value::Int(state as i64)
    }
    fn encode(state: &u64) -> Vec<u8> {
        state.to_le_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<u64, String> {
        let bytes: [u8; 8] = bytes
            .try_into()
            .map_err(|_| format!("{} bytes, want 8", bytes.len()))?;
        Ok(u64::from_le_bytes(bytes))
    }
}

fn mirror(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for (index, event) in events.iter().enumerate() {
        match event.key.as_str() {
            "retry" => outcome.retry(index),
            "drop" => outcome.delete("mirror", &event.key),
            key => outcome.put("mirror", key, event.value.clone(), 0),
        }
    }
    outcome
}

fn bogus(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    outcome.retry(events.len());
    outcome
}

/// Puts each write as `key@new_version` into the config's text (or
/// `journal`), deletes as `deleted`; a key `retry` is retried; a key
/// `err` fails the batch.
fn journal(events: &[ChangeEvent]) -> Result<ChangeOutcome, String> {
    let table = ebb_guest::binding::config().unwrap_or_else(|| "journal".to_owned());
    let mut outcome = ChangeOutcome::default();
    for (index, event) in events.iter().enumerate() {
        match event.key.as_str() {
            "err" => return Err(format!("cannot journal {}", event.new_version)),
            "retry" => outcome.retry(index),
            key => {
                let value = if event.deleted {
                    b"deleted".to_vec()
                } else {
                    event.value.clone()
                };
                let key = format!("{key}@{}", event.new_version);
                outcome.put_if_version(&table, &key, value, 0, &event.old_version);
            }
        }
    }
    Ok(outcome)
}

ebb_guest::export! {
    name: "t",
    version: "1.2.3",
    functions: {
        scalar "concat" => concat, "variadic";
        scalar "add" => add, "checked addition";
        scalar "greet" => greet, "optional argument";
        aggregate "count" => Count, "counts non-NULL rows";
        expiry "mirror" => mirror, "mirrors expired records";
        expiry "bogus" => bogus, "returns an out-of-range index";
        change "journal" => journal, "journals writes by version";
    }
}

fn error_of(function: &str, call: Option<Call>) -> String {
    let request = proto::CallRequest {
        function: function.to_owned(),
        call,
    };
    match testing::call(plugin(), request).result {
        Some(Reply::Error(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn manifest_describes_every_function() {
    let m = plugin().manifest();
    assert_eq!(
        (m.abi_version, m.name.as_str(), m.version.as_str()),
        (1, "t", "1.2.3")
    );
    let decls: Vec<_> = m
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.kind, f.arg_count))
        .collect();
    use proto::FunctionKind::{Aggregate, ChangeHandler, ExpiryHandler, Scalar};
    assert_eq!(
        decls,
        [
            ("concat", Scalar as i32, -1),
            ("add", Scalar as i32, 2),
            ("greet", Scalar as i32, 1),
            ("count", Aggregate as i32, 1),
            ("mirror", ExpiryHandler as i32, 1),
            ("bogus", ExpiryHandler as i32, 1),
            ("journal", ChangeHandler as i32, 1),
        ]
    );
    assert_eq!(m.functions[1].description, "checked addition");
}

#[test]
fn scalar_batches_get_one_value_per_row() {
    let rows = vec![
        vec![Value::Int(1), Value::Int(2)],
        vec![Value::Null, Value::Int(2)],
        vec![Value::Int(-5), Value::Float(1.0)],
    ];
    let error = testing::scalar_batch(plugin(), "add", rows.clone()).unwrap_err();
    assert_eq!(error, "t.add: row 2: argument 2: expected int, got float");
    let values = testing::scalar_batch(plugin(), "add", rows[..2].to_vec()).unwrap();
    assert_eq!(values, [Value::Int(3), Value::Null]);
    assert_eq!(testing::scalar_batch(plugin(), "add", vec![]), Ok(vec![]));
    assert_eq!(
        testing::scalar(plugin(), "concat", vec![Value::Null, Value::Bool(true)]),
        Ok(Value::Text("Null,Bool(true)".into()))
    );
    assert_eq!(
        testing::scalar(plugin(), "greet", vec![Value::Null]),
        Ok(Value::Text("hello nobody".into()))
    );
}

#[test]
fn function_errors_name_the_function() {
    assert_eq!(
        testing::scalar(plugin(), "add", vec![Value::Int(i64::MAX), Value::Int(1)]),
        Err("t.add: row 0: overflow".into())
    );
    assert_eq!(
        testing::scalar(plugin(), "add", vec![Value::Int(1)]),
        Err("t.add: row 0: takes 2 arguments, got 1".into())
    );
    assert_eq!(
        testing::scalar(plugin(), "nope", vec![]),
        Err(
            "t.nope: no such function (the plugin has: concat, add, greet, count, mirror, bogus, journal)"
                .into()
        )
    );
    assert_eq!(error_of("add", None), "t.add: request has no call set");
    assert_eq!(error_of("", None), "t: request names no function");
    assert_eq!(
        error_of("count", Some(Call::Scalar(proto::ScalarBatch::default()))),
        "t.count: is an aggregate; it cannot answer a scalar call"
    );
    assert_eq!(
        error_of("add", Some(Call::AggInit(proto::AggInit {}))),
        "t.add: is a scalar function; it cannot answer an agg_init call"
    );
}

#[test]
fn malformed_input_is_an_error_response_not_a_panic() {
    let empty_value = proto::ScalarBatch {
        rows: vec![proto::Row {
            args: vec![proto::Value { kind: None }],
        }],
    };
    assert_eq!(
        error_of("greet", Some(Call::Scalar(empty_value))),
        "t.greet: row 0, argument 1: Value has no field set"
    );
    let response = plugin().call_encoded(&[0xff, 0xff, 0xff]);
    let response = proto::CallResponse::decode(&response[..]).unwrap();
    match response.result {
        Some(Reply::Error(e)) => assert!(e.starts_with("t: malformed CallRequest"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn aggregates_fold_merge_and_finish() {
    let rows = |n: usize| vec![vec![Value::Int(1)]; n];
    assert_eq!(
        testing::aggregate(plugin(), "count", vec![]),
        Ok(Value::Int(0))
    );
    let mut with_null = rows(2);
    with_null.push(vec![Value::Null]);
    assert_eq!(
        testing::aggregate(plugin(), "count", vec![with_null, rows(3)]),
        Ok(Value::Int(5))
    );
    assert_eq!(
        testing::agg_finish(plugin(), "count", b"abc"),
        Err("t.count: corrupt state: 3 bytes, want 8".into())
    );
    let state = testing::agg_init(plugin(), "count").unwrap();
    assert_eq!(
        testing::agg_update(plugin(), "count", &state, vec![vec![]]),
        Err("t.count: row 0: takes 1 arguments, got 0".into())
    );
}

#[test]
fn expiry_outcomes_carry_actions_and_retries() {
    let event = |key: &str| ExpiryEvent {
        key: key.to_owned(),
        value: key.as_bytes().to_vec(),
        attempt: 1,
        ..ExpiryEvent::default()
    };
    let outcome = testing::expiry(
        plugin(),
        "mirror",
        vec![event("a"), event("retry"), event("drop")],
    )
    .unwrap();
    assert_eq!(outcome.failed, [1]);
    assert_eq!(
        outcome.actions,
        [
            ebb_guest::Action::Put {
                table: "mirror".into(),
                key: "a".into(),
                value: b"a".to_vec(),
                ttl_ms: 0,
                condition: ebb_guest::Condition::Always,
            },
            ebb_guest::Action::Delete {
                table: "mirror".into(),
                key: "drop".into(),
                condition: ebb_guest::Condition::Always,
            },
        ]
    );
    assert_eq!(
        testing::expiry(plugin(), "bogus", vec![event("a")]),
        Err("t.bogus: failed index 1 is out of range for a batch of 1 events".into())
    );
}

#[test]
fn change_batches_answer_actions_and_retries_with_the_binding_config() {
    let event = |key: &str, new_version: &str| ChangeEvent {
        id: vec![1; 32],
        table: "t".into(),
        key: key.to_owned(),
        old_version: "1.0@w".into(),
        new_version: new_version.to_owned(),
        value: key.as_bytes().to_vec(),
        written_at_ms: 5,
        attempt: 1,
        ..ChangeEvent::default()
    };
    let deleted = ChangeEvent {
        deleted: true,
        value: Vec::new(),
        ..event("b", "3.0@w")
    };
    let batch = vec![event("a", "2.0@w"), event("retry", "2.1@w"), deleted];
    let outcome = testing::change_with_config(plugin(), "journal", batch, "log").unwrap();
    assert_eq!(outcome.failed, [1]);
    let put = |key: &str, value: &[u8]| ebb_guest::Action::Put {
        table: "log".into(),
        key: key.into(),
        value: value.to_vec(),
        ttl_ms: 0,
        condition: ebb_guest::Condition::Version("1.0@w".into()),
    };
    assert_eq!(
        outcome.actions,
        [put("a@2.0@w", b"a"), put("b@3.0@w", b"deleted")]
    );
    let unconfigured = testing::change(plugin(), "journal", vec![event("a", "2.0@w")]).unwrap();
    assert!(matches!(
        &unconfigured.actions[0],
        ebb_guest::Action::Put { table, .. } if table == "journal"
    ));
    assert_eq!(
        testing::change(plugin(), "journal", vec![event("err", "4.0@w")]),
        Err("t.journal: cannot journal 4.0@w".into())
    );
    assert_eq!(
        testing::change(plugin(), "journal", vec![]),
        Ok(ChangeOutcome::default())
    );
}

#[test]
fn change_and_expiry_handlers_refuse_each_others_calls() {
    assert_eq!(
        error_of("journal", Some(Call::Expiry(proto::ExpiryBatch::default()))),
        "t.journal: is a change handler; it cannot answer an expiry call"
    );
    assert_eq!(
        error_of("mirror", Some(Call::Change(proto::ChangeBatch::default()))),
        "t.mirror: is an expiry handler; it cannot answer a change call"
    );
    assert_eq!(
        error_of("add", Some(Call::Change(proto::ChangeBatch::default()))),
        "t.add: is a scalar function; it cannot answer a change call"
    );
    assert_eq!(
        testing::change(plugin(), "mirror", vec![]),
        Err("t.mirror: is an expiry handler; it cannot answer a change call".into())
    );
}
