//! A `slowfs mount` daemon process, for tests of the command line and of limits
//! that apply per process (open files). SIGTERM, then SIGKILL and a forced
//! unmount on drop, also on panic.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    pub mountpoint: PathBuf,
    pub backing: PathBuf,
    pub runtime_dir: PathBuf,
    _dirs: Vec<tempfile::TempDir>,
}

#[derive(Default)]
pub struct Options<'a> {
    /// `ulimit -n` for the daemon.
    pub nofile: Option<u64>,
    pub args: &'a [&'a str],
}

/// The sockets in `dir`.
fn sockets(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

pub fn slowfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_slowfs"))
}

impl Daemon {
    pub fn start(options: Options) -> Daemon {
        assert!(
            Path::new("/dev/fuse").exists(),
            "/dev/fuse is missing: this test needs FUSE"
        );
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (backing, mountpoint, runtime_dir) = (
            dirs[0].path().to_path_buf(),
            dirs[1].path().to_path_buf(),
            dirs[2].path().to_path_buf(),
        );
        let mut daemon = Daemon {
            child: Self::spawn(&backing, &mountpoint, &runtime_dir, &options),
            mountpoint,
            backing,
            runtime_dir,
            _dirs: dirs,
        };
        daemon.wait_mounted();
        daemon
    }

    /// Another daemon on the same directories (e.g. after the first was killed).
    pub fn restart(&mut self, options: Options) {
        self.child = Self::spawn(&self.backing, &self.mountpoint, &self.runtime_dir, &options);
        self.wait_mounted();
    }

    fn spawn(backing: &Path, mountpoint: &Path, runtime: &Path, options: &Options) -> Child {
        let mut cmd = slowfs();
        cmd.env("SLOWFS_RUNTIME_DIR", runtime)
            .args(["mount", "--backing"])
            .arg(backing)
            .args(options.args)
            .arg(mountpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(limit) = options.nofile {
            // SAFETY: setrlimit is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let rlim = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.spawn().unwrap()
    }

    fn wait_mounted(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        // Up once mounted and its control socket listens.
        let socket = || !sockets(&self.runtime_dir).is_empty();
        while !slowfs::mount::slowfs_mounts().contains(&self.mountpoint) || !socket() {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("slowfs mount exited ({status}): {err}");
            }
            assert!(Instant::now() < deadline, "slowfs mount did not come up");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The daemon's control socket (the socket in its runtime directory;
    /// while binding, the directory also holds the private directory the
    /// socket is made in).
    pub fn socket(&self) -> PathBuf {
        sockets(&self.runtime_dir)
            .into_iter()
            .next()
            .expect("the daemon's control socket")
    }

    /// `slowfs` with this daemon's runtime directory (where its socket is).
    pub fn cli(&self) -> Command {
        let mut cmd = slowfs();
        cmd.env("SLOWFS_RUNTIME_DIR", &self.runtime_dir);
        cmd
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    /// Waits (bounded) for the daemon to exit; its status.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn mounted(&self) -> bool {
        slowfs::mount::slowfs_mounts().contains(&self.mountpoint)
    }

    /// `slowfs umount MOUNTPOINT`, run to completion.
    pub fn umount(&self) -> std::process::Output {
        self.cli()
            .arg("umount")
            .arg(&self.mountpoint)
            .output()
            .unwrap()
    }

    /// The daemon's child processes (its unmount guard).
    pub fn children(&self) -> Vec<i32> {
        let tasks = format!("/proc/{}/task", self.pid());
        std::fs::read_dir(tasks)
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
                    .flat_map(|c| {
                        c.split_whitespace()
                            .filter_map(|p| p.parse().ok())
                            .collect::<Vec<i32>>()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// SIGKILLs the daemon and its unmount guard first: the mount stays, dead.
    pub fn kill_leaving_a_dead_mount(&mut self) {
        let guards = self.children();
        assert!(!guards.is_empty(), "the daemon has no unmount guard");
        for pid in guards {
            // SAFETY: signalling a child of our child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        if self.wait_exit(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        while slowfs::mount::slowfs_mounts().contains(&self.mountpoint) {
            if slowfs::mount::force_unmount(&self.mountpoint).is_err() {
                break;
            }
        }
    }
}
