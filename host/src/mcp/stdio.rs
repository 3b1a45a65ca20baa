//! MCP over stdio: newline-delimited JSON-RPC on stdin and stdout.
//!
//! stdout carries JSON-RPC and nothing else (logs go to stderr). Frames are
//! read with a size cap: a longer line is never buffered whole, it is skipped
//! to its end and answered with a JSON-RPC error, and the stream goes on. So
//! are lines that are not JSON or not a JSON-RPC message, which rmcp's own
//! stdio transport would drop silently.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use rmcp::service::{RoleServer, RxJsonRpcMessage, ServerInitializeError, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{Binding, McpCatalog, McpSession};
use crate::dispatch::Toolhost;

/// Lines queued for stdout; small, since the writer keeps up easily.
const OUTBOUND_QUEUE: usize = 64;

/// Serves one MCP session on stdin/stdout until stdin closes, for `task`
/// (if any).
pub async fn serve(
    host: Arc<Toolhost>,
    catalog: Arc<McpCatalog>,
    max_message_bytes: usize,
    task: Option<String>,
) -> std::io::Result<()> {
    serve_on(host, catalog, stdin(), stdout(), max_message_bytes, task).await
}

type Input = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin as the runtime can best read it. A client that launches the host
/// gives it a pipe, which is read through the runtime's reactor; tokio's
/// own stdin instead hands every read to a blocking thread, and those
/// thread switches were most of the CPU a call cost. Anything else (a
/// terminal, a file, a socket) is read the portable way.
///
/// The pipe is opened afresh through /proc rather than duplicated, so the
/// non-blocking mode the reactor needs is set on the host's own open file
/// and never on the one it shares with its parent or with fd 0 itself.
fn stdin() -> Input {
    match tokio::net::unix::pipe::OpenOptions::new().open_receiver("/proc/self/fd/0") {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// stdout, for the same reason and in the same way as [`stdin`].
fn stdout() -> Output {
    match tokio::net::unix::pipe::OpenOptions::new().open_sender("/proc/self/fd/1") {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// Serves one MCP session on any byte streams (stdio, or pipes in tests).
pub async fn serve_on(
    host: Arc<Toolhost>,
    catalog: Arc<McpCatalog>,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    max_message_bytes: usize,
    task: Option<String>,
) -> std::io::Result<()> {
    let (out_tx, out_rx) = mpsc::channel::<String>(OUTBOUND_QUEUE);
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(OUTBOUND_QUEUE);
    let writer = tokio::spawn(write_lines(out_rx, output));
    let reader = tokio::spawn(read_frames(
        BufReader::new(input),
        max_message_bytes,
        in_tx,
        out_tx.clone(),
    ));

    let transport = LineTransport {
        inbound: in_rx,
        outbound: out_tx,
    };
    let result = match McpSession::new(host, catalog, Binding::Fixed(task))
        .serve(transport)
        .await
    {
        Ok(running) => running
            .waiting()
            .await
            .map(drop)
            .map_err(std::io::Error::other),
        // The client went away before its first request: a normal end.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    };
    reader.abort();
    // The writer ends once every sender is gone, after flushing what is queued.
    let _ = writer.await;
    result
}

/// The rmcp side of the stdio streams: parsed messages in, lines out.
struct LineTransport {
    inbound: mpsc::Receiver<ClientJsonRpcMessage>,
    outbound: mpsc::Sender<String>,
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outbound = self.outbound.clone();
        async move {
            let line = serde_json::to_string(&item).map_err(std::io::Error::other)?;
            outbound
                .send(line)
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inbound.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inbound.close();
        Ok(())
    }
}

async fn write_lines(
    mut lines: mpsc::Receiver<String>,
    mut output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

/// Reads frames until EOF, handing valid messages to rmcp and answering the
/// rest with JSON-RPC errors.
async fn read_frames(
    mut input: impl AsyncBufRead + Unpin,
    max_bytes: usize,
    messages: mpsc::Sender<ClientJsonRpcMessage>,
    replies: mpsc::Sender<String>,
) {
    let mut line = Vec::new();
    // rmcp ends the session if its first message is not a request, so stray
    // notifications or responses before the first request are dropped here.
    let mut seen_request = false;
    loop {
        let frame = match read_capped_line(&mut input, &mut line, max_bytes).await {
            Ok(Frame::Eof) => break,
            Ok(frame) => frame,
            Err(e) => {
                tracing::error!("reading stdin failed: {e}");
                break;
            }
        };
        let outcome = match frame {
            Frame::Line => classify(&line),
            Frame::TooLong(size) => Err(rpc_error(
                Value::Null,
                ErrorCode::INVALID_REQUEST,
                format!("message of {size}+ bytes exceeds the limit of {max_bytes} bytes"),
            )),
            Frame::Eof => unreachable!("handled above"),
        };
        match outcome {
            Ok(Some(message)) if !seen_request && !is_request(&message) => {
                tracing::warn!("dropping a message sent before the first request");
            }
            Ok(Some(message)) => {
                seen_request |= is_request(&message);
                if messages.send(message).await.is_err() {
                    break;
                }
            }
            Ok(None) => {}
            Err(reply) => {
                if replies.send(reply).await.is_err() {
                    break;
                }
            }
        }
    }
}

fn is_request(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(_))
}

/// Parses one line: a message for rmcp, nothing (blank line or a malformed
/// notification, which gets no reply by JSON-RPC rules), or an error reply.
fn classify(line: &[u8]) -> Result<Option<ClientJsonRpcMessage>, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        return Ok(Some(message));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Err(rpc_error(
                Value::Null,
                ErrorCode::PARSE_ERROR,
                format!("not valid JSON: {e}"),
            ));
        }
    };
    if value.is_array() {
        return Err(rpc_error(
            Value::Null,
            ErrorCode::INVALID_REQUEST,
            "JSON-RPC batches are not supported by MCP".into(),
        ));
    }
    let id = value.get("id").cloned();
    let is_notification = id.is_none() && value.get("method").is_some_and(Value::is_string);
    if is_notification {
        tracing::warn!("dropping a malformed notification");
        return Ok(None);
    }
    let id = id
        .filter(|v| v.is_string() || v.is_number())
        .unwrap_or(Value::Null);
    Err(rpc_error(
        id,
        ErrorCode::INVALID_REQUEST,
        "not a valid JSON-RPC 2.0 request, notification or response".into(),
    ))
}

fn rpc_error(id: Value, code: ErrorCode, message: String) -> String {
    // Built by hand: rmcp's message type cannot carry a null id.
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code.0, "message": message } })
        .to_string()
}

enum Frame {
    Line,
    TooLong(usize),
    Eof,
}

/// Reads up to the next `\n` into `line`, keeping at most `max` bytes; a
/// longer line is consumed and dropped without being buffered.
async fn read_capped_line(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    line.clear();
    let mut seen = 0usize;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            // EOF: a last line without newline still counts.
            return Ok(match seen {
                0 => Frame::Eof,
                n if n > max => Frame::TooLong(n),
                _ => Frame::Line,
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        seen += take;
        if seen <= max {
            line.extend_from_slice(&chunk[..take]);
        } else {
            line.clear();
        }
        input.consume(take + usize::from(done));
        if done {
            return Ok(if seen > max {
                Frame::TooLong(seen)
            } else {
                Frame::Line
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_capped_line(&mut reader, &mut line, max).await.unwrap() {
                Frame::Eof => return out,
                Frame::Line => out.push(String::from_utf8(line.clone()).unwrap()),
                Frame::TooLong(n) => out.push(format!("<too long: {n}>")),
            }
        }
    }

    #[tokio::test]
    async fn long_lines_are_dropped_and_the_stream_recovers() {
        let got = frames(b"short\nthis line is too long\nok\nlast", 8).await;
        assert_eq!(got, ["short", "<too long: 21>", "ok", "last"]);
    }

    #[test]
    fn malformed_input_gets_the_matching_json_rpc_error() {
        let parse = classify(b"{not json").unwrap_err();
        assert!(parse.contains("-32700"), "{parse}");
        let invalid = classify(br#"{"jsonrpc":"2.0","id":7,"params":{}}"#).unwrap_err();
        assert!(
            invalid.contains("-32600") && invalid.contains(r#""id":7"#),
            "{invalid}"
        );
        let batch = classify(b"[]").unwrap_err();
        assert!(batch.contains("-32600"), "{batch}");
        assert!(classify(b"   ").unwrap().is_none());
    }
}
