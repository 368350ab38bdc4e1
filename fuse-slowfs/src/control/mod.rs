//! The control socket: `slowfs ctl MOUNTPOINT ...` talks to a running mount over a
//! Unix socket (mode 0600), one JSON request and one JSON acknowledgement per line.
//!
//! `protocol` is what goes over the socket, `sockets` where sockets live
//! and how one is made safely, `server` the daemon's side, `execute` what a
//! command does to the mount, `client` the `slowfs ctl` side.

mod client;
mod execute;
mod protocol;
mod server;
mod sockets;

pub use client::*;
pub use execute::execute;
pub use protocol::*;
pub use server::*;
pub use sockets::*;
