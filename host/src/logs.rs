//! Where the process's log lines go: stderr, each line redacted
//! (`redact::LogRedaction`).
//!
//! A serving host hands every line to a thread of its own through a bounded
//! queue. A reader of stderr that stalls (a client that pipes it and never
//! reads it, a slow journal) then holds up no call: the thread waits on the
//! pipe, and once the queue is full new lines are dropped and counted, the
//! count written when stderr moves again. The audit trail, not the log, is
//! the record of what happened. Other commands write each line in place, so
//! nothing they log is lost when they exit.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::MakeWriter;

use crate::redact::{LogRedaction, RedactingStderr};

/// Lines waiting for the log thread; the queue's own slots take 32 KiB.
const QUEUED_LINES: usize = 1024;

/// A queued line is cut beyond this, so a full queue holds at most 8 MiB
/// whatever a plugin put in a line (a URL, an HTTP method of its own).
const QUEUED_LINE_BYTES: usize = 8 << 10;

/// How long exiting waits for the queued lines to be written.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// The log writer `tracing_subscriber::fmt` is given; a clone writes to the
/// same place.
#[derive(Clone)]
pub enum LogSink {
    /// Each line written to stderr by the thread that logged it.
    InPlace(LogRedaction),
    /// Each line queued for the log thread.
    Queued(Queue),
}

/// The sending side of the log thread's queue.
#[derive(Clone)]
pub struct Queue {
    lines: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    /// For writing in place should the log thread be gone.
    redaction: LogRedaction,
    /// Whether lines carry terminal styles.
    ansi: bool,
}

enum Message {
    Line(Vec<u8>),
    /// Answered once every line queued before it is written.
    Flush(SyncSender<()>),
}

impl LogSink {
    /// Lines written in place, by whoever logs them.
    pub fn in_place(redaction: LogRedaction) -> LogSink {
        LogSink::InPlace(redaction)
    }

    /// Lines written by a thread of their own; `ansi` if they carry
    /// terminal styles. Falls back to writing in place if that thread
    /// cannot be started.
    pub fn queued(redaction: LogRedaction, ansi: bool) -> LogSink {
        let (lines, rx) = mpsc::sync_channel(QUEUED_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let writer = {
            let dropped = dropped.clone();
            move || write_lines(rx, &dropped, std::io::stderr())
        };
        match std::thread::Builder::new()
            .name("toolhost-log".into())
            .spawn(writer)
        {
            Ok(_) => LogSink::Queued(Queue {
                lines,
                dropped,
                redaction,
                ansi,
            }),
            Err(_) => LogSink::InPlace(redaction),
        }
    }

    /// Waits, for 2 s at most, until the lines logged so far are written;
    /// for the end of the process. False if they were not: stderr is
    /// stalled, and writing to it would hang.
    pub fn flush(&self) -> bool {
        let LogSink::Queued(queue) = self else {
            return true;
        };
        let until = Instant::now() + FLUSH_WAIT;
        let (done, written) = mpsc::sync_channel(1);
        let mut flush = Message::Flush(done);
        loop {
            match queue.lines.try_send(flush) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return true,
                Err(TrySendError::Full(back)) if Instant::now() < until => {
                    flush = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TrySendError::Full(_)) => return false,
            }
        }
        written
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

/// The log thread: writes each line, and first how many were dropped.
fn write_lines(rx: Receiver<Message>, dropped: &AtomicU64, mut out: impl Write) {
    for message in rx {
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let note = format!(
                "toolhost: {lost} log lines dropped: stderr was not read as fast as the host logged\n"
            );
            let _ = out.write_all(note.as_bytes());
        }
        match message {
            Message::Line(line) => {
                let _ = out.write_all(&line);
            }
            Message::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
        }
    }
}

/// What ends a line cut short.
const CUT: &str = "… (cut)\n";

/// Ahead of `CUT` when lines carry terminal styles: resets any the cut
/// left open.
const RESET: &str = "\x1b[0m";

/// `line` as queued: cut to `QUEUED_LINE_BYTES` (at a character), still
/// ending the line.
fn queued_line(line: &[u8], ansi: bool) -> Vec<u8> {
    if line.len() <= QUEUED_LINE_BYTES {
        return line.to_vec();
    }
    let mut end = QUEUED_LINE_BYTES;
    // Back to the start of a UTF-8 character.
    while end > 0 && line[end] & 0b1100_0000 == 0b1000_0000 {
        end -= 1;
    }
    let reset = if ansi { RESET } else { "" };
    let mut cut = Vec::with_capacity(end + reset.len() + CUT.len());
    cut.extend_from_slice(&line[..end]);
    cut.extend_from_slice(reset.as_bytes());
    cut.extend_from_slice(CUT.as_bytes());
    cut
}

/// One line's writer.
pub enum LineWriter<'a> {
    /// Straight to stderr, redacted.
    InPlace(RedactingStderr),
    /// Redacted, cut and queued for the log thread.
    Queued(&'a Queue),
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LineWriter::InPlace(out) => out.write(buf),
            LineWriter::Queued(queue) => {
                // `fmt` hands over each event's formatted line in one write.
                // Redacted before it is cut, so a cut cannot split a secret.
                let line = queued_line(&queue.redaction.redact(buf), queue.ansi);
                match queue.lines.try_send(Message::Line(line)) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        queue.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    // Only if the log thread panicked: write as it could.
                    Err(TrySendError::Disconnected(_)) => {
                        queue.redaction.stderr().write_all(buf)?;
                    }
                }
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            LineWriter::InPlace(out) => out.flush(),
            LineWriter::Queued(_) => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        match self {
            LogSink::InPlace(redaction) => LineWriter::InPlace(redaction.stderr()),
            LogSink::Queued(queue) => LineWriter::Queued(queue),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue whose thread is stuck (as on a full pipe) takes lines
    /// without waiting, counts what it cannot hold, and says so once the
    /// thread writes again.
    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (lines, rx) = mpsc::sync_channel(4);
        let queue = Queue {
            lines,
            dropped: Arc::new(AtomicU64::new(0)),
            redaction: LogRedaction::default(),
            ansi: false,
        };
        let mut writer = LineWriter::Queued(&queue);
        for n in 0..10 {
            writer.write_all(format!("line {n}\n").as_bytes()).unwrap();
        }
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 6);
        let queued: Vec<String> = rx
            .try_iter()
            .map(|m| match m {
                Message::Line(line) => String::from_utf8(line).unwrap(),
                Message::Flush(_) => unreachable!(),
            })
            .collect();
        assert_eq!(queued, ["line 0\n", "line 1\n", "line 2\n", "line 3\n"]);
    }

    /// A line longer than a queued line may be is cut at a character and
    /// still ends the line; one that fits is queued as it is.
    #[test]
    fn long_lines_are_cut_before_they_are_queued() {
        // One ASCII byte first, so the limit falls inside a 2-byte `é`.
        let long = format!("a{}\n", "é".repeat(QUEUED_LINE_BYTES));
        let cut = String::from_utf8(queued_line(long.as_bytes(), false)).unwrap();
        assert_eq!(cut.len(), QUEUED_LINE_BYTES - 1 + CUT.len());
        assert!(cut.ends_with(CUT) && !cut.contains('\x1b'));
        // On a terminal the cut also resets the styles it may leave open.
        let styled = String::from_utf8(queued_line(long.as_bytes(), true)).unwrap();
        assert!(styled.ends_with(&format!("{RESET}{CUT}")));
        let fits = vec![b'x'; QUEUED_LINE_BYTES];
        assert_eq!(queued_line(&fits, true), fits);
        assert_eq!(queued_line(b"short\n", true), b"short\n");
    }

    /// A secret across the cut is replaced whole before the line is cut.
    #[test]
    fn a_line_is_redacted_before_it_is_cut() {
        let secret = "s3cr3t-across-the-cut";
        let redaction = LogRedaction::default();
        redaction.set(Arc::new(crate::redact::Redactor::new(&[(
            "token".into(),
            zeroize::Zeroizing::new(secret.into()),
        )])));
        let (lines, rx) = mpsc::sync_channel(4);
        let queue = Queue {
            lines,
            dropped: Arc::new(AtomicU64::new(0)),
            redaction,
            ansi: false,
        };
        // Cut as it came, the line would end in the secret's first 10 bytes.
        let line = format!("{}{secret}\n", "x".repeat(QUEUED_LINE_BYTES - 10));
        LineWriter::Queued(&queue)
            .write_all(line.as_bytes())
            .unwrap();
        let Ok(Message::Line(queued)) = rx.try_recv() else {
            panic!("a line is queued")
        };
        let queued = String::from_utf8(queued).unwrap();
        assert!(!queued.contains(&secret[..4]), "{queued}");
        assert!(queued.contains("[REDACTED"), "{queued}");
    }

    /// With the log thread stuck on stderr and its queue full, exiting
    /// gives up on the queued lines instead of waiting for ever.
    #[test]
    fn flushing_a_stuck_queue_gives_up() {
        let (lines, _stuck) = mpsc::sync_channel(1);
        let sink = LogSink::Queued(Queue {
            lines,
            dropped: Arc::new(AtomicU64::new(0)),
            redaction: LogRedaction::default(),
            ansi: false,
        });
        sink.make_writer().write_all(b"fills the queue\n").unwrap();
        assert!(!sink.flush());
    }

    /// The thread says how many lines it lost before the next it writes.
    #[test]
    fn the_count_of_dropped_lines_comes_before_the_next_line() {
        let (lines, rx) = mpsc::sync_channel(4);
        let dropped = AtomicU64::new(3);
        lines.send(Message::Line(b"after\n".to_vec())).unwrap();
        drop(lines);
        let mut out = Vec::new();
        write_lines(rx, &dropped, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "toolhost: 3 log lines dropped: stderr was not read as fast as the host logged\nafter\n"
        );
    }
}
