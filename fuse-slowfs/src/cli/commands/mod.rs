//! What each subcommand does, a module per group of subcommands.

mod control;
mod mounting;
mod run;
mod unmount;

pub use control::*;
pub use mounting::*;
pub use run::*;
pub use unmount::*;
