//! The key fast path: `GET`, `PUT` and `DELETE /v1/tables/{t}/keys/{k}`
//! whose path needs no decoding go straight to their handlers, through the
//! same front ([`fronted`]) as routed requests, without the router's
//! matching, extensions and boxed services; every other request goes to
//! the router.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use tower_service::Service;

use super::body::{PlainParams, plain, query};
use super::error::ApiError;
use super::{AppState, fronted, kv};

/// The route of one key, as the router names it (and so as metrics and
/// scopes see it).
pub(super) const KEY_ROUTE: &str = "/v1/tables/{table}/keys/{key}";

/// What a connection answers its requests with.
#[derive(Clone)]
pub struct Routes {
    router: Router,
    /// Serves the key fast path; `None` sends every request to the router
    /// (whose layers then add what the fast path does not, such as CORS).
    keys: Option<AppState>,
}

/// The key handlers the fast path serves.
enum KeyMethod {
    Get,
    Put,
    Delete,
}

impl Routes {
    /// Every request through `router`.
    pub fn router(router: Router) -> Self {
        Self { router, keys: None }
    }

    /// Key requests straight to their handlers over `state`, the rest
    /// through `router` (built over the same state).
    pub fn with_keys(router: Router, state: AppState) -> Self {
        Self {
            router,
            keys: Some(state),
        }
    }

    /// Answer `request`. Never fails: errors are responses.
    pub async fn call<B>(self, request: axum::http::Request<B>) -> Response
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let method = match *request.method() {
            Method::GET => Some(KeyMethod::Get),
            Method::PUT => Some(KeyMethod::Put),
            Method::DELETE => Some(KeyMethod::Delete),
            _ => None,
        };
        // The table and key stay in the request's path, which a clone of
        // the URI shares (no copy of either per request).
        let fast = self.keys.as_ref().zip(method).and_then(|(app, method)| {
            key_path(request.uri().path())?;
            Some((app.clone(), method, request.uri().clone()))
        });
        let Some((app, method, uri)) = fast else {
            let mut router = self.router;
            return match router.call(request.map(Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
        };
        let request = request.map(Body::new);
        fronted(&app, Some(KEY_ROUTE), request, |request: Request| async {
            let answer = async {
                let (table, key) = key_path(uri.path()).expect("checked above");
                match method {
                    KeyMethod::Get => kv::get(&app, table, key, params(&request)?).await,
                    KeyMethod::Put => {
                        let params = params(&request)?;
                        kv::put(&app, table, key, params, request).await
                    }
                    KeyMethod::Delete => {
                        let params = params(&request)?;
                        kv::delete(&app, table, key, params, request.headers()).await
                    }
                }
            };
            answer.await.into_response()
        })
        .await
    }
}

/// `request`'s query parameters, as the router's `Query` extractor reads
/// them. A query of plain pairs (no percent-escapes, `+`, empty pairs,
/// unknown or repeated names, or values that do not parse) is read
/// directly; any other goes through `Query`, which also words the errors.
fn params<T: PlainParams>(request: &Request) -> Result<T, ApiError> {
    let plain = request.uri().query().map_or(Some(T::default()), plain);
    match plain {
        Some(params) => Ok(params),
        None => query(Query::try_from_uri(request.uri())),
    }
}

/// The table and key of a path of [`KEY_ROUTE`], when both are non-empty
/// and need no percent-decoding (so they are what the router's path
/// extraction would give); `None` for any other path, which the router
/// answers.
fn key_path(path: &str) -> Option<(&str, &str)> {
    let (table, rest) = path.strip_prefix("/v1/tables/")?.split_once('/')?;
    let key = rest.strip_prefix("keys/")?;
    let plain =
        |segment: &str| !segment.is_empty() && !segment.bytes().any(|b| b == b'/' || b == b'%');
    (plain(table) && plain(key)).then_some((table, key))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::http::StatusCode;
    use ebb_host::store::MemoryStore;
    use ebb_host::{Node, NodeConfig};

    use super::super::auth::Auth;
    use super::super::tokens::{Tokens, hash};
    use super::super::{App, HttpLimits, router};
    use super::*;

    /// A node on an in-memory store, served with a token for every table
    /// (`all`) and one that may only read and write table `open` (`some`).
    async fn state() -> AppState {
        let node = Node::open_with_store(
            NodeConfig::new("unused").fragments(2),
            Arc::new(MemoryStore::new()),
        )
        .await
        .unwrap();
        let tokens = Tokens::parse(&format!(
            r#"{{"tokens": [{{"name": "some", "sha256": "{}", "scopes": ["read", "write"], "tables": ["open"]}}]}}"#,
            ebb_host::hex::encode(&hash("some"))
        ))
        .unwrap()
        .with_token("all");
        AppState::new(App {
            node,
            limits: HttpLimits::default(),
            auth: Arc::new(Auth::new(tokens, false)),
            cors_origins: Arc::from([]),
            metrics: Default::default(),
            draining: Default::default(),
            tls: None,
            console: false,
        })
    }

    /// What a comparison looks at: status, the headers ebb sets, and the
    /// body, with versions and times (which differ between nodes)
    /// blanked. Not `content-length`, which the router sets and hyper sets
    /// on the wire for a body of known size when it is missing.
    async fn seen(response: Response) -> (StatusCode, Vec<(String, String)>, String) {
        let status = response.status();
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| !["date", "content-length"].contains(&name.as_str()))
            .map(|(name, value)| {
                let value = value.to_str().unwrap().to_string();
                let value = match name.as_str() {
                    "ebb-version" => "V".into(),
                    "ebb-expires-at" | "ebb-staleness-ms" => "T".into(),
                    _ => value,
                };
                (name.to_string(), value)
            })
            .collect();
        headers.sort();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = blank_versions(&String::from_utf8_lossy(&body));
        let body = match serde_json::from_str::<serde_json::Value>(&body) {
            Ok(serde_json::Value::Object(mut fields)) => {
                // A TTL's deadline depends on the millisecond it is resolved.
                for field in ["version_ms", "expires_at_ms"] {
                    if let Some(value) = fields.get_mut(field).filter(|v| v.is_number()) {
                        *value = serde_json::Value::from("T");
                    }
                }
                serde_json::Value::Object(fields).to_string()
            }
            _ => body,
        };
        (status, headers, body)
    }

    /// `text` with every version (`hlc_ms.counter@n` and 16 hex digits)
    /// replaced by `V`.
    fn blank_versions(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("@n") {
            let start = rest[..at]
                .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map_or(0, |i| i + 1);
            let end = (at + 2 + 16).min(rest.len());
            out.push_str(&rest[..start]);
            out.push('V');
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    /// The same requests, in the same order, to two nodes: one served with
    /// the fast path, one through the router alone, answer alike (and the
    /// metrics count them under the same route).
    #[tokio::test]
    async fn the_fast_path_answers_as_the_router_does() {
        let (a, b) = (state().await, state().await);
        let fast = Routes::with_keys(router(a.clone()), a.clone());
        let routed = Routes::router(router(b.clone()));
        let big = vec![b'x'; 2 << 20];
        let (all, some) = (Some("Bearer all"), Some("Bearer some"));
        let (none_match, bad_match) = ([("if-none-match", "*")], [("if-match", "junk")]);
        let old_match = [("if-match", "1.0@n0")];
        // (method, path under /v1/tables/, authorization, other headers, body)
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            &'a [(&'a str, &'a str)],
            &'a [u8],
        );
        let cases: Vec<Case> = vec![
            ("PUT", "open/keys/a", all, &[], b"one"),
            ("GET", "open/keys/a", all, &[], b""),
            ("GET", "open/keys/a", None, &[], b""),
            ("GET", "open/keys/a", Some("Bearer wrong"), &[], b""),
            ("GET", "open/keys/a", some, &[], b""),
            ("GET", "shut/keys/a", some, &[], b""),
            ("PUT", "shut/keys/a", some, &[], b"x"),
            ("GET", "open/keys/missing", all, &[], b""),
            ("GET", "open/keys/a?max_staleness_ms=10", all, &[], b""),
            ("GET", "open/keys/a?bogus=1", all, &[], b""),
            ("GET", "open/keys/a?max_staleness_ms=soon", all, &[], b""),
            ("GET", "Bad!Name/keys/a", all, &[], b""),
            (
                "PUT",
                "open/keys/b?ttl_ms=60000&durability=memory",
                all,
                &[],
                b"two",
            ),
            ("GET", "open/keys/b", all, &[], b""),
            (
                "PUT",
                "open/keys/b?ttl_ms=1&expires_at_ms=2",
                all,
                &[],
                b"x",
            ),
            ("PUT", "open/keys/b?durability=later", all, &[], b"x"),
            ("PUT", "open/keys/c", all, &none_match, b"new"),
            ("PUT", "open/keys/c", all, &none_match, b"again"),
            ("PUT", "open/keys/c", all, &old_match, b"x"),
            ("PUT", "open/keys/c", all, &bad_match, b"x"),
            ("PUT", "open/keys/d", all, &[], &big),
            ("DELETE", "open/keys/c", all, &[], b""),
            ("DELETE", "open/keys/c", all, &[], b""),
            ("DELETE", "open/keys/a?durability=sync", some, &[], b""),
            ("DELETE", "open/keys/a?bogus", all, &[], b""),
            ("GET", "open/keys/a", all, &[], b""),
            // Not fast: the router answers both.
            ("GET", "open/keys/a%20b", all, &[], b""),
            ("PATCH", "open/keys/b", all, &[], br#"{"ttl_ms": null}"#),
            ("POST", "open/keys/b", all, &[], b""),
        ];
        let max_value = a.node.config().max_value_bytes;
        assert!(max_value < 2 << 20, "the big value is past the value limit");
        for (method, path, token, headers, body) in cases {
            let request = || {
                let uri = format!("/v1/tables/{path}");
                let mut request = axum::http::Request::builder().method(method).uri(uri);
                for (name, value) in token.map(|t| ("authorization", t)).iter().chain(headers) {
                    request = request.header(*name, *value);
                }
                request.body(Body::from(body.to_vec())).unwrap()
            };
            let one = seen(fast.clone().call(request()).await).await;
            let other = seen(routed.clone().call(request()).await).await;
            assert_eq!(one, other, "{method} {path} {token:?} {headers:?}");
        }
        a.draining.store(true, std::sync::atomic::Ordering::Release);
        b.draining.store(true, std::sync::atomic::Ordering::Release);
        let get = || {
            axum::http::Request::get("/v1/tables/open/keys/b")
                .header("authorization", "Bearer all")
                .body(Body::empty())
                .unwrap()
        };
        let one = seen(fast.clone().call(get()).await).await;
        assert_eq!(one.0, StatusCode::SERVICE_UNAVAILABLE, "{one:?}");
        assert_eq!(one, seen(routed.clone().call(get()).await).await);
        a.draining
            .store(false, std::sync::atomic::Ordering::Release);
        b.draining
            .store(false, std::sync::atomic::Ordering::Release);
        async fn counts(routes: &Routes) -> Vec<String> {
            let request = axum::http::Request::get("/metrics")
                .header("authorization", "Bearer all")
                .body(Body::empty())
                .unwrap();
            let (status, _, text) = seen(routes.clone().call(request).await).await;
            assert_eq!(status, StatusCode::OK, "{text}");
            text.lines()
                .filter(|line| line.starts_with("ebb_http_requests_total{"))
                .map(str::to_string)
                .collect()
        }
        let counted = counts(&fast).await;
        assert!(
            counted.iter().any(|line| line.contains(KEY_ROUTE)),
            "{counted:?}"
        );
        assert_eq!(counted, counts(&routed).await);
        // The fast path really answered: over a router that knows no
        // route, key requests still are.
        let bare = Routes::with_keys(Router::new(), a.clone());
        for (uri, status) in [
            ("/v1/tables/open/keys/b", StatusCode::OK),
            ("/v1/tables/open/keys/a%62", StatusCode::NOT_FOUND),
        ] {
            let request = axum::http::Request::get(uri)
                .header("authorization", "Bearer all")
                .body(Body::empty())
                .unwrap();
            assert_eq!(bare.clone().call(request).await.status(), status, "{uri}");
        }
    }

    #[test]
    fn only_plain_key_paths_take_the_fast_path() {
        assert_eq!(key_path("/v1/tables/t/keys/k"), Some(("t", "k")));
        assert_eq!(
            key_path("/v1/tables/users/keys/user:1.a-b_c"),
            Some(("users", "user:1.a-b_c"))
        );
        for path in [
            "/v1/tables/t/keys/",
            "/v1/tables//keys/k",
            "/v1/tables/t/keys/a/b",
            "/v1/tables/t/keys/a%20b",
            "/v1/tables/t%2Fx/keys/k",
            "/v1/tables/t/batch",
            "/v1/tables/t/keys",
            "/v1/tables/t/expiry-handler",
            "/v1/sql",
            "/health",
        ] {
            assert_eq!(key_path(path), None, "{path}");
        }
    }

    /// The key routes' parameters read from `q` (`?...` or nothing) as
    /// the fast path reads them and as `Query` reads them, printed.
    fn both<T: PlainParams + std::fmt::Debug>(q: &str) -> (String, String) {
        let uri: axum::http::Uri = format!("/v1/tables/t/keys/k{q}").parse().unwrap();
        let request = Request::builder()
            .uri(uri.clone())
            .body(Body::empty())
            .unwrap();
        let show = |read: Result<T, ApiError>| match read {
            Ok(params) => format!("{params:?}"),
            Err(error) => format!("error {}", error.message),
        };
        (
            show(params::<T>(&request)),
            show(query(Query::<T>::try_from_uri(&uri))),
        )
    }

    #[test]
    fn plain_queries_read_as_the_query_extractor_reads_them() {
        use super::kv::{GetParams, PutParams, WriteParams};
        let queries = [
            "",
            "?",
            "?durability=memory",
            "?durability=",
            "?durability=a=b",
            "?ttl_ms=5&durability=wal",
            "?ttl_ms=05&expires_at_ms=18446744073709551615",
            "?ttl_ms=18446744073709551616",
            "?ttl_ms=-1",
            "?ttl_ms=",
            "?ttl_ms=1&ttl_ms=2",
            "?durability=wal&&ttl_ms=1",
            "?durability=wal&",
            "?&durability=wal",
            "?=wal",
            "?durability",
            "?nope=1",
            "?durability=me%6Dory",
            "?durability=a+b",
            "?max_staleness_ms=1000",
            "?max_staleness_ms=x",
        ];
        for q in queries {
            let (fast, general) = both::<PutParams>(q);
            assert_eq!(fast, general, "PUT {q}");
            let (fast, general) = both::<WriteParams>(q);
            assert_eq!(fast, general, "DELETE {q}");
            let (fast, general) = both::<GetParams>(q);
            assert_eq!(fast, general, "GET {q}");
        }
        // The plain forms really are read directly.
        for q in [
            "durability=memory",
            "ttl_ms=5&expires_at_ms=7&durability=wal",
        ] {
            assert!(plain::<PutParams>(q).is_some(), "{q}");
        }
        assert!(plain::<GetParams>("max_staleness_ms=1000").is_some());
        assert!(plain::<PutParams>("durability=me%6Dory").is_none());
    }
}
