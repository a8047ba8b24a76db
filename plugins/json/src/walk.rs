//! Reading the value at a path out of a JSON document without building the
//! rest of it: the walk validates the whole document (as a full parse
//! would) but allocates only for the value it returns.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

use crate::path::Step;

/// The value at `steps` in `doc`: `None` when `doc` is not valid JSON (with
/// nothing but whitespace after it) or the path does not exist. Duplicate
/// keys resolve to the last one, as a full parse does.
pub fn extract(doc: &[u8], steps: &[Step]) -> Option<Json> {
    let mut deserializer = serde_json::Deserializer::from_slice(doc);
    let found = Walk { steps }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    found
}

/// Deserializes the value at `steps` below the current position.
struct Walk<'s> {
    steps: &'s [Step],
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Option<Json>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        match self.steps.split_first() {
            None => Json::deserialize(deserializer).map(Some),
            Some((step, rest)) => deserializer.deserialize_any(Descend { step, rest }),
        }
    }
}

/// Takes `step` into the current value; scalars have no members.
struct Descend<'s> {
    step: &'s Step,
    rest: &'s [Step],
}

impl<'de> Visitor<'de> for Descend<'_> {
    type Value = Option<Json>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let wanted = match self.step {
            Step::Key(key) => Some(key.as_str()),
            Step::Index(_) => None,
        };
        while let Some(matches) = map.next_key_seed(KeyIs(wanted))? {
            if matches {
                found = map.next_value_seed(Walk { steps: self.rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let wanted = match self.step {
            Step::Index(index) => Some(*index),
            Step::Key(_) => None,
        };
        let mut found = None;
        let mut position = 0;
        loop {
            if Some(position) == wanted {
                match seq.next_element_seed(Walk { steps: self.rest })? {
                    Some(value) => found = value,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            position += 1;
        }
        Ok(found)
    }
}

/// A map key compared with the wanted key in place (no allocation unless
/// the key has escapes).
struct KeyIs<'s>(Option<&'s str>);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(self.0 == Some(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{lookup, parse};

    const DOCS: [&str; 6] = [
        r#"{"a":{"b":"text","n":42,"x":2.5,"t":true,"z":null},"items":[{"name":"first"},{"name":"second","tags":["p","q"]}]}"#,
        r#"{"a": 1, "a": 2}"#,
        r#"{"esc\"aped": {"k\u00e9y": [1, [2, 3]]}, "s": "\u2603"}"#,
        r#"[10, {"a": [20, 30]}, "x"]"#,
        r#"  "just a string"  "#,
        r#"{"deep": {"er": {"est": {"v": [0, 1, 2, 3, 4, 5, {"w": -1e3}]}}}}"#,
    ];

    const PATHS: [&str; 14] = [
        "$",
        "$.a",
        "$.a.b",
        "$.a.n",
        "$.a.z",
        "$.a.missing",
        "$.items[1].tags[0]",
        "$.items[5]",
        r#"$["esc\"aped"]["kéy"][1][0]"#,
        "$.s",
        "$[1].a[1]",
        "$[2]",
        "$.deep.er.est.v[6].w",
        "$[0].x",
    ];

    #[test]
    fn the_walk_finds_what_a_full_parse_finds() {
        for doc in DOCS {
            let tree: Json = serde_json::from_str(doc).unwrap();
            for path in PATHS {
                let steps = parse(path).unwrap();
                assert_eq!(
                    extract(doc.as_bytes(), &steps),
                    lookup(&tree, &steps).cloned(),
                    "{path} in {doc}"
                );
            }
        }
    }

    #[test]
    fn invalid_documents_give_nothing_even_past_the_value() {
        let steps = parse("$.a").unwrap();
        for bad in [
            r#"{"a": 1, "b": }"#,
            r#"{"a": 1} trailing"#,
            r#"{"a": 1"#,
            "{not json",
            "",
        ] {
            assert_eq!(extract(bad.as_bytes(), &steps), None, "{bad}");
        }
        assert_eq!(extract(b"\xff\xfe", &steps), None);
    }
}
