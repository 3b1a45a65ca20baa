//! `toolhost audit verify`: walks every segment and checkpoint and reports
//! the first thing that breaks the chain.

use std::fmt;
use std::fs;
use std::path::Path;

use ed25519_dalek::VerifyingKey;
use serde_json::Value;

use super::record::{self, GENESIS};
use super::trail::{self, CHECKPOINTS, segment_name};
use super::{AuditError, key};

/// A trail that verified.
#[derive(Debug)]
pub struct Verified {
    pub records: u64,
    pub segments: usize,
    pub checkpoints: usize,
    pub head: String,
    /// Seq of the newest checkpoint; records after it are chained but not
    /// yet signed.
    pub signed_through: u64,
    /// A half-written last line (a crash mid-write), which the next host
    /// start cuts and reports in the trail.
    pub torn_tail: Option<(String, u64)>,
    /// When the newest checkpoint was signed.
    pub last_signed_at: Option<String>,
}

/// The first break found.
#[derive(Debug)]
pub struct Broken {
    /// The file, and the 1-based line in it.
    pub file: String,
    pub line: usize,
    /// The seq the record at that place should have had.
    pub seq: u64,
    pub why: String,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} line {} (seq {}): {}",
            self.file, self.line, self.seq, self.why
        )
    }
}

/// A checkpoint, once its signature is good.
struct Checkpoint {
    /// Where it was read: the checkpoint file, or the database.
    origin: &'static str,
    line: usize,
    seq: u64,
    head: String,
    segment: String,
    time: String,
}

/// What `--against-db` reads as the origin of a checkpoint.
pub const DATABASE: &str = "the database's checkpoints";

/// Verifies the trail under `state_dir` against `key`. `elsewhere` are
/// checkpoints of this trail kept outside its folder (the database's copy,
/// as canonical lines): each must verify and must sign a record the trail
/// still holds, so a trail cut back together with its checkpoint file
/// shows.
pub fn verify(
    state_dir: &Path,
    key: &VerifyingKey,
    elsewhere: &[String],
) -> Result<Result<Verified, Broken>, AuditError> {
    let dir = state_dir.join(trail::AUDIT_DIR);
    let mut checkpoints = match read_checkpoints(&dir, key)? {
        Ok(checkpoints) => checkpoints,
        Err(broken) => return Ok(Err(broken)),
    };
    let local = checkpoints.len();
    for (i, line) in elsewhere.iter().enumerate() {
        match parse_checkpoint(line.as_bytes(), i + 1, DATABASE, key) {
            Ok(checkpoint) => checkpoints.push(checkpoint),
            Err(broken) => return Ok(Err(broken)),
        }
    }
    // Stable: a checkpoint in both places is checked once, from the file.
    checkpoints.sort_by_key(|c| c.seq);
    checkpoints.dedup_by(|later, earlier| later.seq == earlier.seq && later.head == earlier.head);
    let numbers = trail::segments(&dir)?;
    let mut next_checkpoint = checkpoints.iter().peekable();
    let mut seq = 0u64;
    let mut head = GENESIS.to_string();
    let mut torn_tail = None;
    for (index, &number) in numbers.iter().enumerate() {
        let name = segment_name(number);
        let expected_number = index as u32 + 1;
        if number != expected_number {
            return Ok(Err(Broken {
                file: name,
                line: 0,
                seq: seq + 1,
                why: format!("{} is missing", segment_name(expected_number)),
            }));
        }
        let path = dir.join(&name);
        let bytes = fs::read(&path).map_err(|source| AuditError::Io {
            path: path.clone(),
            source,
        })?;
        let last_segment = index + 1 == numbers.len();
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        // `split` yields an empty piece after a final newline.
        let unterminated = lines.pop().filter(|rest| !rest.is_empty());
        if let Some(rest) = unterminated {
            if last_segment {
                torn_tail = Some((name.clone(), rest.len() as u64));
            } else {
                return Ok(Err(Broken {
                    file: name,
                    line: lines.len() + 1,
                    seq: seq + 1,
                    why: "a record without its end of line in a closed segment".into(),
                }));
            }
        }
        for (i, line) in lines.iter().enumerate() {
            let expected = seq + 1;
            let broken = |why: String| Broken {
                file: name.clone(),
                line: i + 1,
                seq: expected,
                why,
            };
            let value: Value = match serde_json::from_slice(line) {
                Ok(value) => value,
                Err(e) => return Ok(Err(broken(format!("not a JSON record ({e})")))),
            };
            if record::canonical(&value).as_bytes() != *line {
                return Ok(Err(broken(
                    "not in canonical form: the record was edited".into(),
                )));
            }
            match value["seq"].as_u64() {
                Some(found) if found == expected => {}
                Some(found) => {
                    return Ok(Err(broken(format!(
                        "seq {found} where {expected} belongs: a record was deleted, inserted or moved"
                    ))));
                }
                None => return Ok(Err(broken("no seq".into()))),
            }
            if value["prev"].as_str() != Some(head.as_str()) {
                return Ok(Err(broken(
                    "prev does not match the hash of the record before it: that record or this one was changed, or records were removed, inserted or reordered"
                        .into(),
                )));
            }
            seq = expected;
            head = record::sha256_hex(line);
            while let Some(checkpoint) = next_checkpoint.next_if(|c| c.seq == seq) {
                if checkpoint.head != head {
                    return Ok(Err(Broken {
                        file: checkpoint.origin.into(),
                        line: checkpoint.line,
                        seq,
                        why: format!(
                            "the signed head of seq {seq} does not match the record in {name} line {}: the record was changed after it was signed",
                            i + 1
                        ),
                    }));
                }
            }
        }
        // A segment is closed only after a checkpoint of its last record
        // was signed, so a closed one without it lost records at its end.
        if !last_segment
            && !checkpoints
                .iter()
                .any(|c| c.seq == seq && c.segment == name)
        {
            return Ok(Err(Broken {
                file: name,
                line: lines.len(),
                seq,
                why: "a closed segment whose last record no checkpoint signs: records were cut from its end".into(),
            }));
        }
    }
    if let Some(checkpoint) = next_checkpoint.next() {
        return Ok(Err(Broken {
            file: checkpoint.origin.into(),
            line: checkpoint.line,
            seq: checkpoint.seq,
            why: format!(
                "signed through seq {} but the trail ends at seq {seq}: records were cut off the end",
                checkpoint.seq
            ),
        }));
    }
    Ok(Ok(Verified {
        records: seq,
        segments: numbers.len(),
        checkpoints: local,
        head,
        signed_through: checkpoints.last().map_or(0, |c| c.seq),
        last_signed_at: checkpoints.last().map(|c| c.time.clone()),
        torn_tail,
    }))
}

fn read_checkpoints(
    dir: &Path,
    key: &VerifyingKey,
) -> Result<Result<Vec<Checkpoint>, Broken>, AuditError> {
    let path = dir.join(CHECKPOINTS);
    let text = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ok(Vec::new())),
        Err(source) => return Err(AuditError::Io { path, source }),
    };
    let mut checkpoints: Vec<Checkpoint> = Vec::new();
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    // The piece after the last newline: empty, or a checkpoint a crash cut
    // short, which signs nothing (the next writer cuts it).
    lines.pop();
    for (i, line) in lines.into_iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        let checkpoint = match parse_checkpoint(line, i + 1, CHECKPOINTS, key) {
            Ok(checkpoint) => checkpoint,
            Err(broken) => return Ok(Err(broken)),
        };
        if checkpoints
            .last()
            .is_some_and(|last| last.seq > checkpoint.seq)
        {
            return Ok(Err(Broken {
                file: CHECKPOINTS.into(),
                line: i + 1,
                seq: checkpoint.seq,
                why: "checkpoints out of order".into(),
            }));
        }
        checkpoints.push(checkpoint);
    }
    Ok(Ok(checkpoints))
}

/// One checkpoint line, if its signature verifies with `key`.
fn parse_checkpoint(
    line: &[u8],
    number: usize,
    origin: &'static str,
    key: &VerifyingKey,
) -> Result<Checkpoint, Broken> {
    let broken = |seq: u64, why: String| Broken {
        file: origin.into(),
        line: number,
        seq,
        why,
    };
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| broken(0, format!("not a JSON checkpoint ({e})")))?;
    let (Some(seq), Some(head), Some(sig)) = (
        value["seq"].as_u64(),
        value["head"].as_str(),
        value["sig"].as_str(),
    ) else {
        return Err(broken(0, "a checkpoint needs seq, head and sig".into()));
    };
    let message = trail::checkpoint_message(&value);
    if !key::verify(key, message.as_bytes(), sig) {
        return Err(broken(
            seq,
            "the signature does not match this key: a forged or altered checkpoint".into(),
        ));
    }
    Ok(Checkpoint {
        origin,
        line: number,
        seq,
        head: head.to_string(),
        segment: value["segment"].as_str().unwrap_or_default().to_string(),
        time: value["time"].as_str().unwrap_or_default().to_string(),
    })
}
