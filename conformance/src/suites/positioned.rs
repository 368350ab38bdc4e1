//! `positioned`: random sequences of positioned operations on several handles of
//! one file, under short I/O and small random delays, against [`SparseFile`].
//!
//! Checked at every step: `read_at` returns at most what was asked, never 0 before
//! EOF, and the model's bytes; a single `write_at` moves 1..=len bytes and exactly
//! those land; `read_exact_at` / `write_all_at` complete under short transfers;
//! append appends (where the engine declares `append`: positioned I/O is judged
//! without it otherwise, and the verdict says append was not tested); `set_len`
//! truncates and zero-extends; batches behave as their parts; a cursor `read`
//! after positioned operations reads at the cursor (they never move it); offsets
//! past 2^32 work.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use slowfs_harness::{Capability, Engine, EngineFile, OpenOptions};

use super::{ensure, mount};
use crate::model::SparseFile;
use crate::proptest_run::check;
use crate::{Outcome, SuiteConfig};

/// Handles 0 and 1 are read-write; handle 2 is opened for append (read-write
/// like the others for an engine without append).
const APPEND: usize = 2;
const FAR: u64 = 1 << 32;

/// One step of a case.
#[derive(Clone)]
#[allow(missing_docs)]
pub enum Op {
    WriteAt {
        h: usize,
        offset: u64,
        len: usize,
        byte: u8,
    },
    WriteAll {
        h: usize,
        offset: u64,
        len: usize,
        byte: u8,
    },
    ReadAt {
        h: usize,
        offset: u64,
        len: usize,
    },
    ReadExact {
        h: usize,
        offset: u64,
        len: usize,
    },
    Append {
        len: usize,
        byte: u8,
    },
    SetLen {
        h: usize,
        len: u64,
    },
    ReadMany {
        h: usize,
        reads: Vec<(u64, usize)>,
    },
    WriteMany {
        h: usize,
        writes: Vec<(u64, usize, u8)>,
    },
    CursorRead {
        h: usize,
        len: usize,
    },
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::WriteAt {
                h,
                offset,
                len,
                byte,
            } => write!(f, "h{h}.write_at({offset}, {len} x {byte:#04x})"),
            Op::WriteAll {
                h,
                offset,
                len,
                byte,
            } => write!(f, "h{h}.write_all_at({offset}, {len} x {byte:#04x})"),
            Op::ReadAt { h, offset, len } => write!(f, "h{h}.read_at({offset}, {len})"),
            Op::ReadExact { h, offset, len } => write!(f, "h{h}.read_exact_at({offset}, {len})"),
            Op::Append { len, byte } => {
                write!(f, "h{APPEND}(append).write_all({len} x {byte:#04x})")
            }
            Op::SetLen { h, len } => write!(f, "h{h}.set_len({len})"),
            Op::ReadMany { h, reads } => write!(f, "h{h}.read_many({reads:?})"),
            Op::WriteMany { h, writes } => write!(f, "h{h}.write_many({writes:?})"),
            Op::CursorRead { h, len } => write!(f, "h{h}.read({len}) at the cursor"),
        }
    }
}

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..40_000, 1 => FAR - 4096..FAR + 8192]
}

/// A random step; `append` steps only for an engine that has append mode.
fn op(append: bool) -> impl Strategy<Value = Op> {
    let h = 0usize..2;
    let len = 0usize..6000;
    let append_weight = if append { 1 } else { 0 };
    prop_oneof![
        3 => (h.clone(), offset(), len.clone(), any::<u8>()).prop_map(|(h, offset, len, byte)| Op::WriteAt { h, offset, len, byte }),
        2 => (h.clone(), offset(), len.clone(), any::<u8>()).prop_map(|(h, offset, len, byte)| Op::WriteAll { h, offset, len, byte }),
        3 => (h.clone(), offset(), len.clone()).prop_map(|(h, offset, len)| Op::ReadAt { h, offset, len }),
        1 => (h.clone(), offset(), len.clone()).prop_map(|(h, offset, len)| Op::ReadExact { h, offset, len }),
        append_weight => (1usize..3000, any::<u8>()).prop_map(|(len, byte)| Op::Append { len, byte }),
        1 => (h.clone(), 0u64..50_000).prop_map(|(h, len)| Op::SetLen { h, len }),
        1 => (h.clone(), prop::collection::vec((0u64..9_000, 1usize..3000), 1..4))
            .prop_map(|(h, reads)| Op::ReadMany { h, reads: spread(reads) }),
        1 => (h.clone(), prop::collection::vec((0u64..9_000, 1usize..3000, any::<u8>()), 1..4))
            .prop_map(|(h, writes)| Op::WriteMany { h, writes: spread(writes) }),
        2 => (0usize..3, 1usize..4000).prop_map(|(h, len)| Op::CursorRead { h, len }),
    ]
}

/// Moves batch members 10 KB apart, so that writes in one batch never overlap
/// (their order inside a batch is unspecified).
fn spread<T: SpreadOffset>(items: Vec<T>) -> Vec<T> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| item.shifted(i as u64 * 10_000))
        .collect()
}

trait SpreadOffset {
    fn shifted(self, by: u64) -> Self;
}
impl SpreadOffset for (u64, usize) {
    fn shifted(self, by: u64) -> Self {
        (self.0 + by, self.1)
    }
}
impl SpreadOffset for (u64, usize, u8) {
    fn shifted(self, by: u64) -> Self {
        (self.0 + by, self.1, self.2)
    }
}

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mount = match mount(
        config,
        &[
            "read,write short=1..4096 p=0.5",
            "read,write delay=0ms..1ms",
        ],
    ) {
        Ok(m) => m,
        Err(verdict) => return crate::outcome(verdict, 0),
    };
    let rt = crate::runtime();
    let case = AtomicU64::new(0);
    let append = engine.supports(Capability::Append);
    let outcome = check(
        config.seed,
        config.cases,
        prop::collection::vec(op(append), 1..24),
        |ops| {
            ops.iter()
                .map(|op| format!("  {op:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        |ops| {
            let path = mount.path(&format!(
                "positioned-{}",
                case.fetch_add(1, Ordering::Relaxed)
            ));
            rt.block_on(execute(&*engine, &path, ops, append))
        },
    );
    if append {
        return outcome;
    }
    let why = engine
        .unsupported_reason(Capability::Append)
        .map_or_else(String::new, |why| format!(": {why}"));
    Outcome {
        work: Some(format!(
            "append mode not tested (the engine has no append{why})"
        )),
        ..outcome
    }
}

async fn execute<E: Engine>(
    engine: &E,
    path: &std::path::Path,
    ops: &[Op],
    append: bool,
) -> Result<(), String> {
    let err = |what: &str, e: io::Error| format!("{what}: {e}");
    let rw = OpenOptions::read_write_create();
    let append = OpenOptions {
        append,
        ..OpenOptions::read_write_create()
    };
    let handles = [
        engine.open(path, &rw).await.map_err(|e| err("open", e))?,
        engine.open(path, &rw).await.map_err(|e| err("open", e))?,
        engine
            .open(path, &append)
            .await
            .map_err(|e| err("open (append)", e))?,
    ];
    let mut model = SparseFile::default();
    let mut cursors = [0u64; 3];
    for (step, op) in ops.iter().enumerate() {
        run_step(step, op, &handles, &mut model, &mut cursors).await?;
    }
    let whole = model.len().min(1 << 20);
    check_read_at(&handles[0], &model, 0, whole as usize)
        .await
        .map_err(|e| format!("final read: {e}"))?;
    for handle in handles {
        handle.close().await.map_err(|e| err("close", e))?;
    }
    Ok(())
}

/// Step `step` of a case: `op` on one of the three handles, checked against
/// the model of the file (and of each handle's cursor).
async fn run_step<F: EngineFile>(
    step: usize,
    op: &Op,
    handles: &[F; 3],
    model: &mut SparseFile,
    cursors: &mut [u64; 3],
) -> Result<(), String> {
    let at = |msg: String| format!("step {step} {op:?}: {msg}");
    match op {
        Op::WriteAt {
            h,
            offset,
            len,
            byte,
        } => {
            let (result, _) = handles[*h].write_at(vec![*byte; *len], *offset).await;
            let n = result.map_err(|e| at(e.to_string()))?;
            ensure(n <= *len, || {
                at(format!("reported {n} bytes written of {len}"))
            })?;
            ensure(n > 0 || *len == 0, || {
                at("a non-empty write moved 0 bytes".into())
            })?;
            model.write(*offset, &vec![*byte; n]);
        }
        Op::WriteAll {
            h,
            offset,
            len,
            byte,
        } => {
            handles[*h]
                .write_all_at(vec![*byte; *len], *offset)
                .await
                .0
                .map_err(|e| at(e.to_string()))?;
            model.write(*offset, &vec![*byte; *len]);
        }
        Op::ReadAt { h, offset, len } => check_read_at(&handles[*h], model, *offset, *len)
            .await
            .map_err(at)?,
        Op::ReadExact { h, offset, len } => {
            let (result, buf) = handles[*h].read_exact_at(vec![0; *len], *offset).await;
            if *len == 0 || offset + *len as u64 <= model.len() {
                result.map_err(|e| at(e.to_string()))?;
                ensure(buf == model.read(*offset, *len), || {
                    at("bytes differ from the model".into())
                })?;
            } else {
                ensure(
                    result
                        .as_ref()
                        .is_err_and(|e| e.kind() == io::ErrorKind::UnexpectedEof),
                    || {
                        at(format!(
                            "reading past EOF gave {result:?}, expected UnexpectedEof"
                        ))
                    },
                )?;
            }
        }
        Op::Append { len, byte } => {
            handles[APPEND]
                .write_all_at(vec![*byte; *len], 0)
                .await
                .0
                .map_err(|e| at(e.to_string()))?;
            let end = model.len();
            model.write(end, &vec![*byte; *len]);
        }
        Op::SetLen { h, len } => {
            handles[*h]
                .set_len(*len)
                .await
                .map_err(|e| at(e.to_string()))?;
            model.set_len(*len);
        }
        Op::ReadMany { h, reads } => {
            let bufs = reads
                .iter()
                .map(|&(off, len)| (off, vec![0; len]))
                .collect();
            let results = handles[*h].read_many(bufs).await;
            ensure(results.len() == reads.len(), || {
                at("wrong number of results".into())
            })?;
            for (&(offset, len), (result, buf)) in reads.iter().zip(results) {
                let n = result.map_err(|e| at(e.to_string()))?;
                check_read_result(model, offset, len, n, &buf).map_err(at)?;
            }
        }
        Op::WriteMany { h, writes } => {
            let bufs = writes
                .iter()
                .map(|&(off, len, byte)| (off, vec![byte; len]))
                .collect();
            let results = handles[*h].write_many(bufs).await;
            ensure(results.len() == writes.len(), || {
                at("wrong number of results".into())
            })?;
            for (&(offset, len, byte), (result, _)) in writes.iter().zip(results) {
                let n = result.map_err(|e| at(e.to_string()))?;
                ensure(n <= len && (n > 0 || len == 0), || {
                    at(format!("wrote {n} of {len}"))
                })?;
                model.write(offset, &vec![byte; n]);
            }
        }
        Op::CursorRead { h, len } => {
            let cursor = cursors[*h];
            let (result, buf) = handles[*h].read(vec![0; *len]).await;
            let n = result.map_err(|e| at(e.to_string()))?;
            check_read_result(model, cursor, *len, n, &buf).map_err(|e| {
                at(format!(
                    "{e} (the cursor was at {cursor}: positioned ops must not move it)"
                ))
            })?;
            cursors[*h] += n as u64;
        }
    }
    Ok(())
}

async fn check_read_at<F: EngineFile>(
    file: &F,
    model: &SparseFile,
    offset: u64,
    len: usize,
) -> Result<(), String> {
    let (result, buf) = file.read_at(vec![0; len], offset).await;
    let n = result.map_err(|e| e.to_string())?;
    check_read_result(model, offset, len, n, &buf)
}

fn check_read_result(
    model: &SparseFile,
    offset: u64,
    len: usize,
    n: usize,
    buf: &[u8],
) -> Result<(), String> {
    ensure(n <= len, || {
        format!("read reported {n} bytes for a {len}-byte buffer")
    })?;
    let available = model.len().saturating_sub(offset) as usize;
    ensure(n <= available, || {
        format!("read {n} bytes at {offset} but the file has {available} there")
    })?;
    ensure(n > 0 || len == 0 || available == 0, || {
        format!("read 0 bytes at {offset}, {available} before EOF")
    })?;
    ensure(buf[..n] == model.read(offset, n)[..], || {
        format!("bytes at {offset}..+{n} differ from the model")
    })
}
