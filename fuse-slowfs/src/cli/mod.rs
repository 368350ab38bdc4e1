//! Command-line interface.

#[macro_use]
mod print;
mod commands;
mod explore;

mod top;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

const RULE_HELP: &str = "\
RULES
  A rule is OPS [path=GLOB] ACTION [CONDITIONS], e.g.
    \"fsync delay=250ms\"                      every fsync takes 250 ms
    \"read,write delay=5ms..20ms\"             uniform delay
    \"read delay=lognormal(2ms,0.5) spike=0.001:200ms\"
    \"write short=1..512\"                     writes move 1..512 bytes
    \"write path=**/*.tmp error=ENOSPC p=0.1\" 10% of writes to *.tmp fail
    \"* throttle=4MiB/s\"                      shared bandwidth cap (burst= sets the bucket)
    \"read,write iops=100\"                    request-rate cap
    \"read hang\"                              hold reads until `slowfs ctl MNT release`
    \"read hang=5s\"                           ... or at most 5 s
    \"rename crash after=2\"                   power loss at the 3rd rename (--crash-model strict)
  Storage that lies:
    \"fsync error=EIO drop\"                   write-back failure as on Linux: EIO once per open
                                             file, unsynced data dropped, the retry succeeds
                                             (drop=evict: reads show the durable data too;
                                             --crash-model strict)
    \"read corrupt=bitflip:3\"                 damage one 512-byte sector of read data
                                             (or corrupt=zero, corrupt=random); seeded
    \"read stale\"                             reads return the durable content (--crash-model strict)
    \"write lose after=10\"                    writes after the 10th are acknowledged, never applied
  OPS: * or a comma list of lookup getattr setattr open create read write flush fsync
       fdatasync fsyncdir release mkdir mknod rmdir unlink rename link symlink readlink
       opendir readdir releasedir statfs access fallocate lseek copy_file_range xattr
       lock (fcntl and flock(2) locks, under --cache nfs:lock)
  CONDITIONS: p=P (probability), after=N (skip the first N), every=N,
              after_bytes=SIZE (a quota on bytes moved by matching requests)
  Globs match the path relative to the mount root; * stays in one directory, ** crosses.";

const EXPLORE_EXITS: &str = "\
EXIT STATUS
  0    clean: every crash point got its high-yield states, none violated
  1    a state violated (the report groups them by cause, with replay commands)
  2    bad usage, or the workload itself failed (nothing was checked)
  3    clean so far, but not every crash point got its high-yield states (the
       budget ran out): the summary says which and the command that finishes
       the job; --partial-ok makes this 0
  4    explore's own temporary space failed (the summary so far is printed)
  130  interrupted (Ctrl-C): the summary of what was checked is printed";

/// slowfs: a FUSE filesystem that makes storage slow, flaky and crash-prone on demand.
#[derive(Debug, Parser)]
// Named and described here, not from the package: the wheel (packaging/wheel)
// builds this command as a package of its own.
#[command(
    name = "slowfs",
    version,
    about = "A FUSE filesystem that makes storage slow, flaky, lying and crash-prone on demand, \
             deterministically, and explores the crash states of any program",
    after_help = RULE_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// Parses the command line; run as `mount.fuse.slowfs` (a symlink, for
    /// mount(8)), the arguments are those of `slowfs mount-helper`.
    pub fn from_args() -> Cli {
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let invoked = args
            .first()
            .and_then(|a| std::path::Path::new(a).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if invoked == "mount.fuse.slowfs" || invoked == "mount.slowfs" {
            args.insert(1, "mount-helper".into());
        }
        Cli::parse_from(args)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mount slowfs in the foreground until SIGINT/SIGTERM or an unmount
    /// (`slowfs umount`, `umount`), then unmount cleanly. With --background,
    /// return once mounted and serve in the background (as mount(8) expects;
    /// `mount -t fuse.slowfs` and fstab work through the mount.fuse.slowfs helper,
    /// see `slowfs mount-helper --help`).
    #[command(after_help = RULE_HELP)]
    Mount {
        #[command(flatten)]
        faults: FaultArgs,
        /// Return once mounted; the daemon serves in the background until unmounted.
        #[arg(long)]
        background: bool,
        /// With --background: say nothing on success (errors are still printed),
        /// as a mount helper must (mount(8) passes on what it prints).
        #[arg(long, short = 'q', requires = "background")]
        quiet: bool,
        /// Where to mount (an existing, empty directory).
        mountpoint: PathBuf,
    },
    /// What `mount -t fuse.slowfs SOURCE DIR -o OPTIONS` and fstab run, through a
    /// symlink: `ln -s "$(command -v slowfs)" /sbin/mount.fuse.slowfs`. SOURCE is
    /// the backing directory; OPTIONS are mount options (ro, noatime, ...) plus
    /// slowfs's own: profile=NAME, config=FILE (rules), seed=N, ctl_socket=PATH,
    /// passthrough=auto|never, crash_model=none|strict. Returns once mounted.
    /// Run by root, the mount is `suid,dev` unless told nosuid/nodev (mount(8)
    /// semantics; fstab `user` mounts get nosuid,nodev from mount(8) itself).
    /// `-o remount,ro|rw|noatime|...` changes the mount's flags in place.
    /// fstab: `/srv/data  /mnt/slow  fuse.slowfs  profile=nfs,noatime  0 0`.
    #[command(name = "mount-helper")]
    MountHelper {
        /// The backing directory.
        source: PathBuf,
        /// Where to mount.
        mountpoint: PathBuf,
        /// Options, comma-separated (repeatable).
        #[arg(short = 'o', value_name = "OPTIONS")]
        options: Vec<String>,
        /// Fake: check the options, mount nothing (mount -f).
        #[arg(short = 'f')]
        fake: bool,
        /// Accepted for mount(8): do not write /etc/mtab (there is none to write).
        #[arg(short = 'n')]
        no_mtab: bool,
        /// Accepted for mount(8): sloppy (unknown options are still errors).
        #[arg(short = 's')]
        sloppy: bool,
        /// Verbose (mount -v): say what was mounted (silent otherwise, as mount
        /// helpers are); on a remount, name slowfs's own options left as mounted.
        #[arg(short = 'v')]
        verbose: bool,
    },
    /// Mount on a fresh temporary mountpoint, run CMD with SLOWFS_MOUNT set to it,
    /// unmount, print stats to stderr and exit with CMD's status.
    #[command(after_help = RULE_HELP)]
    Run {
        #[command(flatten)]
        faults: FaultArgs,
        /// Print no stats summary at the end.
        #[arg(long)]
        quiet: bool,
        /// The command and its arguments.
        #[arg(required = true, last = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Talk to a running mount: stats, set/clear/list rules, release hangs.
    Ctl {
        /// The mountpoint of a running slowfs.
        mountpoint: PathBuf,
        /// Control socket, if the mount was started with --ctl-socket.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Print the answer's data as JSON (stats, rules, durable, info).
        #[arg(long, global = true)]
        json: bool,
        /// With `stats`: print them every INTERVAL (e.g. 1s) until the mount
        /// goes away; with --json, one object per line.
        #[arg(long, global = true, value_name = "INTERVAL", value_parser = interval)]
        watch: Option<std::time::Duration>,
        #[command(subcommand)]
        action: slowfs::control::Command,
    },
    /// A live view of a mount: per-operation rates, bytes/s, errors and faults
    /// per second, p50/p99/max latency, each rule's firings, requests parked
    /// now; redrawn in place every INTERVAL until the mount goes away (Ctrl-C
    /// quits). Into a pipe or a file, plain frames one after another (no
    /// escape codes).
    Top {
        /// The mountpoint of a running slowfs.
        mountpoint: PathBuf,
        /// Control socket, if the mount was started with --ctl-socket.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// How often to redraw.
        #[arg(long, default_value = "1s", value_parser = interval)]
        interval: std::time::Duration,
    },
    /// List the built-in profiles (or show one) with where their numbers come from.
    Profiles {
        /// A profile to show in full.
        name: Option<String>,
    },
    /// Validate a TOML config and print the rules it gives.
    Check {
        /// The config file.
        file: PathBuf,
    },
    /// Run WORKLOAD once on a recording mount, then check every crash state it
    /// could leave behind with CHECK (run by `sh -c` with SLOWFS_STATE set to a
    /// directory holding the state, SLOWFS_CRASH_POINT to the number of operations
    /// before the crash and SLOWFS_OPS to the total; exit 0 = acceptable).
    ///
    /// Every crash point first gets its high-yield states (the durable one, the
    /// no-crash one, each pending operation kept or dropped alone, the last write
    /// torn); what is left of --max-states/--time-budget samples more.
    #[command(after_help = EXPLORE_EXITS)]
    Explore(ExploreArgs),
    /// Unmount a slowfs, also a dead one whose daemon was killed.
    ///
    /// A live mount is asked to end through its control socket: it releases every
    /// parked (delayed or hung) request, unmounts, and its daemon exits; `umount`
    /// waits for that (at most --timeout). A mount whose daemon is gone, or that does
    /// not answer, is detached and its FUSE connection aborted, so no caller stays
    /// blocked.
    Umount {
        /// The mountpoint.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        mountpoint: Option<PathBuf>,
        /// Clean up every slowfs mount whose daemon is gone (killed, crashed).
        #[arg(long)]
        all: bool,
        /// With --all: also end live mounts — your own; as root, everyone's.
        /// With a mountpoint: detach it even when its daemon is alive but does
        /// not answer (stopped, overloaded); its pending requests fail with ENOTCONN.
        #[arg(long)]
        force: bool,
        /// Control socket, if the mount was started with --ctl-socket.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// How long to wait for a daemon to exit (e.g. 10s).
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        timeout: std::time::Duration,
    },
}

#[derive(Debug, Args)]
struct ExploreArgs {
    /// The directory the workload works in (default: a fresh empty one). Its
    /// content before the workload is the initial, durable state.
    #[arg(long)]
    backing: Option<PathBuf>,
    /// The checker command, e.g. `./check.sh`: run by `sh -c` in each state's
    /// directory with SLOWFS_STATE, SLOWFS_CRASH_POINT and SLOWFS_OPS set; exit 0
    /// accepts the state. Required, except with --replay (which checks the way
    /// the saved run did, unless given another).
    #[arg(long, required_unless_present_any = ["replay", "merge"])]
    check: Option<String>,
    /// Exit 0 even when the budget ran out before every crash point got its
    /// high-yield states (by default such a run exits 3: clean so far is not clean).
    #[arg(long)]
    partial_ok: bool,
    /// Most distinct states to check overall. Every crash point first gets its
    /// high-yield states, then what is left samples larger subsets.
    #[arg(long, default_value_t = 10_000)]
    max_states: usize,
    /// Most time to spend checking (e.g. 2m); the summary says what was covered.
    #[arg(long, value_parser = parse_duration)]
    time_budget: Option<std::time::Duration>,
    /// Only crash points A..B (inclusive), e.g. 40..80.
    #[arg(long, value_parser = parse_range)]
    crash_points: Option<(usize, usize)>,
    /// Check a state again at each crash point where it occurs (for checkers that
    /// read SLOWFS_CRASH_POINT); by default each distinct state is checked once.
    #[arg(long)]
    per_point: bool,
    /// Leave paths matching GLOB out of every state (files the application
    /// discards on open, e.g. --ignore '*-shm' for SQLite). Repeatable.
    #[arg(long, value_name = "GLOB")]
    ignore: Vec<String>,
    /// Checkers running at once (default: the number of cores).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Start the checker once per job and feed it states on stdin, a line each:
    /// STATE_DIR<TAB>CRASH_POINT<TAB>OPS; it answers a line per state, `ok` to
    /// accept, anything else rejects (and is shown). Interpreter start-up is then
    /// paid once.
    #[arg(long)]
    persistent: bool,
    /// Longest one check may take; a checker over it is killed and the state
    /// counts as a violation.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// Write the report to FILE as JSON: the coverage, and every group of
    /// violations with its counts, patterns and smallest examples.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the report to FILE as one self-contained HTML page (a CI
    /// artifact): the timeline of recorded operations with the crash points
    /// that failed marked, and every violation group with its models, smallest
    /// example and replay command.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// With --replay: keep the replayed state in DIR for inspection.
    #[arg(long, value_name = "DIR", requires = "replay")]
    keep_state: Option<PathBuf>,
    /// Let writes that were not yet durable tear at sectors (--sector), finer
    /// than the default: by default a pending write may already survive as a
    /// prefix of whole 4 KiB blocks (the block size of ext4, XFS and
    /// btrfs), or, if it grew its file, as the size it reached without its
    /// data, the new bytes reading as zeros (as ext4 and XFS leave them
    /// after delayed allocation). With --fs: tear the disk's writes.
    #[arg(long, conflicts_with = "whole_writes")]
    torn: bool,
    /// Sector size for --torn.
    #[arg(long, default_value_t = 512)]
    sector: u64,
    /// Pending writes survive whole or not at all: no block tears, no size
    /// without data. Fewer states, but not every state ext4 and XFS can
    /// leave (the models are then not sound: a real kernel can leave states
    /// the run never checked).
    #[arg(long)]
    whole_writes: bool,
    /// Seed for sampling state spaces larger than --max-states.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also run the workload once per fsync it makes, with that fsync failing
    /// the way Linux fails one after a write-back error (EIO; the file's unsynced
    /// data is dropped; a retried fsync succeeds), and check those runs' crash
    /// states too (within the same --max-states/--time-budget). Catches save
    /// paths that retry fsync or ignore its error.
    #[arg(long)]
    fsync_fails: bool,
    /// Check one state of a saved run (its path is printed with each
    /// violation) again, exactly as the run did (same checker, persistent or
    /// not, ignored paths, environment), instead of running a workload; use
    /// with --state.
    #[arg(long, requires = "state")]
    replay: Option<PathBuf>,
    /// The state to replay: CRASH_POINT/OP,OP:BYTES,OP:BYTES..,OP:size (printed with each
    /// violation: OP kept whole, its first BYTES, its bytes after BYTES, or only its size).
    #[arg(long)]
    state: Option<String>,
    /// Where to save the run (its log and checker settings) for --replay. By
    /// default it is saved in the current directory only when there are
    /// violations to replay, and the summary says where.
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Check only the crash states this filesystem can leave: strict (POSIX:
    /// only what fsync promises; the default), xfs (also ext4-writeback:
    /// metadata persists in order, an fsync commits the metadata before it,
    /// newly allocated data only with the metadata before it), ext4-ordered
    /// (ext4's default data=ordered: as xfs, and a rename over a file keeps
    /// the file's data) or btrfs (transactions keep a prefix; an fsync logs
    /// its file and the file's names, nothing else). Either way, each
    /// violation group says under which models it can happen.
    #[arg(long, value_name = "MODEL")]
    fs_model: Option<slowfs_faults::crash::models::FsModel>,
    /// Check only shard K of N (1-based, e.g. 2/4) of the distinct crash
    /// states, so that N CI jobs share a long run: every shard records the
    /// workload and walks the same states (the workload must do the same
    /// operations every time), checking every Nth. Needs --json; `--merge`
    /// joins the shards' reports into the unsharded run's.
    #[arg(
        long,
        value_name = "K/N",
        requires = "json",
        conflicts_with = "fsync_fails"
    )]
    shard: Option<slowfs_faults::shard::Shard>,
    /// Join the --json reports of every shard of one run (`--shard K/N`, any
    /// order) into the report the unsharded run gives, instead of running a
    /// workload; exit status as a run's.
    #[arg(long, value_name = "SHARD_JSON", num_args = 1.., conflicts_with_all = ["replay", "shard"])]
    merge: Vec<PathBuf>,
    /// Run the workload on a real filesystem (ext4, xfs or btrfs) made in an
    /// image on the recording mount and attached as a loop device: the
    /// recording is the disk's writes and flushes, every crash state a
    /// block-level image, and the checker runs in it after the kernel has
    /// mounted it (journal or log recovery). Groups say "observed on real
    /// FS". The workload runs in the filesystem's root (SLOWFS_MOUNT);
    /// writes reach the disk apart from metadata only with short commit
    /// intervals (ext4 and btrfs commit=1 by default; for XFS explore sets
    /// fs.xfs.xfssyncd_centisecs to 100 while recording) and pauses. Needs
    /// root and loop devices.
    #[arg(
        long,
        value_name = "FS",
        conflicts_with_all = ["fsync_fails", "fs_model", "persistent", "ignore", "shard"]
    )]
    fs: Option<slowfs::explore::RealFs>,
    /// With --fs: the image size (default: ext4 64MiB, btrfs 128MiB, xfs
    /// 300MiB, the smallest each mkfs takes).
    #[arg(long, value_name = "SIZE", requires = "fs", value_parser = slowfs_faults::parse_size)]
    fs_size: Option<u64>,
    /// With --fs: an extra mkfs argument, e.g. --mkfs-arg=-O --mkfs-arg=^has_journal. Repeatable.
    #[arg(
        long = "mkfs-arg",
        value_name = "ARG",
        requires = "fs",
        allow_hyphen_values = true
    )]
    mkfs_args: Vec<String>,
    /// With --fs: mkfs options to match your production filesystem, split at
    /// spaces and given after explore's own (ext4: -b 4096 -I 256; XFS and
    /// btrfs: their defaults), e.g. --mkfs-options "-O ^metadata_csum -E
    /// lazy_itable_init=0". explore prints the mkfs command it ran.
    #[arg(long, value_name = "OPTS", requires = "fs", allow_hyphen_values = true)]
    mkfs_options: Option<String>,
    /// With --fs: the recorded run's mount options (replacing the default
    /// commit=1), e.g. data=journal, commit=1,noauto_da_alloc, or "" for
    /// the filesystem's own defaults.
    #[arg(long, value_name = "OPTS", requires = "fs")]
    mount_options: Option<String>,
    /// With --fs: how long to wait after the workload before unmounting, so
    /// that the commit timers write what it left in memory.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    fs_settle: std::time::Duration,
    /// With --fs: a command (run by `sh -c` in the filesystem's root, with
    /// SLOWFS_MOUNT set to it) that makes the initial state before the
    /// recording, e.g. "sh git_setup.sh ." or "printf old > config.json":
    /// what it leaves is on the disk when the workload starts.
    #[arg(long, value_name = "CMD", requires = "fs")]
    fs_setup: Option<String>,
    /// With --fs: also check each recovered image with the filesystem's
    /// fsck (read-only: e2fsck -fn, xfs_repair -n, btrfs check --readonly).
    #[arg(long, requires = "fs")]
    fsck: bool,
    /// With --fs: judge each group this run shows against a model run of
    /// the same workload, FILE being its --json report (`slowfs explore
    /// --json FILE --check CHECK -- WORKLOAD`, no --fs). A group is
    /// "predicted" (the model run has its message and allows it on this
    /// filesystem: ext4-ordered for ext4, xfs for XFS and for ext4 with
    /// noauto_da_alloc or data=writeback, btrfs for btrfs), "MODEL SAYS
    /// NEVER" (it has the message but rules it out here: the model is wrong)
    /// or "not in the model run" (its budget did not reach such a state).
    #[arg(long, value_name = "FILE", requires = "fs")]
    compare_with: Option<PathBuf>,
    /// The workload command and its arguments (after --).
    #[arg(last = true)]
    workload: Vec<std::ffi::OsString>,
}

/// Where the rules come from, shared by `mount` and `run`.
/// A refresh interval: a duration of at least 10 ms.
fn interval(text: &str) -> Result<std::time::Duration, String> {
    let d = slowfs_faults::parse_duration(text)?;
    if d < std::time::Duration::from_millis(10) {
        return Err(format!("'{text}' is too short: at least 10ms"));
    }
    Ok(d)
}

#[derive(Debug, Args)]
struct FaultArgs {
    /// The directory to show through the mount (default: a fresh temporary directory).
    #[arg(long)]
    backing: Option<PathBuf>,
    /// A built-in profile (see `slowfs profiles`); may be repeated.
    #[arg(long)]
    profile: Vec<String>,
    /// A TOML config file (see `slowfs check`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A rule string; may be repeated. See RULES below.
    #[arg(long = "set", value_name = "RULE")]
    rules: Vec<String>,
    /// Seed for every random choice (printed when not given); the same seed and the
    /// same requests give the same faults.
    #[arg(long)]
    seed: Option<u64>,
    /// Let other users use the mount; the kernel then enforces file modes (the
    /// same as `-o allow_other`).
    #[arg(long)]
    allow_other: bool,
    /// Mount options, comma-separated, as mount(8) and fstab take them: ro,
    /// noexec, noatime, strictatime, nodiratime, lazytime, sync, dirsync,
    /// allow_other, default_permissions; suid and dev (root only: the default
    /// is nosuid,nodev, as for every FUSE filesystem). May be repeated.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// FUSE worker threads (delays and hangs do not occupy them); the same as
    /// `--tune threads=N`.
    #[arg(long)]
    threads: Option<usize>,
    /// A FUSE setting; may be repeated. KEY=VALUE with KEY one of
    /// max-write (default 1MiB), max-background (1024), writeback-cache (off),
    /// kill-priv-v2 (on), threads (4), clone-fd (off), file-handles (on),
    /// fd-cache (0: half the open-file limit), attr-timeout (60: seconds the
    /// kernel caches names and attributes while no rule wants to see them; a
    /// change made in the backing directory directly shows after at most
    /// this long). The defaults are what `bench/fio.sh tuning` measured best
    /// (see README).
    #[arg(long = "tune", value_name = "KEY=VALUE")]
    tune: Vec<String>,
    /// Control socket path (default: /run/slowfs/HASH.sock, found by `slowfs ctl MNT`).
    #[arg(long)]
    ctl_socket: Option<PathBuf>,
    /// `strict`: record operations so that a crash (a `crash` rule or `slowfs ctl
    /// MNT crash`) keeps only what was made durable; `none` (default) costs nothing.
    #[arg(long, default_value = "none")]
    crash_model: slowfs::Durability,
    /// `auto`: files no data rule touches when opened use FUSE kernel passthrough
    /// (near-native speed; rules added later apply to files opened later);
    /// `never`: every request goes through the daemon.
    #[arg(long, default_value = "auto", value_parser = ["auto", "never"])]
    passthrough: String,
    /// Keep a delayed or hung request waiting even when its caller is interrupted
    /// or killed (NFS `nointr`). By default it ends at once with EINTR, so a
    /// killed process can exit and one with a signal handler sees EINTR; under
    /// --cache nfs only a fatal signal ends it (NFS since Linux 2.6.25).
    #[arg(long)]
    no_intr: bool,
    /// How the kernel caches data and attributes. `every-call` (the default,
    /// but under --profile nfs): each read and write of a file a data rule
    /// touches reaches the daemon and pays its fault. `nfs` (the default under
    /// --profile nfs): the Linux NFS client's caching, so rules apply per
    /// request it sends, an RPC: page cache with read-ahead, write-behind sent
    /// on close/fsync, attributes cached 3-60 s (directories 30-60 s),
    /// close-to-open. `nfs:OPTIONS` takes nfs(5)'s options, e.g.
    /// nfs:actimeo=1,lookupcache=positive,rsize=65536 (also noac, nocto,
    /// acregmin=, acregmax=, acdirmin=, acdirmax=, wsize=). `soft` or
    /// `softerr` with timeo= (tenths of a second) and retrans=: a request the
    /// server leaves unanswered (`* hang`) fails with EIO (ETIMEDOUT) at the
    /// major timeout, where `hard` (the default) waits. `nolock`: fcntl and
    /// flock(2) locks stay in this client, where `lock` (the default) shares
    /// them with every mount of the backing directory;
    /// `local_lock=flock|posix|all|none` keeps one, both or neither local.
    /// `sync`: each write(2) is sent before it returns. `nordirplus`: listings
    /// without the entries' attributes (READDIRPLUS, `rdirplus`, is the
    /// default), so `ls -l` looks each entry up. See docs/nfs.md.
    #[arg(long, value_name = "POLICY")]
    cache: Option<slowfs::CachePolicy>,
    /// Write every fault that fires to FILE (JSON lines: the operation, the
    /// path, which of that operation's requests on that path it was, and what
    /// was drawn), as it fires. A seed reproduces a run only if requests come
    /// in the same order; a trace also when the program's threads race.
    #[arg(long, value_name = "FILE", conflicts_with = "replay_faults")]
    record_faults: Option<PathBuf>,
    /// Fire exactly the faults of a --record-faults FILE, each at the same
    /// per-path occurrence of its operation, whatever order the requests come
    /// in (the rules are not drawn from).
    #[arg(long, value_name = "FILE")]
    replay_faults: Option<PathBuf>,
}

fn parse_range(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("expected a range of crash points like 40..80, found '{text}'");
    let (a, b) = text.split_once("..").ok_or_else(bad)?;
    let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b {
        return Err(format!(
            "range '{text}' runs backwards (write the smaller bound first)"
        ));
    }
    Ok((a, b))
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    slowfs_faults::parse_duration(text).map_err(|e| e.to_string())
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Mount {
            faults,
            background,
            quiet,
            mountpoint,
        } => {
            if background {
                commands::mount_in_background(faults, quiet, mountpoint)
            } else {
                commands::mount(faults, mountpoint)
            }
        }
        Command::Run {
            faults,
            quiet,
            command,
        } => commands::run(faults, quiet, command),
        Command::Ctl {
            mountpoint,
            socket,
            json,
            watch: Some(every),
            action: slowfs::control::Command::Stats,
        } => top::watch(&commands::socket_of(&mountpoint, socket)?, every, json),
        Command::Ctl { watch: Some(_), .. } => {
            anyhow::bail!("--watch goes with `stats` (slowfs ctl MNT stats --watch 1s)")
        }
        Command::Ctl {
            mountpoint,
            socket,
            json,
            watch: None,
            action,
        } => commands::ctl(mountpoint, socket, action, json),
        Command::Top {
            mountpoint,
            socket,
            interval,
        } => top::top(
            &mountpoint,
            &commands::socket_of(&mountpoint, socket)?,
            interval,
        ),
        Command::Profiles { name } => commands::profiles(name),
        Command::Check { file } => commands::check(file),
        Command::Umount {
            mountpoint,
            all: _,
            force,
            socket,
            timeout,
        } => match mountpoint {
            Some(mountpoint) => commands::umount(&mountpoint, socket, force, timeout),
            None => commands::umount_all(force, timeout),
        },
        Command::Explore(args) => explore::explore(args),
        Command::MountHelper {
            source,
            mountpoint,
            options,
            fake,
            verbose,
            ..
        } => commands::mount_helper(source, mountpoint, &options, fake, verbose),
    }
}
