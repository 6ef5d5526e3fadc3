//! Bounded capture of one output stream: the head and tail kept in memory, every byte hashed, and
//! everything spilled to an artifact file once the memory cap is passed, up to a spill limit and
//! within the [`ArtifactQuota`] that every writer of artifacts shares. When the call resolved
//! secrets, the stream is masked as it arrives (across chunk boundaries), before anything of it is
//! kept, hashed or spilled: no copy of an unmasked byte outlives its chunk.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::CallContext;
use crate::kit::mask::Masker;

/// How long a full quota trusts its count before it looks at the directory again (someone may
/// have removed old artifacts).
const RECOUNT_AFTER: Duration = Duration::from_secs(2);

/// The room that every writer of artifacts (spilled outputs, screenshots, evidence) shares in the
/// artifacts directory, so that no run's output can fill the disk under the receipts. The files
/// already there are counted at start; each writer reserves bytes before it writes them.
#[derive(Debug)]
pub struct ArtifactQuota {
    /// The directory counted, when there is one (a full quota recounts it now and then).
    dir: Option<PathBuf>,
    limit: u64,
    used: AtomicU64,
    recounted: Mutex<Instant>,
}

/// A reservation the quota could not grant.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the artifacts quota is full: {wanted} more bytes do not fit in {limit} ({used} in use); \
     remove old files from the artifacts directory or raise `[artifacts] quota_bytes`"
)]
pub struct QuotaFull {
    pub wanted: u64,
    pub limit: u64,
    pub used: u64,
}

impl ArtifactQuota {
    /// No limit (tests, benchmarks).
    pub fn unlimited() -> ArtifactQuota {
        ArtifactQuota {
            dir: None,
            limit: u64::MAX,
            used: AtomicU64::new(0),
            recounted: Mutex::new(Instant::now()),
        }
    }

    /// At most `limit` bytes in `dir`, counting what is there now.
    pub fn counting(dir: &Path, limit: u64) -> std::io::Result<ArtifactQuota> {
        Ok(ArtifactQuota {
            dir: Some(dir.to_path_buf()),
            limit,
            used: AtomicU64::new(dir_bytes(dir)?),
            recounted: Mutex::new(Instant::now()),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Reserves as much of `wanted` as fits; returns the bytes granted.
    pub fn reserve_up_to(&self, wanted: u64) -> u64 {
        let granted = self.try_reserve(wanted, false);
        if granted < wanted && self.recount() {
            return granted + self.try_reserve(wanted - granted, false);
        }
        granted
    }

    /// Reserves all of `wanted` or nothing.
    pub fn reserve(&self, wanted: u64) -> Result<(), QuotaFull> {
        if self.try_reserve(wanted, true) == wanted
            || (self.recount() && self.try_reserve(wanted, true) == wanted)
        {
            return Ok(());
        }
        Err(QuotaFull {
            wanted,
            limit: self.limit,
            used: self.used(),
        })
    }

    /// Gives back bytes reserved and not written.
    pub fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    fn try_reserve(&self, wanted: u64, whole: bool) -> u64 {
        let mut granted = 0;
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let room = self.limit.saturating_sub(used);
                granted = if whole && room < wanted {
                    0
                } else {
                    wanted.min(room)
                };
                Some(used + granted)
            });
        granted
    }

    /// Counts the directory again when the last count is old enough; true when it did. Writes
    /// in flight may be off by what they reserved and have not written yet (a chunk each).
    fn recount(&self) -> bool {
        let Some(dir) = &self.dir else { return false };
        let mut recounted = self
            .recounted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if recounted.elapsed() < RECOUNT_AFTER {
            return false;
        }
        *recounted = Instant::now();
        match dir_bytes(dir) {
            Ok(bytes) => {
                self.used.store(bytes, Ordering::Release);
                true
            }
            Err(_) => false,
        }
    }
}

/// The bytes of the files directly in `dir` (artifacts are not nested).
fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let metadata = entry?.metadata()?;
        if metadata.is_file() {
            total += metadata.len();
        }
    }
    Ok(total)
}

/// Why an artifact holds less than its source produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactCut {
    /// `spill_limit` (the per-stream limit) or `quota` (the artifacts quota shared by all calls).
    pub reason: &'static str,
    /// The same in words, with the figures.
    pub message: String,
}

/// A file written for a call and referenced from its receipt by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// True when the file holds fewer bytes than the stream produced.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Why it was cut, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<ArtifactCut>,
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
    quota: Arc<ArtifactQuota>,
    /// The call's running count of output bytes, shared by all its streams.
    output_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The call's secrets, and what of the stream is held back because it could still be the
    /// start of one.
    mask: Option<(Arc<Masker>, Vec<u8>)>,
}

struct Spill {
    file: tokio::fs::File,
    written: u64,
    hasher: Sha256,
    /// Set once the quota refused bytes: nothing more is written, so the file stays a prefix.
    quota_hit: bool,
}

impl StreamCapture {
    /// A capture that spills to `<call_id>.<name>` in the call's artifact directory, within its
    /// artifacts quota.
    pub fn new(name: &str, limits: CaptureLimits, ctx: &CallContext) -> Self {
        StreamCapture {
            name: name.to_string(),
            limits,
            spill_path: ctx.artifact_dir.join(format!("{}.{name}", ctx.call_id)),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            hasher: Sha256::new(),
            spill: None,
            quota: ctx.artifact_quota.clone(),
            output_bytes: ctx.output_bytes.clone(),
            mask: ctx.secrets.masker().map(|masker| (masker, Vec::new())),
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
        let Some((masker, held)) = &mut self.mask else {
            return self.keep(chunk).await;
        };
        let mut stream = masker.resume(std::mem::take(held));
        let mut masked = Vec::with_capacity(chunk.len());
        stream.push_with(chunk, |part| masked.extend_from_slice(part));
        *held = stream.into_held();
        self.keep(&masked).await
    }

    /// Keeps bytes that are safe to keep (masked already, or with no secret to mask).
    async fn keep(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.total += chunk.len() as u64;
        self.output_bytes
            .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.hasher.update(chunk);

        let held = self.head.len() + self.tail.len();
        if self.spill.is_none() && held + chunk.len() > self.limits.memory_bytes {
            // From here on memory keeps only the head and a tail window, so the whole stream so
            // far (all of it still in memory) goes to disk first.
            let mut spill = Spill {
                file: tokio::fs::File::create(&self.spill_path).await?,
                written: 0,
                hasher: Sha256::new(),
                quota_hit: false,
            };
            let (front, back) = self.tail.as_slices();
            let held_now = [self.head.as_slice(), front, back];
            for part in held_now {
                spill
                    .write(part, self.limits.spill_bytes, &self.quota)
                    .await?;
            }
            self.spill = Some(spill);
        }
        if let Some(spill) = &mut self.spill {
            spill
                .write(chunk, self.limits.spill_bytes, &self.quota)
                .await?;
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
    pub async fn finish(mut self) -> std::io::Result<CapturedText> {
        if let Some((masker, held)) = self.mask.take() {
            let rest = masker.resume(held).finish();
            self.keep(&rest).await?;
        }
        let artifact = match self.spill {
            Some(mut spill) => {
                spill.file.flush().await?;
                spill.file.sync_data().await?;
                let truncated = spill.written < self.total;
                let cut = match (truncated, spill.quota_hit) {
                    (false, _) => None,
                    (true, true) => Some(ArtifactCut {
                        reason: "quota",
                        message: format!(
                            "cut at the artifacts quota: {} of {} bytes written, the {}-byte \
                             quota shared by all artifacts being full; remove old artifacts or \
                             raise `[artifacts] quota_bytes`",
                            spill.written,
                            self.total,
                            self.quota.limit()
                        ),
                    }),
                    (true, false) => Some(ArtifactCut {
                        reason: "spill_limit",
                        message: format!(
                            "cut at the spill limit: {} of {} bytes written \
                             (`shell.spill_limit_bytes`)",
                            spill.written, self.total
                        ),
                    }),
                };
                Some(Artifact {
                    name: self.name.clone(),
                    path: self.spill_path,
                    sha256: hex::encode(spill.hasher.finalize()),
                    bytes: spill.written,
                    truncated,
                    cut,
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
    async fn write(
        &mut self,
        bytes: &[u8],
        limit: u64,
        quota: &ArtifactQuota,
    ) -> std::io::Result<()> {
        if self.quota_hit {
            return Ok(());
        }
        let room = limit.saturating_sub(self.written).min(bytes.len() as u64);
        let granted = quota.reserve_up_to(room);
        self.quota_hit = granted < room;
        let take = &bytes[..granted as usize];
        if !take.is_empty() {
            if let Err(err) = self.file.write_all(take).await {
                quota.release(granted);
                return Err(err);
            }
            self.hasher.update(take);
            self.written += take.len() as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(dir: &Path, quota: Arc<ArtifactQuota>) -> CallContext {
        CallContext {
            call_id: "c1".into(),
            artifact_dir: dir.to_path_buf(),
            protected: Arc::default(),
            cancel: Default::default(),
            artifact_quota: quota,
            output_bytes: Arc::default(),
            secrets: Default::default(),
            agent: "default".into(),
            tools: None,
            run_ended: None,
            login_files_writable: Vec::new(),
        }
    }

    async fn capture(chunks: &[&[u8]], limits: CaptureLimits, dir: &Path) -> CapturedText {
        let ctx = context(dir, Arc::new(ArtifactQuota::unlimited()));
        let mut capture = StreamCapture::new("stdout", limits, &ctx);
        for chunk in chunks {
            capture.push(chunk).await.unwrap();
        }
        capture.finish().await.unwrap()
    }

    #[tokio::test]
    async fn secrets_are_masked_before_anything_is_kept_hashed_or_spilled() {
        struct Fixed;
        impl crate::kit::secrets::Resolve for Fixed {
            fn resolve(
                &self,
                _: &crate::kit::secret_store::SecretRef,
            ) -> Result<secrecy::SecretString, String> {
                Ok("tok-0123456789".into())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path(), Arc::new(ArtifactQuota::unlimited()));
        ctx.secrets = Arc::new(crate::kit::secrets::CallSecrets::with_resolver(Arc::new(
            Fixed,
        )));
        let reference = crate::kit::secret_store::SecretRef::parse("keychain://s/a").unwrap();
        ctx.secrets.resolve("TOKEN", &reference).unwrap();
        let limits = CaptureLimits {
            memory_bytes: 16,
            spill_bytes: 1000,
        };
        let mut capture = StreamCapture::new("stdout", limits, &ctx);
        // The value split across three chunks, then whole at the very end.
        for chunk in [&b"a tok-01"[..], b"2345", b"6789 b\n", b"tok-0123456789"] {
            capture.push(chunk).await.unwrap();
        }
        let text = capture.finish().await.unwrap();
        let spilled = std::fs::read(&text.artifact.as_ref().unwrap().path).unwrap();
        assert_eq!(
            String::from_utf8(spilled.clone()).unwrap(),
            "a [masked TOKEN] b\n[masked TOKEN]"
        );
        assert_eq!(text.sha256, hex::encode(Sha256::digest(&spilled)));
        assert_eq!(text.total_bytes, spilled.len() as u64);
        let kept = [text.head, text.tail].concat();
        assert!(!kept.windows(4).any(|w| w == b"tok-"), "{kept:?}");
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

    #[tokio::test]
    async fn spills_share_the_quota_and_say_where_they_were_cut() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old"), [0u8; 10]).unwrap();
        let quota = Arc::new(ArtifactQuota::counting(dir.path(), 100).unwrap());
        assert_eq!(quota.used(), 10);
        let limits = CaptureLimits {
            memory_bytes: 4,
            spill_bytes: 1000,
        };
        let ctx = context(dir.path(), quota.clone());
        let mut first = StreamCapture::new("stdout", limits, &ctx);
        let mut second = StreamCapture::new("stderr", limits, &ctx);
        first.push(&[b'a'; 60]).await.unwrap();
        second.push(&[b'b'; 60]).await.unwrap();
        first.push(&[b'a'; 60]).await.unwrap();
        let (first, second) = (
            first.finish().await.unwrap(),
            second.finish().await.unwrap(),
        );
        let (first, second) = (first.artifact.unwrap(), second.artifact.unwrap());
        assert_eq!((first.bytes, second.bytes), (60, 30));
        assert_eq!(quota.used(), 100);
        assert!(first.truncated && second.truncated);
        let cut = first.cut.unwrap();
        assert_eq!(cut.reason, "quota");
        assert!(cut.message.contains("60 of 120 bytes written"), "{cut:?}");
        assert_eq!(std::fs::read(&second.path).unwrap(), [b'b'; 30]);
        assert!(quota.reserve(1).is_err());
        let full = quota.reserve(5).unwrap_err().to_string();
        assert!(full.contains("quota_bytes"), "{full}");
    }
}
