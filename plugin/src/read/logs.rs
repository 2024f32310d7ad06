//! Streams a relayed Job's logs from the manager's logs API through the API
//! server, copying each chunk to the output as it arrives.

use std::io::Write;

use anyhow::Context as _;
use futures::AsyncReadExt;

use crate::errors::from_logs_api;

/// Copies the body of `GET uri` to `out`, flushed per chunk, until the
/// stream ends (with `follow`, when the Pods' containers end or the user
/// stops it).
pub async fn stream(
    client: &kube::Client,
    uri: &str,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<()> {
    let request = http::Request::get(uri)
        .body(Vec::new())
        .context("cannot make the logs request")?;
    let mut body = client
        .request_stream(request)
        .await
        .map_err(from_logs_api)?;
    let mut chunk = vec![0u8; 32 * 1024];
    loop {
        let read = body
            .read(&mut chunk)
            .await
            .context("the logs stream broke off")?;
        if read == 0 {
            return Ok(());
        }
        out.write_all(&chunk[..read])?;
        out.flush()?;
    }
}
