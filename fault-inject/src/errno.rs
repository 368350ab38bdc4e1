//! Errno names that rules may inject.

const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("ENODATA", libc::ENODATA),
    ("ENOSYS", libc::ENOSYS),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ESTALE", libc::ESTALE),
    ("EDQUOT", libc::EDQUOT),
    ("ECANCELED", libc::ECANCELED),
    ("ENOTCONN", libc::ENOTCONN),
];

/// The errno number for a name such as `EIO` (case-insensitive).
pub fn errno_from_name(name: &str) -> Option<i32> {
    ERRNOS
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|&(_, number)| number)
}

/// The name of an errno number, or `errno N` for one without a name here.
pub fn errno_name(number: i32) -> String {
    ERRNOS
        .iter()
        .find(|(_, known)| *known == number)
        .map(|(name, _)| name.to_string())
        .unwrap_or_else(|| format!("errno {number}"))
}

/// Every errno name a rule may use, for error messages and help.
pub fn known_errno_names() -> impl Iterator<Item = &'static str> {
    ERRNOS.iter().map(|(name, _)| *name)
}
