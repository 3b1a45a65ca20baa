//! Reading the trail forwards: `toolhost audit export`, and the cursor and
//! records `browse` reads on with.
//! Nothing here checks the chain; that is `verify`'s job.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use super::AuditError;
use super::trail::{self, segment_name};

/// Which records an export keeps. Every given filter must match.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    pub task: Option<String>,
    pub tool: Option<String>,
    pub risk: Option<String>,
    /// A call's outcome (`ok` or an error code).
    pub outcome: Option<String>,
}

impl Filter {
    pub fn matches(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = written_at(record) else {
                return false;
            };
            if self.since.is_some_and(|since| time < since)
                || self.until.is_some_and(|until| time >= until)
            {
                return false;
            }
        }
        let wants = |filter: &Option<String>, name: &str| {
            filter
                .as_deref()
                .is_none_or(|wanted| field(name) == Some(wanted))
        };
        wants(&self.task, "task")
            && wants(&self.tool, "tool")
            && wants(&self.risk, "risk")
            && wants(&self.outcome, "outcome")
    }
}

/// When `record` was written, if it says.
pub(super) fn written_at(record: &Value) -> Option<SystemTime> {
    let time = record.get("time")?.as_str()?;
    humantime::parse_rfc3339(time).ok()
}

/// Output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The records exactly as stored, one per line.
    Jsonl,
    /// One row per record: the common fields as columns, the rest as JSON.
    Csv,
}

/// Columns of the CSV export; every other field goes into `detail`.
const COLUMNS: [&str; 11] = [
    "seq", "time", "event", "task", "tool", "risk", "outcome", "grant", "session", "approval", "by",
];

/// Parses a time bound: RFC 3339 (`2026-11-30T08:00:00Z`), a date
/// (`2026-11-30`, midnight UTC) or an age (`90m`, `2h`, `7d`: that long ago).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(at) = humantime::parse_rfc3339_weak(text) {
        return Ok(at);
    }
    if let Ok(at) = humantime::parse_rfc3339_weak(&format!("{text}T00:00:00Z")) {
        return Ok(at);
    }
    if let Ok(age) = humantime::parse_duration(text) {
        return SystemTime::now()
            .checked_sub(age)
            .ok_or_else(|| format!("{text} reaches before 1970"));
    }
    Err(format!(
        "`{text}` is not a time: use RFC 3339 (2026-11-30T08:00:00Z), a date (2026-11-30) or an age (90m, 2h, 7d)"
    ))
}

/// Writes the records of the trails under `state_dirs` that pass
/// `filter`, in `format`; several trails (one per replica) are merged by
/// time. Returns how many were written.
pub fn export(
    state_dirs: &[PathBuf],
    filter: &Filter,
    format: Format,
    out: &mut dyn Write,
) -> Result<u64, AuditError> {
    // The trails are opened and their first records read before anything
    // is written, so a trail that cannot be read at all fails the export
    // with no output (the console then answers with an error status).
    let mut cursors = state_dirs
        .iter()
        .map(|dir| TrailCursor::open(dir))
        .collect::<Result<Vec<_>, _>>()?;
    // Each trail is in time order already; a k-way merge keeps the whole
    // export streaming however long the trails are.
    let mut heads: Vec<Option<Line>> = Vec::with_capacity(cursors.len());
    for cursor in &mut cursors {
        heads.push(cursor.next_line()?);
    }
    let mut sink = match format {
        Format::Csv => {
            let mut writer = csv::Writer::from_writer(out);
            let mut header: Vec<&str> = COLUMNS.to_vec();
            header.push("detail");
            writer
                .write_record(&header)
                .map_err(|e| csv_error(Path::new("<stdout>"), e))?;
            Sink::Csv(Box::new(writer))
        }
        Format::Jsonl => Sink::Lines(out),
    };
    let mut written = 0;
    loop {
        let earliest = heads
            .iter()
            .enumerate()
            .filter_map(|(i, head)| head.as_ref().map(|line| (i, line)))
            .min_by(|(_, a), (_, b)| a.time.cmp(&b.time))
            .map(|(i, _)| i);
        let Some(i) = earliest else { break };
        let line = heads[i].take().expect("the earliest head is a line");
        heads[i] = cursors[i].next_line()?;
        if !filter.matches(&line.record) {
            continue;
        }
        written += 1;
        match &mut sink {
            Sink::Csv(writer) => writer
                .write_record(csv_row(line.record))
                .map_err(|e| csv_error(&cursors[i].dir, e))?,
            Sink::Lines(out) => writeln!(out, "{}", line.text).map_err(stdout_error)?,
        }
    }
    match sink {
        Sink::Csv(mut writer) => writer.flush().map_err(stdout_error)?,
        Sink::Lines(out) => out.flush().map_err(stdout_error)?,
    }
    Ok(written)
}

/// One record as read back: its text, parsed, and its time for merging.
pub(super) struct Line {
    pub(super) text: String,
    pub(super) record: Value,
    pub(super) time: String,
}

impl Line {
    /// A stored line, without its newline; `None` if it is not a record.
    pub(super) fn parse(bytes: &[u8]) -> Option<Line> {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let record = serde_json::from_str::<Value>(&text).ok()?;
        let time = record["time"].as_str().unwrap_or_default().to_string();
        Some(Line { text, record, time })
    }
}

/// A reading position in one trail: a segment and an offset in it. Only
/// whole lines are returned; a line still being written is read once it
/// is complete.
pub(super) struct TrailCursor {
    dir: PathBuf,
    segment: u32,
    offset: u64,
    reader: Option<BufReader<File>>,
    buf: Vec<u8>,
    /// The segment is closed: the next end of it reached is final.
    draining: bool,
}

impl TrailCursor {
    /// At the trail's first record.
    fn open(state_dir: &Path) -> Result<TrailCursor, AuditError> {
        let dir = state_dir.join(trail::AUDIT_DIR);
        let first = trail::segments(&dir)?.first().copied().unwrap_or(1);
        Ok(TrailCursor::at(state_dir, first, 0))
    }

    /// At `offset` in segment `segment`, the start of a line.
    pub(super) fn at(state_dir: &Path, segment: u32, offset: u64) -> TrailCursor {
        TrailCursor {
            dir: state_dir.join(trail::AUDIT_DIR),
            segment,
            offset,
            reader: None,
            buf: Vec::new(),
            draining: false,
        }
    }

    /// The first segment after the current one, if there is one.
    fn next_segment(&self) -> Result<Option<u32>, AuditError> {
        if self.dir.join(segment_name(self.segment + 1)).exists() {
            return Ok(Some(self.segment + 1));
        }
        Ok(trail::segments(&self.dir)?
            .into_iter()
            .find(|&n| n > self.segment))
    }

    /// The next whole record, or `None` at the end of what is written.
    pub(super) fn next_line(&mut self) -> Result<Option<Line>, AuditError> {
        loop {
            let path = self.dir.join(segment_name(self.segment));
            if self.reader.is_none() {
                match File::open(&path) {
                    Ok(mut file) => {
                        file.seek(SeekFrom::Start(self.offset)).map_err(|source| {
                            AuditError::Io {
                                path: path.clone(),
                                source,
                            }
                        })?;
                        self.reader = Some(BufReader::new(file));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(source) => return Err(AuditError::Io { path, source }),
                }
            }
            let reader = self.reader.as_mut().expect("opened above");
            self.buf.clear();
            let read =
                reader
                    .read_until(b'\n', &mut self.buf)
                    .map_err(|source| AuditError::Io {
                        path: path.clone(),
                        source,
                    })?;
            if read > 0 && self.buf.last() == Some(&b'\n') {
                self.offset += read as u64;
                let Some(line) = Line::parse(&self.buf[..read - 1]) else {
                    continue;
                };
                return Ok(Some(line));
            }
            // At the end of what is written; a part line is read again,
            // whole, next time.
            self.reader = None;
            // A later segment means this one is closed. Numbers are
            // consecutive unless segments were removed; `verify` reports
            // that, and reading goes on with what is there.
            let Some(next) = self.next_segment()? else {
                return Ok(None);
            };
            if self.draining {
                // The segment was closed before this read began, so what
                // it holds is all it will: go on to the next.
                self.draining = false;
                self.segment = next;
                self.offset = 0;
                continue;
            }
            // Closed after the read began: read it once more, to its end.
            self.draining = true;
        }
    }
}

enum Sink<'a> {
    Csv(Box<csv::Writer<&'a mut dyn Write>>),
    Lines(&'a mut dyn Write),
}

fn csv_row(record: Value) -> Vec<String> {
    let Value::Object(mut map) = record else {
        return Vec::new();
    };
    let mut row: Vec<String> = COLUMNS
        .iter()
        .map(|column| match map.remove(*column) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
        })
        .collect();
    // Chain fields matter to verify, not to a reader of the export.
    map.remove("prev");
    row.push(Value::Object(map).to_string());
    row
}

fn csv_error(path: &Path, e: csv::Error) -> AuditError {
    AuditError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

pub(super) fn stdout_error(source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: PathBuf::from("<stdout>"),
        source,
    }
}
