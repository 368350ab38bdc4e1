//! Recording the mutating operations a mount serves, for the durability model.

use std::sync::Mutex;

use fault_inject::durability::LogOp;

/// The log of a recording mount, in the order requests completed.
#[derive(Debug, Default)]
pub struct Recorder {
    ops: Mutex<Vec<LogOp>>,
}

impl Recorder {
    /// Appends an operation.
    pub fn push(&self, op: LogOp) {
        self.ops.lock().unwrap().push(op);
    }

    /// Everything recorded so far.
    pub fn ops(&self) -> Vec<LogOp> {
        self.ops.lock().unwrap().clone()
    }
}
