//! A deadline on what a client leaves unread.
//!
//! A client can keep its connection open and read nothing: its kernel
//! advertises a window of zero and keeps acknowledging the probes, so TCP
//! never gives up, and a response bigger than the socket buffers (or many
//! small ones, pipelined) waits for ever. That would hold the connection's
//! task and one of `--max-connections` places until enough such clients
//! leave every new one waiting in the listen backlog. [`WriteDeadline`]
//! fails the write instead, once nothing has been taken for the limit, and
//! hyper closes the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A stream whose writes fail once none has made progress for `limit`.
/// Reads pass through; the header and body deadlines bound those.
pub struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Armed when a write first waits, disarmed when one goes through: most
    /// writes never wait, so most connections never make a timer.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, limit: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Passes on what the stream did, and fails a wait longer than the
    /// limit.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client took nothing of its response for {} ms",
                limit.as_millis()
            ),
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_nobody_takes_fails_after_the_limit() {
        // A pipe of 64 bytes that nobody reads fills, then waits.
        let (near, _far) = tokio::io::duplex(64);
        let mut stream = WriteDeadline::new(near, Duration::from_millis(200));
        stream.write_all(&[1; 64]).await.unwrap();
        let began = std::time::Instant::now();
        let error = stream.write_all(&[2; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(began.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn a_write_taken_slowly_but_steadily_goes_through() {
        // Each wait is shorter than the limit, though all of them together
        // are much longer.
        let (near, mut far) = tokio::io::duplex(64);
        let mut stream = WriteDeadline::new(near, Duration::from_millis(500));
        let reader = tokio::spawn(async move {
            let mut buf = [0; 64];
            let mut total = 0;
            while total < 1280 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                total += far.read(&mut buf).await.unwrap();
            }
            total
        });
        stream.write_all(&[3; 1280]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 1280);
    }
}
