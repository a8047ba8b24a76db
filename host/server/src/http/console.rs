//! The web console: its three files, built into the binary, served at `/` and `/console/*` under a strict Content-Security-Policy.
//!
//! The files hold no data and need no token: the page asks for one when
//! the API answers 401 and keeps it in the browser session. The policy
//! lets the page load only its own script and style and talk only to this
//! server, so a value shown in a result can never run as code, and no
//! other site may frame the page.

use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The policy of every console file.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// One file of the console.
struct Asset {
    body: &'static str,
    content_type: &'static str,
    etag: OnceLock<HeaderValue>,
}

impl Asset {
    const fn new(body: &'static str, content_type: &'static str) -> Self {
        Self {
            body,
            content_type,
            etag: OnceLock::new(),
        }
    }

    /// A strong validator: the SHA-256 of the file, so a browser revalidates
    /// cheaply and never keeps a file of another build.
    fn etag(&self) -> &HeaderValue {
        self.etag.get_or_init(|| {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(self.body.as_bytes());
            let tag = format!("\"{}\"", ebb_host::hex::encode(&digest[..16]));
            HeaderValue::from_str(&tag).expect("hex is a valid header value")
        })
    }

    /// The file, or 304 when the browser holds this version.
    fn respond(&self, request: &HeaderMap) -> Response {
        let etag = self.etag();
        let headers = [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::ETAG, etag.clone()),
        ];
        let fresh = request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|tag| tag.trim() == etag.to_str().unwrap_or_default());
        if fresh {
            (StatusCode::NOT_MODIFIED, headers).into_response()
        } else {
            (headers, self.body).into_response()
        }
    }
}

static INDEX: Asset = Asset::new(
    include_str!("console/index.html"),
    "text/html; charset=utf-8",
);
static SCRIPT: Asset = Asset::new(
    include_str!("console/console.js"),
    "text/javascript; charset=utf-8",
);
static STYLE: Asset = Asset::new(
    include_str!("console/console.css"),
    "text/css; charset=utf-8",
);

/// `GET /`: the console page.
pub async fn index(headers: HeaderMap) -> Response {
    INDEX.respond(&headers)
}

/// `GET /console/console.js`.
pub async fn script(headers: HeaderMap) -> Response {
    SCRIPT.respond(&headers)
}

/// `GET /console/console.css`.
pub async fn style(headers: HeaderMap) -> Response {
    STYLE.respond(&headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files_and_no_inline_code() {
        let page = INDEX.body;
        assert!(page.contains(r#"src="/console/console.js""#), "{page}");
        assert!(page.contains(r#"href="/console/console.css""#), "{page}");
        // The policy forbids inline code: none may be in the page.
        assert!(!page.contains("<script>"), "inline script in the page");
        assert!(!page.contains(" style="), "inline style in the page");
        assert!(!page.contains(" onclick="), "inline handler in the page");
        // Nothing from another site: no CDN, no network at runtime.
        for external in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
            assert!(!page.contains(external), "{external} in the page");
        }
    }

    #[test]
    fn a_browser_holding_the_file_gets_304() {
        let mut request = HeaderMap::new();
        assert_eq!(SCRIPT.respond(&request).status(), StatusCode::OK);
        request.insert(header::IF_NONE_MATCH, SCRIPT.etag().clone());
        let response = SCRIPT.respond(&request);
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(response.headers()[header::ETAG], *SCRIPT.etag());
        request.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"old\""));
        assert_eq!(SCRIPT.respond(&request).status(), StatusCode::OK);
    }
}
