//! JSON paths (`$.a.b`, `$.items[0].name`, `$["odd key"]`): parsing and lookup.

use std::fmt;

use serde_json::Value as Json;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An object member.
    Key(String),
    /// An array element (0-based).
    Index(usize),
}

/// Why a path did not parse; names the offending byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    path: String,
    at: usize,
    reason: &'static str,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid JSON path `{}` at offset {}: {}",
            self.path, self.at, self.reason
        )
    }
}

/// Parses a path.
///
/// Grammar: `$` followed by any number of steps, each `.key` (a key runs to
/// the next `.` or `[`; it may not be empty), `[N]` (a non-negative array
/// index) or `["key"]` / `['key']` (any key; `\` escapes the next character).
pub fn parse(path: &str) -> Result<Vec<Step>, PathError> {
    let error = |at: usize, reason| PathError {
        path: path.to_owned(),
        at,
        reason,
    };
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'$') {
        return Err(error(0, "a path starts with `$`"));
    }
    let mut steps = Vec::new();
    let mut at = 1;
    while at < bytes.len() {
        match bytes[at] {
            b'.' => {
                let start = at + 1;
                let end = path[start..]
                    .find(['.', '['])
                    .map_or(path.len(), |offset| start + offset);
                if end == start {
                    return Err(error(start, "empty key after `.`"));
                }
                steps.push(Step::Key(path[start..end].to_owned()));
                at = end;
            }
            b'[' => {
                let (step, next) = match bytes.get(at + 1) {
                    Some(&quote @ (b'"' | b'\'')) => quoted_key(path, at + 2, quote)
                        .ok_or(error(at, "unterminated quoted key"))?,
                    _ => {
                        let start = at + 1;
                        let len = path[start..].find(']').ok_or(error(at, "missing `]`"))?;
                        let digits = &path[start..start + len];
                        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                            return Err(error(start, "an index is a non-negative integer"));
                        }
                        let index = digits
                            .parse()
                            .map_err(|_| error(start, "index too large"))?;
                        (Step::Index(index), start + len)
                    }
                };
                if bytes.get(next) != Some(&b']') {
                    return Err(error(next, "missing `]`"));
                }
                steps.push(step);
                at = next + 1;
            }
            _ => return Err(error(at, "expected `.` or `[`")),
        }
    }
    Ok(steps)
}

/// Reads a quoted key starting after its opening quote; returns the key and
/// the offset just past the closing quote.
fn quoted_key(path: &str, start: usize, quote: u8) -> Option<(Step, usize)> {
    let mut key = String::new();
    let mut chars = path[start..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '\\' => key.push(chars.next()?.1),
            c if c as u32 == u32::from(quote) => {
                return Some((Step::Key(key), start + offset + 1));
            }
            c => key.push(c),
        }
    }
    None
}

/// The value at `steps` inside `doc`, if every step exists.
pub fn lookup<'a>(doc: &'a Json, steps: &[Step]) -> Option<&'a Json> {
    steps.iter().try_fold(doc, |node, step| match step {
        Step::Key(key) => node.as_object()?.get(key),
        Step::Index(index) => node.as_array()?.get(*index),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Step {
        Step::Key(k.to_owned())
    }

    #[test]
    fn parses_dots_indexes_and_quoted_keys() {
        assert_eq!(parse("$"), Ok(vec![]));
        assert_eq!(parse("$.a.b"), Ok(vec![key("a"), key("b")]));
        assert_eq!(
            parse("$.items[0].name"),
            Ok(vec![key("items"), Step::Index(0), key("name")])
        );
        assert_eq!(parse("$[12][3]"), Ok(vec![Step::Index(12), Step::Index(3)]));
        assert_eq!(parse(r#"$["a.b[c]"]"#), Ok(vec![key("a.b[c]")]));
        assert_eq!(parse(r"$['it\'s']"), Ok(vec![key("it's")]));
        assert_eq!(parse("$.é.ü"), Ok(vec![key("é"), key("ü")]));
        assert_eq!(parse("$.a b"), Ok(vec![key("a b")]));
    }

    #[test]
    fn rejects_malformed_paths_with_a_position() {
        for bad in [
            "",
            "a.b",
            ".a",
            "$.",
            "$..a",
            "$a",
            "$[",
            "$[]",
            "$[-1]",
            "$[x]",
            "$[1",
            "$[\"a\"",
            "$['a'x]",
            "$[1]x",
            "$[99999999999999999999999]",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let error = parse("$.a[x]").unwrap_err().to_string();
        assert_eq!(
            error,
            "invalid JSON path `$.a[x]` at offset 4: an index is a non-negative integer"
        );
    }

    #[test]
    fn lookup_follows_objects_and_arrays_only() {
        let doc: Json = serde_json::from_str(r#"{"a":{"b":[10,{"c":true}]},"s":"x"}"#).unwrap();
        let at = |p: &str| lookup(&doc, &parse(p).unwrap()).cloned();
        assert_eq!(at("$.a.b[0]"), Some(Json::from(10)));
        assert_eq!(at("$.a.b[1].c"), Some(Json::from(true)));
        assert_eq!(at("$.a.b[2]"), None);
        assert_eq!(at("$.a[0]"), None);
        assert_eq!(at("$.s.x"), None);
        assert_eq!(at("$.s[0]"), None);
        assert_eq!(at("$"), Some(doc.clone()));
    }
}
