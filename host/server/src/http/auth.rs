//! Authorization of requests: the bearer token's grant ([`super::tokens`])
//! against the scope and table each route needs. `/health` is always open;
//! `/metrics` needs a `read` token on every table unless `--metrics-open`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{Method, header};
use parking_lot::RwLock;

use super::error::ApiError;
use super::tokens::{Grant, Scope, Tokens};

/// The tokens a server accepts and whether `/metrics` is open. With no
/// token at all, nothing is checked.
#[derive(Debug, Default)]
pub struct Auth {
    tokens: RwLock<Tokens>,
    metrics_open: bool,
}

impl Auth {
    /// Accept `tokens`; `metrics_open` leaves `/metrics` open even then.
    pub fn new(tokens: Tokens, metrics_open: bool) -> Self {
        Self {
            tokens: RwLock::new(tokens),
            metrics_open,
        }
    }

    /// Replace the tokens (a reload of the tokens file).
    pub fn replace(&self, tokens: Tokens) {
        *self.tokens.write() = tokens;
    }

    /// Whether requests need a token.
    pub fn required(&self) -> bool {
        !self.tokens.read().is_empty()
    }

    /// Check the request's token against what its `/v1` route needs: 401
    /// without a known token, 403 `forbidden` naming the missing scope or
    /// the table the token may not touch. The grant goes with the request
    /// (SQL and the table list follow its tables).
    pub fn authorize(&self, route: &str, request: &mut Request) -> Result<(), ApiError> {
        let Some(grant) = self.grant(request)? else {
            return Ok(());
        };
        let needed = scope_of(route, request.method());
        if !grant.scopes.contains(&needed) {
            return Err(forbidden(format!(
                "token {:?} lacks the {needed} scope, which {} {route} needs",
                grant.name,
                request.method()
            )));
        }
        if let Some(table) = table_of(route, request.uri().path())
            && !grant.covers(&table)
        {
            return Err(forbidden(format!(
                "token {:?} may not touch table {table}; it is limited to: {}",
                grant.name,
                limited_to(&grant)
            )));
        }
        request.extensions_mut().insert(Arc::new(grant));
        Ok(())
    }

    /// `/metrics` needs a `read` token on every table (it names every
    /// table), unless the server runs with `--metrics-open` or asks for no
    /// token.
    pub fn authorize_metrics(&self, request: &Request) -> Result<(), ApiError> {
        if self.metrics_open {
            return Ok(());
        }
        match self.grant(request)? {
            None => Ok(()),
            Some(grant) if grant.scopes.contains(&Scope::Read) && grant.tables.is_none() => Ok(()),
            Some(grant) => Err(forbidden(format!(
                "token {:?} cannot read /metrics: it needs the read scope on every table (or start the server with --metrics-open)",
                grant.name
            ))),
        }
    }

    /// The grant of the request's bearer token; `None` when no token is
    /// required; 401 when one is and the request has none that is known.
    fn grant(&self, request: &Request) -> Result<Option<Grant>, ApiError> {
        let tokens = self.tokens.read();
        if tokens.is_empty() {
            return Ok(None);
        }
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        match given.and_then(|token| tokens.grant(token)) {
            Some(grant) => Ok(Some(grant.clone())),
            None => Err(ApiError::unauthorized()),
        }
    }
}

/// The scope a `/v1` route needs for `method`.
pub fn scope_of(route: &str, method: &Method) -> Scope {
    let reads = *method == Method::GET || *method == Method::HEAD;
    match route {
        "/v1/sql" => Scope::Read,
        "/v1/tables/{table}/keys/{key}"
        | "/v1/tables/{table}/keys/"
        | "/v1/tables/{table}/batch" => {
            if reads {
                Scope::Read
            } else {
                Scope::Write
            }
        }
        "/v1/admin/backup" => Scope::Admin,
        _ if reads => Scope::Read,
        // Binding, unbinding, redriving, uploading and removing plugins.
        _ => Scope::Admin,
    }
}

/// The table a `/v1/tables/{table}/...` request names (as given).
fn table_of(route: &str, path: &str) -> Option<String> {
    if !route.starts_with("/v1/tables/{table}") {
        return None;
    }
    path.strip_prefix("/v1/tables/")
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string)
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(axum::http::StatusCode::FORBIDDEN, "forbidden", message)
}

/// The tables a limited grant names, comma-separated.
pub fn limited_to(grant: &Grant) -> String {
    grant
        .tables
        .iter()
        .flatten()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_needs_the_scope_of_what_it_does() {
        let key = "/v1/tables/{table}/keys/{key}";
        assert_eq!(scope_of(key, &Method::GET), Scope::Read);
        for method in [Method::PUT, Method::DELETE, Method::PATCH] {
            assert_eq!(scope_of(key, &method), Scope::Write);
        }
        assert_eq!(
            scope_of("/v1/tables/{table}/batch", &Method::POST),
            Scope::Write
        );
        assert_eq!(scope_of("/v1/sql", &Method::POST), Scope::Read);
        let handler = "/v1/tables/{table}/change-handler";
        assert_eq!(scope_of(handler, &Method::GET), Scope::Read);
        assert_eq!(scope_of(handler, &Method::PUT), Scope::Admin);
        assert_eq!(scope_of("/v1/plugins/{name}", &Method::PUT), Scope::Admin);
        assert_eq!(scope_of("/v1/admin/backup", &Method::POST), Scope::Admin);
        assert_eq!(
            table_of(key, "/v1/tables/users/keys/k").as_deref(),
            Some("users")
        );
        assert_eq!(table_of("/v1/sql", "/v1/sql"), None);
    }
}
