//! The passthrough itself: operations real programs use, and no way out of the
//! backing directory.

mod common;

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use common::SlowMount;

fn cstr(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> std::io::Result<()> {
    let (from, to) = (cstr(from), cstr(to));
    // SAFETY: valid C strings.
    let ret = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn files_dirs_links_and_renames_pass_through() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::create_dir_all(m.path("a/b")).unwrap();
    fs::write(m.path("a/b/f"), b"one").unwrap();
    fs::hard_link(m.path("a/b/f"), m.path("a/g")).unwrap();
    assert_eq!(fs::metadata(m.path("a/g")).unwrap().nlink(), 2);
    std::os::unix::fs::symlink("b/f", m.path("a/s")).unwrap();
    assert_eq!(fs::read_link(m.path("a/s")).unwrap(), Path::new("b/f"));
    assert_eq!(fs::read(m.path("a/s")).unwrap(), b"one");
    fs::rename(m.path("a/b"), m.path("c")).unwrap();
    assert_eq!(fs::read(m.path("c/f")).unwrap(), b"one");
    assert_eq!(fs::read(m.backing_path("c/f")).unwrap(), b"one");
    let mut names: Vec<_> = fs::read_dir(m.path("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["g", "s"]);
    fs::remove_file(m.path("a/g")).unwrap();
    fs::remove_file(m.path("a/s")).unwrap();
    fs::remove_dir(m.path("a")).unwrap();
    assert!(!m.backing_path("a").exists());
}

#[test]
fn rename_noreplace_and_exchange() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("x"), b"x").unwrap();
    fs::write(m.path("y"), b"y").unwrap();
    let err = renameat2(&m.path("x"), &m.path("y"), libc::RENAME_NOREPLACE).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    renameat2(&m.path("x"), &m.path("y"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(m.path("x")).unwrap(), b"y");
    assert_eq!(fs::read(m.path("y")).unwrap(), b"x");
}

#[test]
fn truncate_append_and_positioned_io() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(m.path("f"))
        .unwrap();
    file.write_all(b"abc").unwrap();
    file.write_all(b"def").unwrap();
    assert_eq!(fs::read(m.path("f")).unwrap(), b"abcdef");
    let file = OpenOptions::new().write(true).open(m.path("f")).unwrap();
    file.set_len(2).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, b"Z", 5).unwrap();
    assert_eq!(fs::read(m.path("f")).unwrap(), b"ab\0\0\0Z");
}

/// Through the daemon, SEEK_DATA right after a buffered write (no fsync) finds
/// the data: no cache in the kernel holds it back (xfstests 286, 436, 490, ...).
#[test]
fn seek_data_sees_a_write_not_yet_synced() {
    let m = SlowMount::configured(&[], |c| c.passthrough = false).expect("mounting slowfs");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(m.path("fresh"))
        .unwrap();
    std::os::unix::fs::FileExt::write_at(&file, &[7u8; 8193], 0).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: plain lseek on an open fd.
    let data = unsafe { libc::lseek(fd, 0, libc::SEEK_DATA) };
    assert_eq!(data, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, 0, libc::SEEK_HOLE) };
    assert_eq!(hole, 8193);
}

/// A store through a shared mapping of a file open in kernel passthrough (the
/// default) shows in stat's mtime at once (xfstests generic/080, 215): the
/// daemon does not see the store, so it lets no one cache the attributes.
#[test]
fn mmap_stores_update_mtime_in_passthrough() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(m.path("mapped"))
        .unwrap();
    file.set_len(4096).unwrap();
    let before = stat_mtime(&m.path("mapped"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    store_through_a_mapping(&file, true);
    let after = stat_mtime(&m.path("mapped"));
    assert!(
        after > before,
        "mtime {after:?} after the store, {before:?} before"
    );
}

/// The attributes a create caches (a new file is empty) do not outlive the
/// first write: a store through a mapping after it shows in stat's mtime.
#[test]
fn mmap_stores_after_the_first_write_to_a_new_file_update_mtime() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let mut file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(m.path("mapped"))
        .unwrap();
    let created = stat_mtime(&m.path("mapped"));
    file.write_all(&[0u8; 4096]).unwrap();
    let before = stat_mtime(&m.path("mapped"));
    assert!(before >= created);
    std::thread::sleep(std::time::Duration::from_millis(20));
    store_through_a_mapping(&file, false);
    let open_after = stat_mtime(&m.path("mapped"));
    drop(file);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let closed_after = stat_mtime(&m.path("mapped"));
    assert!(
        open_after > before && closed_after > before,
        "mtime {open_after:?} while open and {closed_after:?} after close, {before:?} before the store"
    );
}

/// Stores a byte at offset 0 of the 4 KiB file `file` through a fresh shared
/// mapping (msync'ed first if `sync`), unmapped before it returns.
fn store_through_a_mapping(file: &File, sync: bool) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(file);
    // SAFETY: a fresh 4 KiB shared mapping of a 4 KiB file, written in bounds
    // and unmapped before the file is closed.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        *(map as *mut u8) = 1;
        if sync {
            assert_eq!(libc::msync(map, 4096, libc::MS_SYNC), 0);
        }
        assert_eq!(libc::munmap(map, 4096), 0);
    }
}

/// mtime as `stat -c %Y` and xfstests see it: statx asking for the times only.
/// (Any mmap invalidates the cached atime, so a full stat would refetch.)
fn stat_mtime(path: &Path) -> (i64, u32) {
    let path = cstr(path);
    // SAFETY: a NUL-terminated path and a zeroed statx buffer for statx(2) to fill.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_MTIME | libc::STATX_CTIME;
    let rc = unsafe { libc::statx(libc::AT_FDCWD, path.as_ptr(), 0, mask, &mut st) };
    assert_eq!(rc, 0, "statx: {}", std::io::Error::last_os_error());
    (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec)
}

/// As above for a file whose attributes the kernel cached before it was
/// opened for writing (a stat, then open + mmap store, as xfstests 080 does):
/// the open for writing drops the cached attributes.
#[test]
fn mmap_stores_update_mtime_of_a_file_stat_before_open() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("mapped"), vec![0u8; 4096]).unwrap();
    // The kernel sends RELEASE after close returns: let it arrive, so that the
    // stat below is cached as a closed file's would be.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = stat_mtime(&m.path("mapped"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("mapped"))
        .unwrap();
    store_through_a_mapping(&file, false);
    let open_after = stat_mtime(&m.path("mapped"));
    drop(file);
    let closed_after = stat_mtime(&m.path("mapped"));
    assert!(
        open_after > before && closed_after > before,
        "mtime {open_after:?} while open and {closed_after:?} after close, {before:?} before the store"
    );
}

#[test]
fn seek_data_and_hole_pass_through() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(m.path("sparse"))
        .unwrap();
    file.seek(SeekFrom::Start(1 << 20)).unwrap();
    file.write_all(b"data").unwrap();
    file.sync_all().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: plain lseek on an open fd.
    let data = unsafe { libc::lseek(fd, 0, libc::SEEK_DATA) };
    let hole = unsafe { libc::lseek(fd, 0, libc::SEEK_HOLE) };
    assert_eq!(data, 1 << 20, "first data after the hole");
    assert_eq!(hole, 0, "the file starts with a hole");
}

#[test]
fn fifos_xattrs_fallocate_and_copy_file_range() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let fifo = cstr(&m.path("fifo"));
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert!(fs::symlink_metadata(m.backing_path("fifo"))
        .unwrap()
        .file_type()
        .is_fifo_like());

    fs::write(m.path("f"), b"0123456789").unwrap();
    let path = cstr(&m.path("f"));
    let (name, value) = (c"user.slowfs", b"v1");
    // SAFETY: valid pointers and lengths.
    let set = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), 2, 0) };
    assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
    let mut buf = [0u8; 16];
    let got = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 16) };
    assert_eq!(&buf[..got as usize], b"v1");

    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("f"))
        .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: plain syscalls on an open fd.
    assert_eq!(
        unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE,
                2,
                3,
            )
        },
        0
    );
    assert_eq!(fs::read(m.path("f")).unwrap(), b"01\x00\x00\x0056789");
    let out = File::create(m.path("g")).unwrap();
    let (mut off_in, mut off_out) = (5i64, 0i64);
    let copied = unsafe {
        libc::copy_file_range(
            fd,
            &mut off_in,
            std::os::fd::AsRawFd::as_raw_fd(&out),
            &mut off_out,
            5,
            0,
        )
    };
    assert_eq!(copied, 5);
    assert_eq!(fs::read(m.path("g")).unwrap(), b"56789");
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}
impl FifoLike for fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

#[test]
fn new_files_belong_to_the_caller_and_keep_their_mode() {
    let m = SlowMount::in_dir(Path::new("/var/tmp"), &[], |c| {
        c.options.apply("allow_other").unwrap()
    })
    .expect("mounting slowfs");
    fs::set_permissions(m.path(""), fs::Permissions::from_mode(0o777)).unwrap();
    let dir = m.path("");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 022 && echo x > f && mkdir d && ln -s f l && mkfifo p && chmod 4755 f")
        .current_dir(&dir)
        .uid(4242)
        .gid(4343)
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["f", "d", "l", "p"] {
        let meta = fs::symlink_metadata(m.backing_path(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4343), "{name}");
    }
    assert_eq!(
        fs::metadata(m.backing_path("f")).unwrap().mode() & 0o7777,
        0o4755
    );
    assert_eq!(
        fs::metadata(m.backing_path("d")).unwrap().mode() & 0o777,
        0o755
    );
}

#[test]
fn nothing_outside_the_backing_directory_is_reachable() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), b"secret").unwrap();
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    // A symlink planted in the backing directory, pointing out of it.
    std::os::unix::fs::symlink(outside.path().join("secret"), m.backing_path("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), m.backing_path("dirlink")).unwrap();

    // The daemon never follows it: opening without following fails, and operations
    // on the link itself do not reach the target.
    let err = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(m.path("link"))
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
    let link = cstr(&m.path("link"));
    // SAFETY: valid C string.
    unsafe { libc::lchown(link.as_ptr(), 4242, 4242) };
    let target_meta = fs::metadata(outside.path().join("secret")).unwrap();
    assert_eq!(
        target_meta.uid(),
        0,
        "lchown through the mount changed the target"
    );
    let value = b"x";
    let set = unsafe {
        libc::lsetxattr(
            link.as_ptr(),
            c"user.x".as_ptr(),
            value.as_ptr().cast(),
            1,
            0,
        )
    };
    assert_ne!(
        set, 0,
        "user xattrs on a symlink must fail, not land on the target"
    );

    // `..` at the mount root leaves the mount (the kernel resolves it in the caller's
    // namespace), never into the backing directory's parent.
    let parent_via_mount = m.path("..").canonicalize().unwrap();
    assert_eq!(
        parent_via_mount,
        m.path("").parent().unwrap().canonicalize().unwrap()
    );

    // Names with `/` or `..` can only come from the kernel's own resolution; the
    // daemon still refuses them (checked in sys::component). A path with many `..`
    // through a subdirectory stays on the caller's side too.
    fs::create_dir(m.path("sub")).unwrap();
    let up = m.path("sub/../sub/../../");
    assert_eq!(up.canonicalize().unwrap(), parent_via_mount);
    assert_eq!(fs::read(outside.path().join("secret")).unwrap(), b"secret");
}

/// Set-user-ID and set-group-ID drop when someone without CAP_FSETID writes or
/// truncates the file, as on a local filesystem (Linux's setattr_should_drop_sgid,
/// xfstests generic/683-685): set-group-ID without group-execute drops only for
/// a writer outside the file's group; root keeps them. The daemon does this itself
/// (FUSE_HANDLE_KILLPRIV_V2), on both the passthrough and daemon paths.
fn set_id_bits_drop_when_another_user_changes_data(passthrough: bool) {
    let m = SlowMount::in_dir(Path::new("/var/tmp"), &[], |c| {
        c.options.apply("allow_other").unwrap();
        c.passthrough = passthrough;
    })
    .expect("mounting slowfs");
    fs::set_permissions(m.path(""), fs::Permissions::from_mode(0o777)).unwrap();
    for (name, mode) in [
        ("written", 0o6777),
        ("truncated", 0o6777),
        ("reopened", 0o6777),
        ("allocated", 0o6777),
        ("punched", 0o6777),
        ("by-root", 0o6777),
        ("no-group-exec", 0o2666),
        ("no-group-exec-in-group", 0o2666),
    ] {
        fs::write(m.path(name), b"data").unwrap();
        fs::set_permissions(m.path(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    std::os::unix::fs::chown(m.path("no-group-exec-in-group"), None, Some(4343)).unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            "printf x >> written && truncate -s 1 truncated && : > reopened && \
             printf x >> no-group-exec && printf x >> no-group-exec-in-group && \
             fallocate -l 8192 allocated && \
             fallocate -p -o 0 -l 2 punched",
        )
        .current_dir(m.path(""))
        .uid(4242)
        .gid(4343)
        .status()
        .unwrap();
    assert!(status.success());
    OpenOptions::new()
        .append(true)
        .open(m.path("by-root"))
        .unwrap()
        .write_all(b"x")
        .unwrap();
    let mode = |name: &str| fs::metadata(m.backing_path(name)).unwrap().mode() & 0o7777;
    // The mount shows the change at once, not after its attribute cache expires.
    let shown = |name: &str| fs::metadata(m.path(name)).unwrap().mode() & 0o7777;
    for name in ["written", "truncated", "reopened", "allocated", "punched"] {
        assert_eq!(
            shown(name),
            mode(name),
            "{name}: the mount agrees with the backing file"
        );
    }
    assert_eq!(mode("written"), 0o777, "write by another user");
    assert_eq!(mode("truncated"), 0o777, "truncate by another user");
    assert_eq!(mode("reopened"), 0o777, "O_TRUNC open by another user");
    assert_eq!(mode("allocated"), 0o777, "fallocate by another user");
    assert_eq!(mode("punched"), 0o777, "punch hole by another user");
    assert_eq!(mode("by-root"), 0o6777, "write by root");
    assert_eq!(
        mode("no-group-exec"),
        0o666,
        "set-group-ID without group-execute, written by a user outside the group"
    );
    assert_eq!(
        mode("no-group-exec-in-group"),
        0o2666,
        "set-group-ID without group-execute, written by a member of the group"
    );
    assert_eq!(fs::read(m.backing_path("written")).unwrap(), b"datax");
}

#[test]
fn set_id_bits_drop_when_another_user_changes_data_in_passthrough() {
    set_id_bits_drop_when_another_user_changes_data(true);
}

#[test]
fn set_id_bits_drop_when_another_user_changes_data_through_the_daemon() {
    set_id_bits_drop_when_another_user_changes_data(false);
}

/// A parent's default ACL, not the caller's umask, decides a new node's mode (the
/// kernel leaves the mask to the filesystem: FUSE_DONT_MASK); without one, the umask
/// applies as usual.
#[test]
fn default_acls_and_the_umask_decide_new_modes() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::create_dir(m.path("acl")).unwrap();
    // system.posix_acl_default: version 2; user::rwx, group::rwx, other::rwx.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for tag in [0x01u16, 0x04, 0x20] {
        acl.extend(tag.to_le_bytes());
        acl.extend(7u16.to_le_bytes());
        acl.extend(u32::MAX.to_le_bytes());
    }
    let path = cstr(&m.path("acl"));
    // SAFETY: valid C strings and buffer.
    let set = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"system.posix_acl_default".as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: reads the mask by setting it and putting it back.
    let umask = unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old
    };
    assert_ne!(
        umask & 0o022,
        0,
        "this test expects a umask that masks group/other write"
    );
    fs::create_dir(m.path("acl/sub")).unwrap();
    fs::write(m.path("acl/file"), b"").unwrap();
    fs::create_dir(m.path("plain")).unwrap();
    let mode = |rel: &str| fs::metadata(m.path(rel)).unwrap().mode() & 0o777;
    assert_eq!(mode("acl/sub"), 0o777, "the default ACL, not the umask");
    assert_eq!(mode("acl/file"), 0o666, "the default ACL, not the umask");
    assert_eq!(mode("plain"), 0o777 & !umask, "the umask without an ACL");
}

/// Any timestamp round-trips, also before 1970 and with nanoseconds.
#[test]
fn timestamps_before_1970_round_trip() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("old"), b"").unwrap();
    let path = cstr(&m.path("old"));
    for (secs, nanos) in [
        (-100i64, 0i64),
        (-1, 500_000_000),
        (-2_000_000_000, 1),
        (1_700_000_000, 7),
    ] {
        let times = [
            libc::timespec {
                tv_sec: secs,
                tv_nsec: nanos,
            },
            libc::timespec {
                tv_sec: secs,
                tv_nsec: nanos,
            },
        ];
        // SAFETY: valid C string and times.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        for meta in [
            fs::metadata(m.path("old")).unwrap(),
            fs::metadata(m.backing_path("old")).unwrap(),
        ] {
            assert_eq!((meta.mtime(), meta.mtime_nsec()), (secs, nanos));
            assert_eq!((meta.atime(), meta.atime_nsec()), (secs, nanos));
        }
    }
}

/// A missing name is cached as missing for the entry TTL (one lookup answers
/// many probes, as SQLite's hot-journal checks make), and creating it through
/// the mount makes it visible at once.
#[test]
fn missing_names_are_cached_until_created() {
    let m = SlowMount::with_rules(1, &[]).expect("mounting slowfs");
    for _ in 0..20 {
        assert!(std::fs::metadata(m.path("journal")).is_err());
    }
    let lookups = m.stats().count("lookup");
    assert!(
        (1..=3).contains(&lookups),
        "20 probes of a missing name took {lookups} lookups"
    );
    std::fs::write(m.path("journal"), b"x").unwrap();
    assert_eq!(std::fs::read(m.path("journal")).unwrap(), b"x");
    std::fs::remove_file(m.path("journal")).unwrap();
    assert!(std::fs::metadata(m.path("journal")).is_err());
}

/// The atime mount options (xfstests generic/003, 120), through kernel
/// passthrough and through the daemon: `noatime` leaves an access time alone,
/// `relatime` moves one older than the mtime only, `strictatime` moves it on
/// every read.
#[test]
fn atime_options_decide_what_a_read_moves() {
    // (options, passthrough, atime ahead of the mtime, read once before, kept)
    for (options, passthrough, ahead, cached, kept) in [
        ("noatime", false, false, false, true),
        ("noatime", true, false, false, true),
        ("relatime", true, false, false, false),
        ("relatime", true, true, false, true),
        ("strictatime", true, true, false, false),
        ("strictatime", false, true, false, false),
        // A file read before (its pages cached, then closed) is read from the
        // backing file again on the next open, so the atime moves (generic/003).
        ("strictatime", false, true, true, false),
    ] {
        const OLD: i64 = 946_684_800; // 2000-01-01, older than the mtime
        const AHEAD: i64 = 10; // seconds after the mtime: relatime leaves it
        let m = SlowMount::configured(&[], |c| {
            c.options.apply(options).unwrap();
            c.passthrough = passthrough;
        })
        .expect("mounting slowfs");
        fs::write(m.path("f"), b"read me").unwrap();
        if cached {
            assert_eq!(fs::read(m.path("f")).unwrap(), b"read me");
        }
        let mtime = fs::metadata(m.path("f")).unwrap().mtime();
        let set = if ahead { mtime + AHEAD } else { OLD };
        let times = [
            libc::timespec {
                tv_sec: set,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
        ];
        let path = cstr(&m.path("f"));
        // SAFETY: a NUL-terminated path and two valid timespecs.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(rc, 0);
        assert_eq!(fs::read(m.path("f")).unwrap(), b"read me");
        let atime = fs::metadata(m.path("f")).unwrap().atime();
        assert_eq!(
            atime == set,
            kept,
            "-o {options}, passthrough {passthrough}, read before {cached}: atime {atime}, set to {set}"
        );
    }
}

/// open(O_RDONLY|O_TRUNC) of a program being run fails with ETXTBSY and leaves
/// it whole, through the daemon and through passthrough (pjdfstest
/// open::etxtbsy; with FUSE_ATOMIC_O_TRUNC the daemon emptied it first).
#[test]
fn truncating_open_of_a_running_program_is_refused_and_harmless() {
    for passthrough in [false, true] {
        let m =
            SlowMount::configured(&[], |c| c.passthrough = passthrough).expect("mounting slowfs");
        let program = m.path("sleep");
        fs::copy("/bin/sleep", &program).unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
        let size = fs::metadata(&program).unwrap().len();
        let mut running = std::process::Command::new(&program)
            .arg("10")
            .spawn()
            .unwrap();
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_TRUNC)
            .open(&program);
        let after = fs::metadata(&program).unwrap().len();
        running.kill().unwrap();
        running.wait().unwrap();
        assert_eq!(
            opened.map(|_| ()).map_err(|e| e.raw_os_error()),
            Err(Some(libc::ETXTBSY)),
            "passthrough {passthrough}"
        );
        assert_eq!(
            after, size,
            "passthrough {passthrough}: the program was truncated"
        );
    }
}
