//! MCP over stdio: newline-delimited JSON-RPC on stdin and stdout.
//!
//! stdout carries JSON-RPC and nothing else (logs go to stderr). Frames are
//! read with a size cap: a longer line is never buffered whole, it is skipped
//! to its end and answered with a JSON-RPC error, and the stream goes on. So
//! are lines that are not JSON or not a JSON-RPC message, which rmcp's own
//! stdio transport would drop silently.
//!
//! There is no reader or writer task between the streams and rmcp: its
//! service loop reads a frame itself when it waits for the next message, and
//! each answer is written by the task rmcp sends it from. Every hand-over
//! between tasks costs a wake-up (and often a thread switch), and those were
//! the largest share of what a call cost the server.
//!
//! A client that sends faster than it reads its answers is held back: while
//! [`BACKLOG_ANSWERS`] answers, or [`BACKLOG_BYTES`] of them, wait to be
//! written, no further request is read (see [`Backlog`]). Without that, one
//! that never read stdout made its host hold every answer in memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, ErrorCode, JsonRpcRequest,
    JsonRpcVersion2_0, RequestId,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, ServerInitializeError, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::{Binding, McpCatalog, McpSession};
use crate::dispatch::Toolhost;

/// Answers waiting to be written at which reading stops until some are
/// out. Far above what a client that reads as it sends leaves waiting (a
/// write takes microseconds), far below what would weigh on the host.
pub const BACKLOG_ANSWERS: usize = 64;
/// Bytes of answers waiting to be written at which reading stops: a few
/// large tool results count as much as many small answers.
pub const BACKLOG_BYTES: usize = 4 << 20;

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

type Input = Box<dyn AsyncRead + Unpin + Send>;
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
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    max_message_bytes: usize,
    task: Option<String>,
) -> std::io::Result<()> {
    let replies = TaskTracker::new();
    let transport = LineTransport {
        input: BufReader::new(input),
        frame: FrameReader::new(max_message_bytes),
        seen_request: false,
        output: Arc::new(Mutex::new(Sink::new(output))),
        backlog: Arc::new(Backlog::default()),
        replies: replies.clone(),
        error_reply: None,
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
    // Answers to malformed lines are written by tasks of their own; the
    // session is over only once they are out.
    replies.close();
    replies.wait().await;
    result
}

/// The rmcp side of the stdio streams: frames parsed as rmcp asks for the
/// next message, answers written as rmcp sends them.
struct LineTransport<R, W> {
    input: BufReader<R>,
    frame: FrameReader,
    /// rmcp ends the session if its first message is not a request, so
    /// stray notifications or responses before the first request are
    /// dropped here.
    seen_request: bool,
    /// Shared by every write so that lines never interleave.
    output: Arc<Mutex<Sink<W>>>,
    /// The answers not yet written, which hold the reading back.
    backlog: Arc<Backlog>,
    /// Where the error answers to malformed lines are written from.
    replies: TaskTracker,
    /// The error answer being written, if any: the next one waits for it,
    /// which keeps them in order and holds the reading back while the
    /// client does not read stdout.
    error_reply: Option<JoinHandle<()>>,
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        // Counted now, before rmcp's loop can ask for the next request.
        let mut waiting = Backlog::enter(&self.backlog);
        // rmcp runs this future on a task of its own: the answer is
        // serialised there, off the loop that reads the next request.
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            drop(item);
            line.push(b'\n');
            waiting.weigh(line.len());
            write_line(&output, &line).await
        }
    }

    /// Cancel-safe, as rmcp's loop needs (it drops this future whenever
    /// something else is ready first): a partly read frame stays in
    /// `self.frame`, and an error answer is written by its own task.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(writing) = &mut self.error_reply {
                if let Err(e) = writing.await {
                    tracing::error!("answering a malformed line failed: {e}");
                }
                self.error_reply = None;
            }
            self.backlog.room().await;
            let outcome = match self.frame.next(&mut self.input).await {
                Ok(Frame::Eof) => return None,
                Ok(Frame::Line) => classify(self.frame.line()),
                Ok(Frame::TooLong(size)) => Err(rpc_error(
                    Value::Null,
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "message of {size}+ bytes exceeds the limit of {} bytes",
                        self.frame.max
                    ),
                )),
                Err(e) => {
                    tracing::error!("reading stdin failed: {e}");
                    return None;
                }
            };
            self.frame.done();
            match outcome {
                Ok(Some(message)) if !self.seen_request && !is_request(&message) => {
                    tracing::warn!("dropping a message sent before the first request");
                }
                Ok(Some(message)) => {
                    self.seen_request |= is_request(&message);
                    return Some(message);
                }
                Ok(None) => {}
                Err(mut reply) => {
                    reply.push('\n');
                    let output = self.output.clone();
                    self.error_reply = Some(self.replies.spawn(async move {
                        if let Err(e) = write_line(&output, reply.as_bytes()).await {
                            tracing::error!("answering a malformed line failed: {e}");
                        }
                    }));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(writing) = self.error_reply.take() {
            let _ = writing.await;
        }
        Ok(())
    }
}

/// The answers handed to the transport and not yet written, in number and
/// bytes. rmcp gives each answer to a task of its own as soon as its
/// handler returns, whether or not the client reads, so this is where the
/// pile-up is seen; the reading waits for [`Backlog::room`] before each
/// frame. Requests already being handled still answer, so the pile stops
/// a little above the limits, bounded by the calls that may be in flight.
#[derive(Default)]
struct Backlog {
    answers: AtomicUsize,
    bytes: AtomicUsize,
    /// Set while the reading waits, so that a written answer wakes it only
    /// then (a wake-up costs more than the check).
    reader_waiting: AtomicBool,
    written: Notify,
}

impl Backlog {
    /// Counts one more answer waiting, until the returned guard is dropped
    /// (written, failed or given up).
    fn enter(backlog: &Arc<Backlog>) -> Waiting {
        backlog.answers.fetch_add(1, Ordering::SeqCst);
        Waiting {
            backlog: backlog.clone(),
            bytes: 0,
        }
    }

    fn full(&self) -> bool {
        self.answers.load(Ordering::SeqCst) >= BACKLOG_ANSWERS
            || self.bytes.load(Ordering::SeqCst) >= BACKLOG_BYTES
    }

    /// Returns once the backlog is below both limits. Cancel-safe.
    async fn room(&self) {
        while self.full() {
            let written = self.written.notified();
            tokio::pin!(written);
            // Registered before the flag is raised and the backlog looked
            // at again, so an answer written in between is not missed.
            written.as_mut().enable();
            let _waiting = ReaderWaiting::raise(&self.reader_waiting);
            if self.full() {
                written.await;
            }
        }
    }
}

/// The reader's flag in a [`Backlog`], lowered again however the wait
/// ends: rmcp drops the reading whenever another event comes first.
struct ReaderWaiting<'a>(&'a AtomicBool);

impl ReaderWaiting<'_> {
    fn raise(flag: &AtomicBool) -> ReaderWaiting<'_> {
        flag.store(true, Ordering::SeqCst);
        ReaderWaiting(flag)
    }
}

impl Drop for ReaderWaiting<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One answer's place in the [`Backlog`].
struct Waiting {
    backlog: Arc<Backlog>,
    bytes: usize,
}

impl Waiting {
    /// Adds the answer's size, once it is serialised.
    fn weigh(&mut self, bytes: usize) {
        self.backlog.bytes.fetch_add(bytes, Ordering::SeqCst);
        self.bytes += bytes;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.backlog.bytes.fetch_sub(self.bytes, Ordering::SeqCst);
        self.backlog.answers.fetch_sub(1, Ordering::SeqCst);
        if self.backlog.reader_waiting.load(Ordering::SeqCst) {
            self.backlog.written.notify_waiters();
        }
    }
}

/// stdout as the writers share it.
struct Sink<W> {
    stream: W,
    /// A line was cut off part-way: its writer's future was dropped (rmcp
    /// gives up on answers it cannot send in time when the session ends)
    /// after some of its bytes went out. The next line then starts on a
    /// fresh line, so only the cut one is lost and no two run together.
    torn: bool,
}

impl<W> Sink<W> {
    fn new(stream: W) -> Sink<W> {
        Sink {
            stream,
            torn: false,
        }
    }
}

/// Writes one JSON-RPC line (ending in `\n`) whole, in one write where the
/// pipe takes it, under the lock every write takes.
async fn write_line<W: AsyncWrite + Unpin>(
    output: &Mutex<Sink<W>>,
    line: &[u8],
) -> std::io::Result<()> {
    let mut sink = output.lock().await;
    if sink.torn {
        // One byte: it is either written or not when a drop comes.
        sink.stream.write_all(b"\n").await?;
        sink.torn = false;
    }
    let mut rest = line;
    while !rest.is_empty() {
        // A write that has not completed has written nothing, so `torn`
        // always says whether part of this line is out.
        let written = sink.stream.write(rest).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        rest = &rest[written..];
        sink.torn = !rest.is_empty();
    }
    sink.stream.flush().await
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
    if let Some(call) = tool_call(line) {
        return Ok(Some(call));
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

/// The shape of a plain `tools/call` request: these keys and no others.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEnvelope<'a> {
    #[allow(dead_code, reason = "checked by its type: only \"2.0\" parses")]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    method: &'a str,
    #[serde(borrow)]
    params: &'a RawValue,
}

/// A `tools/call` request, parsed the short way: rmcp's message type tries
/// each request type it knows in turn, buffering the message for every try,
/// and that was most of what reading a call cost. Here the envelope is read
/// once and rmcp's own `CallToolRequest` parses the params, so the result is
/// what the long way gives. Anything else (another method, extra keys,
/// params that are no call's) returns `None` and takes the long way.
fn tool_call(line: &[u8]) -> Option<ClientJsonRpcMessage> {
    let envelope: CallEnvelope = serde_json::from_slice(line).ok()?;
    if envelope.method != "tools/call" {
        return None;
    }
    let request = format!(
        r#"{{"method":"tools/call","params":{}}}"#,
        envelope.params.get()
    );
    let request: CallToolRequest = serde_json::from_str(&request).ok()?;
    Some(ClientJsonRpcMessage::Request(JsonRpcRequest::new(
        envelope.id,
        ClientRequest::CallToolRequest(request),
    )))
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

/// The largest frame buffer kept between messages: far above a call's
/// usual size, far below the message cap.
const KEPT_FRAME_BYTES: usize = 64 << 10;

/// Splits the input at `\n`, keeping at most `max` bytes of a line: a
/// longer one is consumed and dropped without being buffered. What is read
/// of a frame so far lives here, not in the reading future, so that future
/// can be dropped between reads without losing input.
struct FrameReader {
    max: usize,
    line: Vec<u8>,
    /// Bytes of the current frame seen so far, kept or not.
    seen: usize,
}

impl FrameReader {
    fn new(max: usize) -> FrameReader {
        FrameReader {
            max,
            line: Vec::new(),
            seen: 0,
        }
    }

    /// The frame [`FrameReader::next`] last returned as a line.
    fn line(&self) -> &[u8] {
        &self.line
    }

    /// Forgets the frame last returned, before the next is read. A buffer
    /// grown for a large message is let go of, not kept for the session's
    /// life (up to `--max-message-bytes` of memory the host touched).
    fn done(&mut self) {
        if self.line.capacity() > KEPT_FRAME_BYTES {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
        self.seen = 0;
    }

    /// Reads to the end of the current frame. Cancel-safe: bytes leave the
    /// buffered reader only once they are counted here.
    async fn next(&mut self, input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Frame> {
        loop {
            let chunk = input.fill_buf().await?;
            if chunk.is_empty() {
                // EOF: a last line without newline still counts.
                return Ok(match self.seen {
                    0 => Frame::Eof,
                    n if n > self.max => Frame::TooLong(n),
                    _ => Frame::Line,
                });
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            self.seen += take;
            if self.seen <= self.max {
                self.line.extend_from_slice(&chunk[..take]);
            } else {
                self.line.clear();
            }
            input.consume(take + usize::from(done));
            if done {
                return Ok(if self.seen > self.max {
                    Frame::TooLong(self.seen)
                } else {
                    Frame::Line
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolRequestParams, RequestMetaObject};

    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut frame = FrameReader::new(max);
        let mut out = Vec::new();
        loop {
            let got = match frame.next(&mut reader).await.unwrap() {
                Frame::Eof => return out,
                Frame::Line => String::from_utf8(frame.line().to_vec()).unwrap(),
                Frame::TooLong(n) => format!("<too long: {n}>"),
            };
            out.push(got);
            frame.done();
        }
    }

    /// Either limit fills the backlog, and an answer written (its place
    /// dropped) wakes the reading that waits for room.
    #[tokio::test]
    async fn the_backlog_holds_reading_back_by_count_or_bytes() {
        let backlog = Arc::new(Backlog::default());
        let mut big = Backlog::enter(&backlog);
        big.weigh(BACKLOG_BYTES);
        assert!(backlog.full(), "one answer of the whole byte limit");
        let waiting = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(big);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken once the answer is written")
            .unwrap();
        let small: Vec<Waiting> = (0..BACKLOG_ANSWERS)
            .map(|_| Backlog::enter(&backlog))
            .collect();
        assert!(backlog.full(), "as many answers as the count limit");
        drop(small);
        assert!(!backlog.full());
    }

    #[tokio::test]
    async fn a_large_frame_does_not_keep_its_buffer() {
        let mut input = vec![b'x'; 1 << 20];
        input.extend_from_slice(b"\nsmall\n");
        let mut reader = BufReader::new(&input[..]);
        let mut frame = FrameReader::new(4 << 20);
        assert!(matches!(
            frame.next(&mut reader).await.unwrap(),
            Frame::Line
        ));
        assert_eq!(frame.line().len(), 1 << 20);
        frame.done();
        assert!(frame.line.capacity() <= KEPT_FRAME_BYTES);
        assert!(matches!(
            frame.next(&mut reader).await.unwrap(),
            Frame::Line
        ));
        assert_eq!(frame.line(), b"small");
        frame.done();
        assert!(frame.line.capacity() > 0, "a small frame's buffer is kept");
    }

    #[tokio::test]
    async fn long_lines_are_dropped_and_the_stream_recovers() {
        let got = frames(b"short\nthis line is too long\nok\nlast", 8).await;
        assert_eq!(got, ["short", "<too long: 21>", "ok", "last"]);
    }

    /// rmcp drops the reading future whenever another event wins; a frame
    /// read in pieces across such drops must come out whole.
    #[tokio::test]
    async fn a_frame_survives_its_reading_future_being_dropped() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut reader = BufReader::new(server);
        let mut frame = FrameReader::new(1024);
        client.write_all(b"{\"first\":").await.unwrap();
        for _ in 0..3 {
            let attempt = tokio::time::timeout(
                std::time::Duration::from_millis(20),
                frame.next(&mut reader),
            );
            assert!(attempt.await.is_err(), "no whole frame yet");
        }
        client.write_all(b"1}\nnext\n").await.unwrap();
        assert!(matches!(
            frame.next(&mut reader).await.unwrap(),
            Frame::Line
        ));
        assert_eq!(frame.line(), b"{\"first\":1}");
        frame.done();
        assert!(matches!(
            frame.next(&mut reader).await.unwrap(),
            Frame::Line
        ));
        assert_eq!(frame.line(), b"next");
    }

    /// The id, params and `_meta` of a parsed `tools/call`.
    fn call_parts(
        message: ClientJsonRpcMessage,
    ) -> (RequestId, CallToolRequestParams, Option<RequestMetaObject>) {
        match message {
            ClientJsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(call),
                ..
            }) => {
                let meta = call.extensions.get::<RequestMetaObject>().cloned();
                (id, call.params, meta)
            }
            other => panic!("not a call: {other:?}"),
        }
    }

    /// The short way and rmcp's own parse agree on every call, and the
    /// short way leaves alone what is not a plain call.
    #[test]
    fn a_call_parses_the_same_either_way() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,{"b":null}]}}}"#,
            r#"{"method":"tools/call","id":"x-1","jsonrpc":"2.0","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","inputResponses":{},"requestState":"s"}}"#,
            " {\"jsonrpc\" : \"2.0\",\t\"id\": 4 , \"method\":\"tools/call\", \"params\" : { \"name\" : \"t\" } } ",
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","unknown":{"x":1}}}"#,
            r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"t\u00e9\n"}}"#,
        ] {
            let short = tool_call(line.as_bytes()).expect(line);
            let long = serde_json::from_str::<ClientJsonRpcMessage>(line).unwrap();
            assert_eq!(call_parts(short), call_parts(long), "{line}");
        }
        // Each of these is either no call at all or one whose reading is
        // best left to rmcp: the short way must decline it.
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools\/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":null}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"tools/call","params":{"name":"t"}}"#,
        ] {
            assert!(tool_call(line.as_bytes()).is_none(), "{line}");
        }
        // Odd ids: whatever rmcp makes of them, the short way makes the
        // same or declines.
        for line in [
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
        ] {
            let long = serde_json::from_str::<ClientJsonRpcMessage>(line);
            match (tool_call(line.as_bytes()), long) {
                (Some(short), Ok(long)) => {
                    assert_eq!(call_parts(short), call_parts(long), "{line}")
                }
                (Some(short), Err(e)) => panic!("{line}: rmcp refuses ({e}), short: {short:?}"),
                (None, _) => {}
            }
        }
    }

    /// A line whose writer was dropped part-way ends where it was cut, and
    /// the next line arrives whole on a line of its own.
    #[tokio::test]
    async fn a_line_cut_off_does_not_run_into_the_next() {
        let (stream, mut client) = tokio::io::duplex(16);
        let output = Mutex::new(Sink::new(stream));
        let mut long = vec![b'x'; 40];
        long.push(b'\n');
        let cut = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            write_line(&output, &long),
        );
        assert!(cut.await.is_err(), "the pipe holds only 16 bytes");
        let next = b"{\"next\":1}\n";
        let read = async {
            let mut got = Vec::new();
            while !got.ends_with(next) {
                let mut chunk = [0; 64];
                let n = tokio::io::AsyncReadExt::read(&mut client, &mut chunk)
                    .await
                    .unwrap();
                assert!(n > 0, "stream ended early: {got:?}");
                got.extend_from_slice(&chunk[..n]);
            }
            got
        };
        let (written, got) = tokio::join!(write_line(&output, next), read);
        written.unwrap();
        let mut want = vec![b'x'; 16];
        want.push(b'\n');
        want.extend_from_slice(next);
        assert_eq!(got, want);
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
