//! `println!` and `eprintln!` that never panic. The standard ones panic when
//! the write fails, and it fails when the reader went away: `slowfs run ...
//! 2>&1 | head -1` then ended in a panic (exit 101) at the summary instead of
//! with the command's status, and before unmounting. What cannot be printed is
//! dropped: there is nobody left to read it, nor anywhere to say so.

/// `println!` to stdout, ignoring a failed write.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!` to stderr, ignoring a failed write.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprint!` to stderr, ignoring a failed write.
macro_rules! note_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}
