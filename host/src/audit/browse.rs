//! Reading a trail from its newest end: for the console, the newest
//! records through a filter and one record by its seq; for `audit tail`,
//! the last records (`Back`, and where following them begins); for
//! `audit verify`, the replica a trail names. Each holds at most a chunk
//! of a segment and the records it returns, however long the trail has
//! grown, and reads no further back than it must. (`export` reads
//! forwards, from the oldest record, for whole exports.)

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::AuditError;
use super::export::{Filter, Line, TrailCursor, stdout_error, written_at};
use super::trail::{self, segment_name};

/// Bytes read at a time when walking a segment backwards.
const CHUNK: usize = 64 << 10;

/// The newest records that passed a filter.
#[derive(Debug, Default)]
pub struct Newest {
    /// Newest first.
    pub records: Vec<Value>,
    /// Older records pass the filter too; they were not read.
    pub more: bool,
}

/// The newest `count` records of the trail under `state_dir` that pass
/// `filter`, newest first. Reading stops at the first match beyond
/// `count`, so a common filter reads only the end of the newest segment,
/// and at the first record older than the filter's `since`: records are
/// written in time order. (If the clock was stepped back, records written
/// just before the step can be missed; an export reads them all.) A filter
/// that matches nothing, without `since`, reads the whole trail, one chunk
/// at a time.
pub fn newest(state_dir: &Path, filter: &Filter, count: usize) -> Result<Newest, AuditError> {
    let mut lines = Back::open(state_dir)?;
    let mut found = Newest::default();
    while let Some(line) = lines.next_line()? {
        let Ok(record) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if filter
            .since
            .is_some_and(|since| written_at(&record).is_some_and(|at| at < since))
        {
            break;
        }
        if !filter.matches(&record) {
            continue;
        }
        if found.records.len() == count {
            found.more = true;
            break;
        }
        found.records.push(record);
    }
    Ok(found)
}

/// The replica named by the newest record of the trail under `state_dir`
/// that names one; `None` for a trail without such records.
pub fn replica_of(state_dir: &Path) -> Result<Option<String>, AuditError> {
    let mut lines = Back::open(state_dir)?;
    while let Some(line) = lines.next_line()? {
        let replica = serde_json::from_slice::<Value>(&line)
            .ok()
            .and_then(|record| Some(record.get("replica")?.as_str()?.to_string()));
        if replica.is_some() {
            return Ok(replica);
        }
    }
    Ok(None)
}

/// A trail's whole lines, from its newest back to its oldest, across its
/// segments.
pub(super) struct Back {
    dir: PathBuf,
    /// Segments not opened yet, oldest first.
    older: Vec<u32>,
    lines: Option<Backwards>,
    /// Where the whole lines of the newest segment ended when it was
    /// opened.
    end: (u32, u64),
}

impl Back {
    pub(super) fn open(state_dir: &Path) -> Result<Back, AuditError> {
        let dir = state_dir.join(trail::AUDIT_DIR);
        let older = trail::segments(&dir)?;
        // Should every listed segment be gone by the time it is opened,
        // following begins at the newest of them, where the writer goes on.
        let newest = older.last().copied().unwrap_or(1);
        let mut back = Back {
            dir,
            older,
            lines: None,
            end: (newest, 0),
        };
        if let (Some(number), Some(lines)) = (back.open_older()?, &back.lines) {
            back.end = (number, lines.end);
        }
        Ok(back)
    }

    /// The segment and offset just past the newest whole line there was
    /// when the trail was opened: reading on forwards from there misses
    /// no later record and repeats none of these.
    pub(super) fn end(&self) -> (u32, u64) {
        self.end
    }

    /// Opens the newest segment not yet read that is still there, and
    /// says which it is.
    fn open_older(&mut self) -> Result<Option<u32>, AuditError> {
        self.lines = None;
        while let Some(number) = self.older.pop() {
            if let Some(lines) = Backwards::open(self.dir.join(segment_name(number)))? {
                self.lines = Some(lines);
                return Ok(Some(number));
            }
        }
        Ok(None)
    }

    /// The next line back, without its newline.
    pub(super) fn next_line(&mut self) -> Result<Option<Vec<u8>>, AuditError> {
        loop {
            let Some(lines) = self.lines.as_mut() else {
                return Ok(None);
            };
            if let Some(line) = lines.next_line()? {
                return Ok(Some(line));
            }
            self.open_older()?;
        }
    }
}

/// Prints the last `count` records of the trails under `state_dirs`
/// (merged by time); with `follow`, keeps printing new ones as they are
/// written, until the process is stopped. Each trail is read back from its
/// end only as far as `count` records, however long it is.
pub fn tail(
    state_dirs: &[PathBuf],
    count: usize,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), AuditError> {
    let mut cursors = Vec::with_capacity(state_dirs.len());
    let mut last: Vec<Line> = Vec::new();
    for dir in state_dirs {
        let mut back = Back::open(dir)?;
        // Following goes on from where reading back began: no record is
        // missed or printed twice.
        let (segment, offset) = back.end();
        cursors.push(TrailCursor::at(dir, segment, offset));
        let mut mine = Vec::new();
        while mine.len() < count {
            let Some(bytes) = back.next_line()? else {
                break;
            };
            mine.extend(Line::parse(&bytes));
        }
        // Oldest first, so that records of one time keep their order.
        last.extend(mine.into_iter().rev());
    }
    print_in_time_order(&mut last, count, out)?;
    if !follow {
        return Ok(());
    }
    loop {
        let mut fresh = Vec::new();
        for cursor in &mut cursors {
            while let Some(line) = cursor.next_line()? {
                fresh.push(line);
            }
        }
        print_in_time_order(&mut fresh, usize::MAX, out)?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Prints the newest `count` of `lines`, oldest first.
fn print_in_time_order(
    lines: &mut Vec<Line>,
    count: usize,
    out: &mut dyn Write,
) -> Result<(), AuditError> {
    // Stable: records of one trail with the same time keep their order.
    lines.sort_by(|a, b| a.time.cmp(&b.time));
    let skip = lines.len().saturating_sub(count);
    for line in lines.drain(..).skip(skip) {
        writeln!(out, "{}", line.text).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// The record numbered `seq` in the trail under `state_dir`, if it has
/// one. Seqs rise through the segments, so only the segment whose first
/// record is the newest at or before `seq` is searched.
pub fn find(state_dir: &Path, seq: u64) -> Result<Option<Value>, AuditError> {
    let dir = state_dir.join(trail::AUDIT_DIR);
    for number in trail::segments(&dir)?.into_iter().rev() {
        let mut lines = TrailCursor::at(state_dir, number, 0);
        let mut starts_at_or_before = false;
        while let Some(line) = lines.next_line()? {
            let Some(at) = line.record.get("seq").and_then(Value::as_u64) else {
                continue;
            };
            if at == seq {
                return Ok(Some(line.record));
            }
            // Past it (in this segment or, read on into, a later one).
            if at > seq {
                break;
            }
            starts_at_or_before = true;
        }
        if starts_at_or_before {
            // Earlier segments are before `seq`.
            return Ok(None);
        }
    }
    Ok(None)
}

/// A segment listed a moment ago, or `None` if it has been removed since
/// (it then holds nothing to show).
fn open_segment(path: &Path) -> Result<Option<File>, AuditError> {
    match File::open(path) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AuditError::io_at(path)(source)),
    }
}

/// A segment's whole lines, from its last towards its first. A line still
/// being written at the end when the segment is opened is left out, as is
/// whatever is appended after.
struct Backwards {
    path: PathBuf,
    file: File,
    /// Where the bytes in `buf` begin in the file.
    pos: u64,
    /// Bytes not yet returned, ending just after a newline (or empty).
    buf: Vec<u8>,
    /// Where the whole lines ended when the segment was opened.
    end: u64,
}

impl Backwards {
    fn open(path: PathBuf) -> Result<Option<Backwards>, AuditError> {
        let Some(file) = open_segment(&path)? else {
            return Ok(None);
        };
        let len = file.metadata().map_err(AuditError::io_at(&path))?.len();
        let mut lines = Backwards {
            path,
            file,
            pos: len,
            buf: Vec::new(),
            end: 0,
        };
        // Drop the unfinished tail, reading back until a newline ends
        // the part that is whole.
        loop {
            if let Some(end) = lines.buf.iter().rposition(|&b| b == b'\n') {
                lines.buf.truncate(end + 1);
                break;
            }
            if lines.pos == 0 {
                lines.buf.clear();
                break;
            }
            lines.read_earlier()?;
        }
        lines.end = lines.pos + lines.buf.len() as u64;
        Ok(Some(lines))
    }

    /// Puts the chunk before `pos` in front of `buf`. The chunk grows with
    /// what is held, so a record longer than a chunk costs reads in
    /// proportion to its length, not to its square.
    fn read_earlier(&mut self) -> Result<(), AuditError> {
        let size = CHUNK.max(self.buf.len()) as u64;
        let start = self.pos.saturating_sub(size);
        let mut chunk = vec![0; (self.pos - start) as usize];
        self.file
            .read_exact_at(&mut chunk, start)
            .map_err(AuditError::io_at(&self.path))?;
        chunk.extend_from_slice(&self.buf);
        self.buf = chunk;
        self.pos = start;
        Ok(())
    }

    /// The next line back, without its newline.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, AuditError> {
        loop {
            let Some((_, body)) = self.buf.split_last() else {
                return Ok(None);
            };
            if let Some(start) = body.iter().rposition(|&b| b == b'\n') {
                let line = body[start + 1..].to_vec();
                self.buf.truncate(start + 1);
                return Ok(Some(line));
            }
            if self.pos == 0 {
                let line = body.to_vec();
                self.buf.clear();
                return Ok(Some(line));
            }
            self.read_earlier()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::SystemTime;

    use serde_json::json;

    use super::*;

    /// When record `seq` of a test trail was written: a second apart.
    fn time_of(seq: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_780_000_000 + seq)
    }

    /// A trail of `segments` segments of `per_segment` records each, seq
    /// from 1, tool `even` or `odd` by seq.
    fn trail(segments: u32, per_segment: u64) -> tempfile::TempDir {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join(trail::AUDIT_DIR);
        fs::create_dir(&dir).unwrap();
        let mut seq = 0;
        for number in 1..=segments {
            let mut text = String::new();
            for _ in 0..per_segment {
                seq += 1;
                let tool = if seq % 2 == 0 { "even" } else { "odd" };
                // Padding makes records span chunk boundaries.
                let pad = "x".repeat((seq as usize * 37) % 3000);
                let time = humantime::format_rfc3339_micros(time_of(seq)).to_string();
                let record = json!({"seq": seq, "time": time, "tool": tool, "pad": pad});
                text.push_str(&record.to_string());
                text.push('\n');
            }
            fs::write(dir.join(segment_name(number)), text).unwrap();
        }
        state
    }

    /// Replaces segment `number` with one that fails when read: a
    /// directory, with an entry so that every filesystem gives it a size.
    fn make_unreadable(state: &tempfile::TempDir, number: u32) {
        let segment = state
            .path()
            .join(trail::AUDIT_DIR)
            .join(segment_name(number));
        fs::remove_file(&segment).unwrap();
        fs::create_dir(&segment).unwrap();
        fs::write(segment.join("entry"), "x").unwrap();
    }

    fn seqs(records: &[Value]) -> Vec<u64> {
        records.iter().map(|r| r["seq"].as_u64().unwrap()).collect()
    }

    #[test]
    fn the_newest_matches_come_back_newest_first_across_segments() {
        let state = trail(3, 100);
        let odd = Filter {
            tool: Some("odd".into()),
            ..Filter::default()
        };
        let found = newest(state.path(), &odd, 70).unwrap();
        let expected: Vec<u64> = (1..=300).rev().filter(|s| s % 2 == 1).take(70).collect();
        assert_eq!(seqs(&found.records), expected);
        assert!(found.more);

        // All of them: every segment read back, nothing more to find.
        let found = newest(state.path(), &odd, 1000).unwrap();
        assert_eq!(found.records.len(), 150);
        assert_eq!(seqs(&found.records).last(), Some(&1));
        assert!(!found.more);

        let none = Filter {
            tool: Some("neither".into()),
            ..Filter::default()
        };
        let found = newest(state.path(), &none, 10).unwrap();
        assert!(found.records.is_empty() && !found.more);
    }

    #[test]
    fn reading_stops_once_the_newest_matches_are_found() {
        let state = trail(3, 100);
        // A view that finds its records in the newer segments never
        // touches the oldest.
        make_unreadable(&state, 1);
        let found = newest(state.path(), &Filter::default(), 150).unwrap();
        assert_eq!(seqs(&found.records), (151..=300).rev().collect::<Vec<_>>());
        assert!(found.more);
        // Whether a 201st exists is only known by reading on.
        assert!(newest(state.path(), &Filter::default(), 200).is_err());
        assert_eq!(find(state.path(), 150).unwrap().unwrap()["seq"], 150);

        // Records are in time order: one older than `since` ends the
        // reading, however few matched.
        let since = Filter {
            since: Some(time_of(120)),
            ..Filter::default()
        };
        let found = newest(state.path(), &since, 1000).unwrap();
        assert_eq!(seqs(&found.records), (120..=300).rev().collect::<Vec<_>>());
        assert!(!found.more);
    }

    #[test]
    fn records_and_unfinished_lines_longer_than_a_chunk_are_read_whole() {
        let state = trail(1, 3);
        let path = state.path().join(trail::AUDIT_DIR).join(segment_name(1));
        let mut text = fs::read(&path).unwrap();
        let long = "y".repeat(3 * CHUNK + 17);
        text.extend_from_slice(json!({"seq": 4, "pad": long}).to_string().as_bytes());
        text.push(b'\n');
        text.extend_from_slice(&br#"{"seq":5,"pad":""#.repeat(CHUNK / 4));
        fs::write(&path, &text).unwrap();
        let found = newest(state.path(), &Filter::default(), 10).unwrap();
        assert_eq!(seqs(&found.records), vec![4, 3, 2, 1]);
        assert_eq!(found.records[0]["pad"], long.as_str());
        assert_eq!(
            find(state.path(), 4).unwrap().unwrap()["pad"],
            long.as_str()
        );
    }

    #[test]
    fn a_line_still_being_written_is_left_out() {
        let state = trail(1, 5);
        let path = state.path().join(trail::AUDIT_DIR).join(segment_name(1));
        let mut text = fs::read(&path).unwrap();
        text.extend_from_slice(br#"{"seq":6,"tool":"ev"#);
        fs::write(&path, &text).unwrap();
        let found = newest(state.path(), &Filter::default(), 10).unwrap();
        assert_eq!(seqs(&found.records), vec![5, 4, 3, 2, 1]);
        assert_eq!(find(state.path(), 6).unwrap(), None);

        // A segment that is nothing but an unfinished line.
        fs::write(&path, br#"{"seq":1"#).unwrap();
        let found = newest(state.path(), &Filter::default(), 10).unwrap();
        assert!(found.records.is_empty());
    }

    #[test]
    fn one_record_is_found_by_its_seq_in_any_segment() {
        let state = trail(4, 50);
        for seq in [1, 50, 51, 123, 200] {
            let record = find(state.path(), seq).unwrap().unwrap();
            assert_eq!(record["seq"], seq);
        }
        assert_eq!(find(state.path(), 0).unwrap(), None);
        assert_eq!(find(state.path(), 201).unwrap(), None);

        // A segment removed (as an operator's retention might): its
        // records are not found, the others still are.
        fs::remove_file(state.path().join(trail::AUDIT_DIR).join(segment_name(2))).unwrap();
        assert_eq!(find(state.path(), 75).unwrap(), None);
        assert_eq!(find(state.path(), 125).unwrap().unwrap()["seq"], 125);
        assert_eq!(find(state.path(), 25).unwrap().unwrap()["seq"], 25);
    }

    /// The seqs of printed records, one per line.
    fn printed_seqs(text: &[u8]) -> Vec<u64> {
        let records: Vec<Value> = String::from_utf8_lossy(text)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        seqs(&records)
    }

    #[test]
    fn tail_prints_the_newest_records_reading_back_only_as_far_as_them() {
        let state = trail(3, 100);
        make_unreadable(&state, 1);
        let mut out = Vec::new();
        tail(&[state.path().to_path_buf()], 150, false, &mut out).unwrap();
        assert_eq!(printed_seqs(&out), (151..=300).collect::<Vec<_>>());
        let mut out = Vec::new();
        tail(&[state.path().to_path_buf()], 0, false, &mut out).unwrap();
        assert!(out.is_empty());
        assert!(tail(&[state.path().to_path_buf()], 201, false, &mut Vec::new()).is_err());
    }

    #[test]
    fn tail_merges_trails_by_time_and_keeps_the_order_of_equal_times() {
        let one = trail(2, 10);
        let two = tempfile::tempdir().unwrap();
        let dir = two.path().join(trail::AUDIT_DIR);
        fs::create_dir(&dir).unwrap();
        // Three records of one time, later than all of the first trail's.
        let lines: String = (1..=3)
            .map(|seq| {
                format!(
                    "{{\"seq\":{},\"time\":\"2030-01-01T00:00:00Z\"}}\n",
                    100 + seq
                )
            })
            .collect();
        fs::write(dir.join(segment_name(1)), lines).unwrap();
        let mut out = Vec::new();
        tail(
            &[one.path().to_path_buf(), two.path().to_path_buf()],
            5,
            false,
            &mut out,
        )
        .unwrap();
        assert_eq!(printed_seqs(&out), vec![19, 20, 101, 102, 103]);
    }
}
