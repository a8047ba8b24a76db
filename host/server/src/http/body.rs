//! Reading request bodies and query strings with limits and JSON errors.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, RawQuery};
use axum::http::{HeaderMap, header};
use bytes::Bytes;

use super::error::ApiError;
use super::server::BodyReadTimeout;

/// Read the whole body, refusing more than `limit` bytes with 413 (by
/// `Content-Length` before reading, or as soon as the stream passes it); a
/// body that stalls past the body read timeout is 408 `request_timeout`.
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
    setting: &str,
) -> Result<Bytes, ApiError> {
    let too_large = |len: Option<u64>| {
        let size = len.map_or_else(|| "more than that".to_string(), |n| format!("{n} bytes"));
        ApiError::too_large(
            format!("{what} is {size}; the limit is {limit} bytes (server setting {setting})"),
            limit,
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > limit as u64
    {
        return Err(too_large(Some(len)));
    }
    collect(body, limit).await.map_err(|error| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&*error);
        while let Some(current) = source {
            if current.is::<http_body_util::LengthLimitError>() {
                return too_large(None);
            }
            if current.is::<BodyReadTimeout>() {
                return ApiError::request_timeout(current.to_string());
            }
            source = current.source();
        }
        ApiError::invalid_request(format!("could not read the request body: {error}"))
    })
}

/// The body's data, at most `limit` bytes. A body of one frame (a small
/// value sent with its length, nearly every write) is that frame's bytes,
/// neither copied nor queued; more frames are joined.
async fn collect(body: Body, limit: usize) -> Result<Bytes, axum::BoxError> {
    use http_body_util::BodyExt;
    let mut body = http_body_util::Limited::new(body, limit);
    let mut first: Option<Bytes> = None;
    let mut joined: Option<Vec<u8>> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers carry no data
        };
        match (&mut joined, first.take()) {
            (Some(all), _) => all.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(earlier)) => {
                let mut all = Vec::with_capacity(earlier.len() + data.len());
                all.extend_from_slice(&earlier);
                all.extend_from_slice(&data);
                joined = Some(all);
            }
        }
    }
    Ok(match joined {
        Some(all) => Bytes::from(all),
        None => first.unwrap_or_default(),
    })
}

/// Unwrap a path extraction, answering 400 `invalid_request` on failure.
pub fn path<T>(path: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    path.map(|Path(value)| value).map_err(|rejection| {
        ApiError::invalid_request(format!("bad path: {}", rejection.body_text()))
    })
}

/// Unwrap a query extraction, answering 400 `invalid_request` on failure.
pub fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query.map(|Query(value)| value).map_err(|rejection| {
        ApiError::invalid_request(format!("bad query string: {}", rejection.body_text()))
    })
}

/// Query parameters that can be set straight from plain `name=value`
/// pairs ([`plain`]), as the key fast path reads them.
pub trait PlainParams: Default + serde::de::DeserializeOwned {
    /// Set `name` to `value`; false when the name is unknown or already
    /// set, or the value does not parse.
    fn set(&mut self, name: &str, value: &str) -> bool;
}

/// Put `value` in the empty `slot`; false when the slot is taken or there
/// is no value.
pub fn set_once<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    match (slot.is_none(), value) {
        (true, Some(value)) => {
            *slot = Some(value);
            true
        }
        _ => false,
    }
}

/// The parameters of `query` when it is plain pairs: no percent-escapes,
/// `+` or empty pairs, every name known and given once, every value
/// parsing; else `None`, and `Query` should read it (and word the error).
pub fn plain<T: PlainParams>(query: &str) -> Option<T> {
    // Searched as bytes: `str`'s char searchers were half of a write's
    // query parsing. Cutting at ASCII bytes keeps every piece on a char
    // boundary.
    if query.bytes().any(|b| b == b'%' || b == b'+') {
        return None;
    }
    let mut params = T::default();
    let mut rest = query;
    loop {
        let end = rest.bytes().position(|b| b == b'&').unwrap_or(rest.len());
        let pair = &rest[..end];
        let eq = pair.bytes().position(|b| b == b'=')?;
        if !params.set(&pair[..eq], &pair[eq + 1..]) {
            return None;
        }
        if end == rest.len() {
            return Some(params);
        }
        rest = &rest[end + 1..];
    }
}

/// Refuse any query parameter on a route that takes none: 400
/// `invalid_request` naming them (as sent, still percent-encoded).
pub fn no_params(query: RawQuery) -> Result<(), ApiError> {
    let RawQuery(Some(query)) = query else {
        return Ok(());
    };
    let names: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split('=').next().unwrap_or(pair))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "unknown query parameter {}: this route takes none",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_without_parameters_names_the_ones_it_refuses() {
        assert!(no_params(RawQuery(None)).is_ok());
        assert!(no_params(RawQuery(Some(String::new()))).is_ok());
        let error = no_params(RawQuery(Some("durability=bogus&x".into()))).unwrap_err();
        assert_eq!(error.code, "invalid_request");
        assert!(
            error.message.contains("`durability`, `x`"),
            "{}",
            error.message
        );
    }
}
