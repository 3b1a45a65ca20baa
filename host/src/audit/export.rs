//! Reading the trail back: `toolhost audit export` and `toolhost audit tail`.
//! Neither checks the chain; that is `verify`'s job.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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
}

impl Filter {
    pub fn matches(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = field("time").and_then(|t| humantime::parse_rfc3339(t).ok()) else {
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
        wants(&self.task, "task") && wants(&self.tool, "tool") && wants(&self.risk, "risk")
    }
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

/// Writes every record that `filter` keeps to `out`; returns how many.
pub fn export(
    state_dir: &Path,
    filter: &Filter,
    format: Format,
    out: &mut dyn Write,
) -> Result<u64, AuditError> {
    let dir = state_dir.join(trail::AUDIT_DIR);
    let mut sink = match format {
        Format::Csv => {
            let mut writer = csv::Writer::from_writer(out);
            let mut header: Vec<&str> = COLUMNS.to_vec();
            header.push("detail");
            writer
                .write_record(&header)
                .map_err(|e| csv_error(&dir, e))?;
            Sink::Csv(Box::new(writer))
        }
        Format::Jsonl => Sink::Lines(out),
    };
    let mut written = 0;
    for number in trail::segments(&dir)? {
        let path = dir.join(segment_name(number));
        let file = File::open(&path).map_err(|source| AuditError::Io {
            path: path.clone(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        let mut bytes = Vec::new();
        while next_line(&mut reader, &mut bytes)
            .map_err(|source| AuditError::Io {
                path: path.clone(),
                source,
            })?
            .is_some()
        {
            let line = String::from_utf8_lossy(&bytes[..bytes.len() - 1]);
            let Ok(record) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if !filter.matches(&record) {
                continue;
            }
            written += 1;
            match &mut sink {
                Sink::Csv(writer) => writer
                    .write_record(csv_row(record))
                    .map_err(|e| csv_error(&path, e))?,
                Sink::Lines(out) => writeln!(out, "{line}").map_err(stdout_error)?,
            }
        }
    }
    match sink {
        Sink::Csv(mut writer) => writer.flush().map_err(stdout_error)?,
        Sink::Lines(out) => out.flush().map_err(stdout_error)?,
    }
    Ok(written)
}

/// Reads the next whole line, newline included, and returns its length;
/// `None` at the end, or before a line without its newline, which a writer
/// is still appending or a crash tore (it is no record yet).
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
    line.clear();
    let read = reader.read_until(b'\n', line)?;
    Ok((read > 0 && line.last() == Some(&b'\n')).then_some(read))
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

fn stdout_error(source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: PathBuf::from("<stdout>"),
        source,
    }
}

/// Prints the last `count` records; with `follow`, keeps printing new ones
/// (across rotations) until the process is stopped.
pub fn tail(
    state_dir: &Path,
    count: usize,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), AuditError> {
    let dir = state_dir.join(trail::AUDIT_DIR);
    let numbers = trail::segments(&dir)?;
    let mut last: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut position = (numbers.last().copied().unwrap_or(1), 0u64);
    for &number in &numbers {
        let path = dir.join(segment_name(number));
        let file = File::open(&path).map_err(|source| AuditError::Io {
            path: path.clone(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        let mut offset = 0u64;
        let mut line = Vec::new();
        while let Some(read) =
            next_line(&mut reader, &mut line).map_err(|source| AuditError::Io {
                path: path.clone(),
                source,
            })?
        {
            offset += read as u64;
            if count > 0 {
                if last.len() == count {
                    last.pop_front();
                }
                last.push_back(String::from_utf8_lossy(&line).trim_end().to_string());
            }
        }
        position = (number, offset);
    }
    for line in &last {
        writeln!(out, "{line}").map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)?;
    if !follow {
        return Ok(());
    }
    let (mut number, mut offset) = position;
    loop {
        let path = dir.join(segment_name(number));
        if let Ok(mut file) = File::open(&path) {
            let _ = file.seek(SeekFrom::Start(offset));
            let mut reader = BufReader::new(file);
            let mut line = Vec::new();
            while let Ok(Some(read)) = next_line(&mut reader, &mut line) {
                offset += read as u64;
                out.write_all(&line).map_err(stdout_error)?;
            }
            out.flush().map_err(stdout_error)?;
        }
        if dir.join(segment_name(number + 1)).exists() {
            // Finish the closed segment first: the loop reads it once more.
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if offset >= len {
                number += 1;
                offset = 0;
            }
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
