//! The HTTP floor for `make bench-http`: a bare axum server on the same
//! runtime settings as `ebb serve`, answering GET with a constant and PUT by
//! reading the body and answering a constant. Whatever ebb adds on top of
//! this is ebb's own cost.

use axum::Router;
use axum::body::Bytes;
use axum::routing::get;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let app = Router::new().route(
        "/{*path}",
        get(|| async { "constant value" })
            .put(|body: Bytes| async move { format!("{{\"len\":{}}}", body.len()) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("floor listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await
}
