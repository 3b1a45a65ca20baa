//! The trail on disk: append-only JSON Lines segments in `state_dir/audit/`,
//! chained by hash, and signed checkpoints beside them.
//!
//! Several processes append to one trail: every stdio client spawns its own
//! host, and the operator CLI records what it does. Each append holds an
//! exclusive lock on `audit/.lock`, first catches up with whatever another
//! process appended (or repairs what a crashed one half-wrote), then writes.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ed25519_dalek::SigningKey;
use serde_json::{Map, Value, json};

use super::files::{sync_dir, write_private};
use super::record::{self, GENESIS, MAX_RECORD_BYTES};
use super::{AuditError, key};

pub const AUDIT_DIR: &str = "audit";
pub const CHECKPOINTS: &str = "checkpoints.jsonl";
const LOCK: &str = ".lock";
/// Longest an append waits for another process to release the trail's
/// lock. An append holds it for a moment; a holder that keeps it this long
/// is stopped or hung (a client suspended with its stdio host mid-append),
/// and waiting on would stall this host's write calls, and its stop, for as
/// long as that lasts. Past it the append fails as a failed write does:
/// retried every second, write calls refused meanwhile.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Where a trail lives and how it rotates.
#[derive(Debug, Clone)]
pub struct TrailOptions {
    /// A segment is closed (with a checkpoint) once it reaches this size.
    pub segment_bytes: u64,
    /// The replica that writes the trail, named in every record it writes,
    /// so that merged trails of several replicas say who decided what.
    pub replica: Option<String>,
}

impl Default for TrailOptions {
    fn default() -> Self {
        TrailOptions {
            segment_bytes: 16 << 20,
            replica: None,
        }
    }
}

/// A checkpoint just signed and synced, as handed to a
/// [`Trail::on_checkpoint`] hook.
#[derive(Debug, Clone)]
pub struct SignedCheckpoint {
    pub seq: u64,
    pub head: String,
    /// The checkpoint as written to the file, in canonical form.
    pub line: String,
    /// `ed25519:<hex>` of the key that signed it.
    pub key_id: String,
}

/// Told of every checkpoint once it is on disk (a copy kept elsewhere).
pub type CheckpointHook = Box<dyn Fn(&SignedCheckpoint) + Send>;

pub fn segment_name(number: u32) -> String {
    format!("segment-{number:06}.jsonl")
}

/// The number of a segment file, from its name.
pub fn segment_number(name: &str) -> Option<u32> {
    name.strip_prefix("segment-")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

/// The segment numbers present in `dir`, in order.
pub fn segments(dir: &Path) -> Result<Vec<u32>, AuditError> {
    let io = |source| AuditError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut numbers = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(n) = entry.file_name().to_str().and_then(segment_number) {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// UTC, microseconds: the time written into records and checkpoints.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_micros(at).to_string()
}

/// What an append wrote.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub first_seq: u64,
    pub last_seq: u64,
}

/// An append that failed. `landed` records of the batch reached the file
/// before the failure (they are chained and will not be written again);
/// none of the batch is known to be synced.
#[derive(Debug)]
pub struct AppendError {
    pub error: AuditError,
    pub landed: usize,
}

impl AppendError {
    fn before_writing(error: AuditError) -> AppendError {
        AppendError { error, landed: 0 }
    }
}

/// A half-written line cut from a segment: its record, and the file its
/// bytes were saved to, which is renamed from `.pending` once the record is
/// on disk (a crash in between is recorded at the next open).
struct Repair {
    event: Map<String, Value>,
    pending: PathBuf,
}

/// A trail opened for appending by this process.
pub struct Trail {
    dir: PathBuf,
    lock: File,
    key: SigningKey,
    options: TrailOptions,
    segment: u32,
    file: File,
    /// Bytes of `file` this process knows of, and the inode, to notice
    /// another process's appends or a replaced file.
    len: u64,
    inode: u64,
    seq: u64,
    head: String,
    /// Set after a failed write: the in-memory head may not match the disk.
    stale: bool,
    checkpointed: u64,
    /// Repairs made whose record could not be written yet.
    unrecorded: Vec<Repair>,
    on_checkpoint: Option<CheckpointHook>,
}

impl Trail {
    /// The newest checkpoint in the trail's file, as a hook would have
    /// been given it; `None` before the first.
    pub fn newest_checkpoint(&self) -> Option<SignedCheckpoint> {
        // Only the file's end is read: it grows by a line a minute for as
        // long as the trail lives.
        let mut file = File::open(self.dir.join(CHECKPOINTS)).ok()?;
        let len = file.metadata().ok()?.len();
        let tail = read_tail(&mut file, len).ok()?;
        let text = String::from_utf8_lossy(&tail);
        // The last whole one: a crash may have cut the very last line, and
        // the window's first line may be a part.
        let (line, value) = text
            .lines()
            .rev()
            .find_map(|l| Some((l, serde_json::from_str::<Value>(l).ok()?)))?;
        Some(SignedCheckpoint {
            seq: value["seq"].as_u64()?,
            head: value["head"].as_str()?.to_string(),
            line: line.to_string(),
            key_id: key::public_text(&self.key.verifying_key()),
        })
    }

    /// Calls `hook` with every checkpoint this trail signs from now on.
    pub fn on_checkpoint(&mut self, hook: CheckpointHook) {
        self.on_checkpoint = Some(hook);
    }

    /// Opens (or starts) the trail under `state_dir`, repairing a
    /// half-written last line left by a crash.
    pub fn open(state_dir: &Path, options: TrailOptions) -> Result<Trail, AuditError> {
        let dir = state_dir.join(AUDIT_DIR);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| AuditError::Io {
                path: dir.clone(),
                source,
            })?;
        let lock_path = dir.join(LOCK);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|source| AuditError::Io {
                path: lock_path.clone(),
                source,
            })?;
        lock_within(&lock, &lock_path)?;
        let opened = Self::open_locked(state_dir, dir, lock, options);
        if let Ok(trail) = &opened {
            let _ = trail.lock.unlock();
        }
        opened
    }

    fn open_locked(
        state_dir: &Path,
        dir: PathBuf,
        lock: File,
        options: TrailOptions,
    ) -> Result<Trail, AuditError> {
        // A trail signed by a key that is gone cannot be continued under a
        // new one without every old checkpoint looking forged, so the key
        // is made only where no trail is.
        let key = key::load_or_create(state_dir, || {
            Ok(dir.join(CHECKPOINTS).exists() || !segments(&dir)?.is_empty())
        })?;
        let segment = segments(&dir)?.last().copied().unwrap_or(1);
        let (file, len, inode) = open_segment(&dir, segment)?;
        let mut trail = Trail {
            dir,
            lock,
            key,
            options,
            segment,
            file,
            len,
            inode,
            seq: 0,
            head: GENESIS.to_string(),
            stale: true,
            checkpointed: 0,
            unrecorded: Vec::new(),
            on_checkpoint: None,
        };
        // The tail first: a crash may have saved its bytes but not cut them,
        // and the repair then reuses that `.pending` file.
        let mut repairs: Vec<Repair> = trail.catch_up()?.into_iter().collect();
        for repair in trail.unrecorded_repairs()? {
            if !repairs.iter().any(|r| r.pending == repair.pending) {
                repairs.push(repair);
            }
        }
        trail.record_repairs(repairs)?;
        trail.checkpointed = trail.seq;
        Ok(trail)
    }

    /// Repairs whose record a crash may have kept off the trail.
    fn unrecorded_repairs(&self) -> Result<Vec<Repair>, AuditError> {
        let mut repairs = Vec::new();
        let entries = fs::read_dir(&self.dir).map_err(|source| AuditError::Io {
            path: self.dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let pending = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(saved_as) = name.strip_suffix(".pending") else {
                continue;
            };
            let bytes = fs::read(&pending).unwrap_or_default();
            let mut event = Map::new();
            event.insert("event".into(), "audit_repaired".into());
            event.insert("saved_as".into(), saved_as.into());
            event.insert("bytes".into(), bytes.len().into());
            event.insert("sha256".into(), record::sha256_hex(&bytes).into());
            event.insert("recorded_late".into(), true.into());
            repairs.push(Repair { event, pending });
        }
        Ok(repairs)
    }

    /// Writes the records of `repairs` (synced), then marks their saved
    /// bytes as recorded.
    /// Kept for the next append if the write fails.
    fn record_repairs(&mut self, repairs: Vec<Repair>) -> Result<(), AuditError> {
        let mut repairs = repairs;
        repairs.splice(0..0, std::mem::take(&mut self.unrecorded));
        if repairs.is_empty() {
            return Ok(());
        }
        let mut events: Vec<Map<String, Value>> = repairs.iter().map(|r| r.event.clone()).collect();
        if let Err(e) = self.write_batch(&mut events, true) {
            if e.landed < repairs.len() {
                self.unrecorded = repairs.split_off(e.landed);
            }
            return Err(e.error);
        }
        for repair in repairs {
            // `torn-….bin.pending` → `torn-….bin`
            let done = repair.pending.with_extension("");
            if let Err(e) = fs::rename(&repair.pending, &done) {
                tracing::error!(
                    "{} stays marked pending ({e}); its repair may be recorded again",
                    repair.pending.display()
                );
            }
        }
        sync_dir(&self.dir)
    }

    /// Appends `events` in order; with `durable`, they are on disk when this
    /// returns. Rotates the segment once it is full.
    pub fn append(
        &mut self,
        events: &mut [Map<String, Value>],
        durable: bool,
    ) -> Result<Appended, AppendError> {
        self.lock_exclusive().map_err(AppendError::before_writing)?;
        let result = self.append_locked(events, durable);
        let _ = self.lock.unlock();
        if result.is_err() {
            self.stale = true;
        }
        result
    }

    fn append_locked(
        &mut self,
        events: &mut [Map<String, Value>],
        durable: bool,
    ) -> Result<Appended, AppendError> {
        let repair = self.catch_up().map_err(AppendError::before_writing)?;
        self.record_repairs(repair.into_iter().collect())
            .map_err(AppendError::before_writing)?;
        let appended = self.write_batch(events, durable)?;
        if self.len >= self.options.segment_bytes
            && let Err(e) = self.rotate()
        {
            // The records are written; only the rotation waits.
            tracing::error!("audit segment not rotated (retried at the next append): {e}");
        }
        Ok(appended)
    }

    /// Signs a checkpoint of the current head, if anything was appended
    /// since the last one this process wrote.
    pub fn checkpoint(&mut self) -> Result<(), AuditError> {
        self.lock_exclusive()?;
        let result = self.catch_up().and_then(|repair| {
            self.record_repairs(repair.into_iter().collect())?;
            if self.seq == self.checkpointed {
                return Ok(());
            }
            self.sync_segment()?;
            self.write_checkpoint()
        });
        let _ = self.lock.unlock();
        result
    }

    /// Whether the trail takes writes again after a failure: appends and
    /// syncs a record saying so.
    pub fn resume(&mut self) -> Result<(), AuditError> {
        let mut event = Map::new();
        event.insert("event".into(), "audit_resumed".into());
        self.append(&mut [event], true)
            .map(|_| ())
            .map_err(|e| e.error)
    }

    fn lock_exclusive(&self) -> Result<(), AuditError> {
        lock_within(&self.lock, &self.dir.join(LOCK))
    }

    /// Brings `seq` and `head` up to what is on disk: another process may
    /// have appended or rotated, or a crash may have left half a line.
    /// Returns the record that reports a repair, to be written first.
    fn catch_up(&mut self) -> Result<Option<Repair>, AuditError> {
        let mut moved = false;
        while self.dir.join(segment_name(self.segment + 1)).exists() {
            self.segment += 1;
            moved = true;
        }
        let path = self.dir.join(segment_name(self.segment));
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound && !moved => {
                return Err(AuditError::Vanished { path });
            }
            Err(source) => return Err(AuditError::Io { path, source }),
        };
        if !moved && !self.stale && meta.len() == self.len && meta.ino() == self.inode {
            return Ok(None);
        }
        if moved || meta.ino() != self.inode {
            if !moved && self.seq > 0 {
                // This process wrote records into a file that is no longer
                // there: someone replaced the trail under it.
                return Err(AuditError::Vanished { path });
            }
            let (file, len, inode) = open_segment(&self.dir, self.segment)?;
            self.file = file;
            self.len = len;
            self.inode = inode;
        }
        let repair = self.repair_torn_tail()?;
        let (seq, head) = self.last_record()?;
        self.seq = seq;
        self.head = head;
        self.stale = false;
        Ok(repair)
    }

    /// A line without its newline can only be a crash mid-write (appends
    /// hold the lock): its bytes are saved beside the trail, cut from the
    /// segment, and reported in a record, never dropped silently.
    fn repair_torn_tail(&mut self) -> Result<Option<Repair>, AuditError> {
        let path = self.dir.join(segment_name(self.segment));
        let io = |source| AuditError::Io {
            path: path.clone(),
            source,
        };
        let len = self.file.metadata().map_err(io)?.len();
        self.len = len;
        if len == 0 {
            return Ok(None);
        }
        let tail = read_tail(&mut self.file, len).map_err(io)?;
        if tail.last() == Some(&b'\n') {
            return Ok(None);
        }
        let torn_at = after_last_newline(&tail, len);
        if len - torn_at > 2 * MAX_RECORD_BYTES as u64 {
            return Err(AuditError::Corrupt {
                path,
                reason: format!("its last {} bytes end in no newline", len - torn_at),
            });
        }
        let torn = tail[tail.len() - (len - torn_at) as usize..].to_vec();
        // A crash after saving these bytes but before cutting them left
        // their `.pending` file: reuse it rather than save them twice.
        let prefix = format!("torn-{:06}-{torn_at}-", self.segment);
        let earlier = fs::read_dir(&self.dir).ok().and_then(|entries| {
            entries.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .map(|n| n.to_string_lossy())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".bin.pending"))
            })
        });
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let pending =
            earlier.unwrap_or_else(|| self.dir.join(format!("{prefix}{stamp}.bin.pending")));
        let saved = pending.with_extension("");
        let save_io = |source| AuditError::Io {
            path: pending.clone(),
            source,
        };
        write_private(&pending, &torn).map_err(save_io)?;
        sync_dir(&self.dir)?;
        self.file.set_len(torn_at).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        self.len = torn_at;
        tracing::warn!(
            segment = %path.display(),
            offset = torn_at,
            bytes = torn.len(),
            saved = %saved.display(),
            "the audit trail ended in a half-written record (a crash mid-write); cut it and saved its bytes"
        );
        let mut event = Map::new();
        event.insert("event".into(), "audit_repaired".into());
        event.insert("segment".into(), segment_name(self.segment).into());
        event.insert("offset".into(), torn_at.into());
        event.insert("bytes".into(), torn.len().into());
        event.insert("sha256".into(), record::sha256_hex(&torn).into());
        event.insert(
            "saved_as".into(),
            saved
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .into(),
        );
        Ok(Some(Repair { event, pending }))
    }

    /// The seq and hash of the newest record, looking back into earlier
    /// segments when the current one is empty.
    fn last_record(&mut self) -> Result<(u64, String), AuditError> {
        let mut number = self.segment;
        loop {
            let path = self.dir.join(segment_name(number));
            let (seq_head, empty) = if number == self.segment {
                last_line(&mut self.file, self.len, &path)?
            } else {
                let mut file = File::open(&path).map_err(|source| AuditError::Io {
                    path: path.clone(),
                    source,
                })?;
                let len = file
                    .metadata()
                    .map_err(|source| AuditError::Io {
                        path: path.clone(),
                        source,
                    })?
                    .len();
                last_line(&mut file, len, &path)?
            };
            if !empty {
                return Ok(seq_head);
            }
            if number <= 1 {
                return Ok((0, GENESIS.to_string()));
            }
            number -= 1;
        }
    }

    fn write_batch(
        &mut self,
        events: &mut [Map<String, Value>],
        durable: bool,
    ) -> Result<Appended, AppendError> {
        let time = timestamp(SystemTime::now());
        let first_seq = self.seq + 1;
        let mut seq = self.seq;
        let mut head = self.head.clone();
        let mut buf = String::new();
        let mut line_ends = Vec::with_capacity(events.len());
        for event in events.iter_mut() {
            if let Some(replica) = &self.options.replica {
                event.insert("replica".into(), replica.as_str().into());
            }
            seq += 1;
            let line = record::line(seq, &time, &head, event);
            head = record::sha256_hex(line.as_bytes());
            buf.push_str(&line);
            buf.push('\n');
            line_ends.push(buf.len() as u64);
        }
        let path = self.dir.join(segment_name(self.segment));
        let io = |source| AuditError::Io {
            path: path.clone(),
            source,
        };
        if let Err(source) = self.file.write_all(buf.as_bytes()) {
            // Whole lines that made it stay (they are chained); a part line
            // is cut and recorded by the next catch-up.
            let now = self.file.metadata().map_or(self.len, |m| m.len());
            let written = now.saturating_sub(self.len);
            self.stale = true;
            return Err(AppendError {
                error: io(source),
                landed: line_ends.iter().filter(|&&end| end <= written).count(),
            });
        }
        self.len += buf.len() as u64;
        self.seq = seq;
        self.head = head;
        if durable && let Err(source) = self.file.sync_data() {
            return Err(AppendError {
                error: io(source),
                landed: events.len(),
            });
        }
        Ok(Appended {
            first_seq,
            last_seq: seq,
        })
    }

    /// Flushes what was written to disk.
    pub fn sync(&mut self) -> Result<(), AuditError> {
        self.sync_segment()
    }

    fn sync_segment(&self) -> Result<(), AuditError> {
        self.file.sync_data().map_err(|source| AuditError::Io {
            path: self.dir.join(segment_name(self.segment)),
            source,
        })
    }

    /// Closes the full segment with a checkpoint and starts the next.
    fn rotate(&mut self) -> Result<(), AuditError> {
        self.sync_segment()?;
        self.write_checkpoint()?;
        let next = self.segment + 1;
        let path = self.dir.join(segment_name(next));
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| AuditError::Io {
                path: path.clone(),
                source,
            })?;
        sync_dir(&self.dir)?;
        self.inode = file
            .metadata()
            .map_err(|source| AuditError::Io { path, source })?
            .ino();
        self.file = file;
        self.segment = next;
        self.len = 0;
        Ok(())
    }

    fn write_checkpoint(&mut self) -> Result<(), AuditError> {
        let time = timestamp(SystemTime::now());
        let body = json!({
            "seq": self.seq,
            "head": self.head,
            "time": time,
            "segment": segment_name(self.segment),
        });
        let signature = key::sign(&self.key, checkpoint_message(&body).as_bytes());
        let mut line = body;
        line["sig"] = signature.into();
        let path = self.dir.join(CHECKPOINTS);
        let io = |source| AuditError::Io {
            path: path.clone(),
            source,
        };
        let created = !path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        // A checkpoint half-written by a crash signs nothing: cut it so the
        // next one starts on a line of its own.
        let len = file.metadata().map_err(io)?.len();
        if len > 0 {
            let tail = read_tail(&mut file, len).map_err(io)?;
            if tail.last() != Some(&b'\n') {
                file.set_len(after_last_newline(&tail, len)).map_err(io)?;
            }
        }
        let text = record::canonical(&line);
        file.write_all(format!("{text}\n").as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)?;
        if created {
            sync_dir(&self.dir)?;
        }
        self.checkpointed = self.seq;
        if let Some(hook) = &self.on_checkpoint {
            hook(&SignedCheckpoint {
                seq: self.seq,
                head: self.head.clone(),
                line: text,
                key_id: key::public_text(&self.key.verifying_key()),
            });
        }
        Ok(())
    }
}

/// What a checkpoint's signature covers: its fields without `sig`, in
/// canonical form, under a label that keeps the signature from meaning
/// anything elsewhere.
pub fn checkpoint_message(checkpoint: &Value) -> String {
    let mut body = checkpoint.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("sig");
    }
    format!("toolhost audit checkpoint\n{}", record::canonical(&body))
}

fn open_segment(dir: &Path, number: u32) -> Result<(File, u64, u64), AuditError> {
    let path = dir.join(segment_name(number));
    let io = |source| AuditError::Io {
        path: path.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(io)?;
    // Also when another process created it: it may have died before making
    // the new name durable.
    sync_dir(dir)?;
    let meta = file.metadata().map_err(io)?;
    Ok((file, meta.len(), meta.ino()))
}

/// Up to two records' worth of bytes from the end of a file.
fn read_tail(file: &mut File, len: u64) -> std::io::Result<Vec<u8>> {
    let window = len.min(2 * MAX_RECORD_BYTES as u64 + 2);
    let mut handle = &*file;
    handle.seek(SeekFrom::Start(len - window))?;
    let mut buf = vec![0; window as usize];
    handle.read_exact(&mut buf)?;
    Ok(buf)
}

/// The file offset just past the last newline in `tail`, the last bytes of
/// a file of `len` bytes (the start of `tail` if it holds none).
fn after_last_newline(tail: &[u8], len: u64) -> u64 {
    let start = len - tail.len() as u64;
    tail.iter()
        .rposition(|&b| b == b'\n')
        .map_or(start, |i| start + i as u64 + 1)
}

/// `((seq, hash), empty)` of the last complete line of a segment.
fn last_line(file: &mut File, len: u64, path: &Path) -> Result<((u64, String), bool), AuditError> {
    if len == 0 {
        return Ok(((0, GENESIS.to_string()), true));
    }
    let tail = read_tail(file, len).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let body = tail.strip_suffix(b"\n").unwrap_or(&tail);
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = &body[start..];
    let corrupt = |reason: &str| AuditError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("its last record {reason}; run `toolhost audit verify`"),
    };
    let value: Value = serde_json::from_slice(line).map_err(|_| corrupt("is not JSON"))?;
    let seq = value["seq"].as_u64().ok_or_else(|| corrupt("has no seq"))?;
    Ok(((seq, record::sha256_hex(line)), false))
}

/// Takes the trail's exclusive lock, waiting at most [`LOCK_WAIT`]. The
/// lock is polled rather than waited for in the kernel, where no deadline
/// can be set; an uncontended lock is taken at the first try, and the pause
/// between tries stays short, as appends hold it only for a moment.
fn lock_within(lock: &File, path: &Path) -> Result<(), AuditError> {
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_micros(100);
    loop {
        let source = match lock.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
                continue;
            }
            Err(fs::TryLockError::WouldBlock) => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "another process has held the trail's lock for {} s",
                    LOCK_WAIT.as_secs()
                ),
            ),
            Err(fs::TryLockError::Error(e)) => e,
        };
        return Err(AuditError::Io {
            path: path.to_path_buf(),
            source,
        });
    }
}
