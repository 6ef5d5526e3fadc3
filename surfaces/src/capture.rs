//! Bounded capture of one output stream: the head and tail kept in memory, every byte hashed, and
//! everything spilled to an artifact file once the memory cap is passed, up to a spill limit.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

/// A file written for a call and referenced from its receipt by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// True when the file holds fewer bytes than the stream produced (the spill limit was hit).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A captured text output: what memory kept of it, and facts about all of it.
#[derive(Debug, Clone, Default)]
pub struct CapturedText {
    pub name: String,
    /// The first bytes, up to half the memory cap.
    pub head: Vec<u8>,
    /// The last bytes after `head`, up to half the memory cap; empty while everything fits.
    pub tail: Vec<u8>,
    /// Every byte the stream produced.
    pub total_bytes: u64,
    /// sha256 over every byte the stream produced, in hex.
    pub sha256: String,
    /// The full output on disk, when it outgrew memory.
    pub artifact: Option<Artifact>,
}

impl CapturedText {
    /// A capture of text already in memory (surfaces that produce small outputs).
    pub fn from_bytes(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        let sha256 = hex::encode(Sha256::digest(&bytes));
        CapturedText {
            name: name.into(),
            total_bytes: bytes.len() as u64,
            head: bytes,
            tail: Vec::new(),
            sha256,
            artifact: None,
        }
    }

    /// True when `head` and `tail` together hold every byte.
    pub fn is_complete(&self) -> bool {
        (self.head.len() + self.tail.len()) as u64 == self.total_bytes
    }
}

/// Limits of one stream capture.
#[derive(Debug, Clone, Copy)]
pub struct CaptureLimits {
    /// Bytes held in memory (head plus tail).
    pub memory_bytes: usize,
    /// Bytes written to the spill artifact at most.
    pub spill_bytes: u64,
}

impl Default for CaptureLimits {
    fn default() -> Self {
        CaptureLimits {
            memory_bytes: 1 << 20,
            spill_bytes: 64 << 20,
        }
    }
}

/// Accumulates one stream within [`CaptureLimits`].
pub struct StreamCapture {
    name: String,
    limits: CaptureLimits,
    spill_path: PathBuf,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    hasher: Sha256,
    spill: Option<Spill>,
}

struct Spill {
    file: tokio::fs::File,
    written: u64,
    hasher: Sha256,
}

impl StreamCapture {
    pub fn new(name: &str, limits: CaptureLimits, artifact_dir: &Path, call_id: &str) -> Self {
        StreamCapture {
            name: name.to_string(),
            limits,
            spill_path: artifact_dir.join(format!("{call_id}.{name}")),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            hasher: Sha256::new(),
            spill: None,
        }
    }

    fn head_cap(&self) -> usize {
        self.limits.memory_bytes / 2
    }

    fn tail_cap(&self) -> usize {
        self.limits.memory_bytes - self.head_cap()
    }

    /// Takes the next chunk of the stream.
    pub async fn push(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.total += chunk.len() as u64;
        self.hasher.update(chunk);

        let held = self.head.len() + self.tail.len();
        if self.spill.is_none() && held + chunk.len() > self.limits.memory_bytes {
            // From here on memory keeps only the head and a tail window, so the whole stream so
            // far (all of it still in memory) goes to disk first.
            let mut spill = Spill {
                file: tokio::fs::File::create(&self.spill_path).await?,
                written: 0,
                hasher: Sha256::new(),
            };
            let (front, back) = self.tail.as_slices();
            let held_now = [self.head.as_slice(), front, back];
            for part in held_now {
                spill.write(part, self.limits.spill_bytes).await?;
            }
            self.spill = Some(spill);
        }
        if let Some(spill) = &mut self.spill {
            spill.write(chunk, self.limits.spill_bytes).await?;
        }

        let to_head = chunk
            .len()
            .min(self.head_cap().saturating_sub(self.head.len()));
        self.head.extend_from_slice(&chunk[..to_head]);
        let rest = &chunk[to_head..];
        let tail_cap = self.tail_cap();
        if rest.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - tail_cap..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
        Ok(())
    }

    /// Ends the capture.
    pub async fn finish(self) -> std::io::Result<CapturedText> {
        let artifact = match self.spill {
            Some(mut spill) => {
                spill.file.flush().await?;
                spill.file.sync_data().await?;
                Some(Artifact {
                    name: self.name.clone(),
                    path: self.spill_path,
                    sha256: hex::encode(spill.hasher.finalize()),
                    bytes: spill.written,
                    truncated: spill.written < self.total,
                })
            }
            None => None,
        };
        Ok(CapturedText {
            name: self.name,
            head: self.head,
            tail: self.tail.into_iter().collect(),
            total_bytes: self.total,
            sha256: hex::encode(self.hasher.finalize()),
            artifact,
        })
    }
}

impl Spill {
    async fn write(&mut self, bytes: &[u8], limit: u64) -> std::io::Result<()> {
        let room = limit.saturating_sub(self.written) as usize;
        let take = &bytes[..bytes.len().min(room)];
        if !take.is_empty() {
            self.file.write_all(take).await?;
            self.hasher.update(take);
            self.written += take.len() as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn capture(chunks: &[&[u8]], limits: CaptureLimits, dir: &Path) -> CapturedText {
        let mut capture = StreamCapture::new("stdout", limits, dir, "c1");
        for chunk in chunks {
            capture.push(chunk).await.unwrap();
        }
        capture.finish().await.unwrap()
    }

    #[tokio::test]
    async fn small_output_stays_in_memory_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text = capture(&[b"hello ", b"world"], CaptureLimits::default(), dir.path()).await;
        assert_eq!(text.head, b"hello world");
        assert!(text.tail.is_empty() && text.is_complete() && text.artifact.is_none());
        assert_eq!(text.sha256, hex::encode(Sha256::digest(b"hello world")));
    }

    #[tokio::test]
    async fn large_output_keeps_head_and_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let limits = CaptureLimits {
            memory_bytes: 8,
            spill_bytes: 1000,
        };
        let data: Vec<u8> = (0..50u8).collect();
        let chunks: Vec<&[u8]> = data.chunks(7).collect();
        let text = capture(&chunks, limits, dir.path()).await;
        assert_eq!(text.head, &data[..4]);
        assert_eq!(text.tail, &data[46..]);
        assert_eq!(text.total_bytes, 50);
        assert!(!text.is_complete());
        let artifact = text.artifact.unwrap();
        assert_eq!(std::fs::read(&artifact.path).unwrap(), data);
        assert_eq!(artifact.sha256, text.sha256);
        assert!(!artifact.truncated);
    }

    #[tokio::test]
    async fn spill_stops_at_its_limit_but_hash_covers_all() {
        let dir = tempfile::tempdir().unwrap();
        let limits = CaptureLimits {
            memory_bytes: 4,
            spill_bytes: 10,
        };
        let data = vec![b'x'; 100];
        let text = capture(&[&data], limits, dir.path()).await;
        let artifact = text.artifact.unwrap();
        assert_eq!(artifact.bytes, 10);
        assert!(artifact.truncated);
        assert_eq!(std::fs::metadata(&artifact.path).unwrap().len(), 10);
        assert_eq!(text.sha256, hex::encode(Sha256::digest(&data)));
    }
}
