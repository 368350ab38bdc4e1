//! Built-in profiles: named rule sets for common kinds of bad storage.

use crate::parse::parse_rule;
use crate::rule::Rule;

/// A built-in profile: a name, what it models, where its numbers come from, and its rules.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// The name given to `--profile`.
    pub name: &'static str,
    /// One line: what storage it models.
    pub summary: &'static str,
    /// Where the numbers come from.
    pub source: &'static str,
    /// Its rules, as rule strings.
    pub rules: &'static [&'static str],
}

impl Profile {
    /// The profile's rules, parsed.
    pub fn parsed_rules(&self) -> Vec<Rule> {
        self.rules
            .iter()
            .map(|text| parse_rule(text).expect("built-in profiles parse (tested)"))
            .collect()
    }
}

/// Every built-in profile.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "nfs",
        summary: "NFS over a datacentre LAN: ms-scale metadata and data latency with a heavy tail",
        source: "one NFSv3/v4 RPC round trip on a LAN is 0.3-1 ms (RFC 1813/7530 ops map one \
                 request to one RPC); stable writes and COMMIT (fsync) wait for the server's \
                 disk, a few ms; an NLM or NFSv4 lock is one round trip; server and network queueing give a log-normal tail with rare \
                 100+ ms stalls, as in published NFS latency studies (e.g. Ellard et al., \
                 FAST '03 traces)",
        rules: &[
            // xattr: NFSACL's GETACL and SETACL (under --cache nfs only those
            // reach the server; see fs/nfs/acls.rs in slowfs).
            "lookup,getattr,access,open,opendir,readdir,statfs,lock,xattr delay=lognormal(800us,0.6) spike=0.002:100ms",
            // A copy_file_range is NFSv4.2's COPY: one data RPC that the
            // server does (nfs42_proc_copy), where the client sends no READ
            // or WRITE of its own.
            "read,write,copy_file_range delay=lognormal(1500us,0.6) spike=0.002:150ms",
            "create,mknod,mkdir,rmdir,unlink,rename,link,symlink,setattr delay=lognormal(3ms,0.7) spike=0.005:200ms",
            "fsync,fdatasync,fsyncdir,flush delay=lognormal(5ms,0.8) spike=0.01:250ms",
        ],
    },
    Profile {
        name: "slow-fsync",
        summary: "a busy disk: every fsync/fdatasync takes 250 ms",
        source: "a loaded HDD or a cloud volume behind a write-back cache flush: fsync is one \
                 cache flush plus journal commit, 100-500 ms under load (ext4 jbd2 commit \
                 latencies reported for busy spinning disks)",
        rules: &["fsync,fdatasync,fsyncdir delay=250ms"],
    },
    Profile {
        name: "throttled-volume",
        summary: "a cloud volume out of burst credits: 4 MiB/s and 100 IOPS",
        source: "AWS EBS gp2: 3 IOPS/GiB with a floor of 100 IOPS once burst credits are \
                 spent; small volumes then see single-digit MiB/s. Bursts of 100 ms of the rate",
        rules: &["read,write throttle=4MiB/s", "read,write,fsync,fdatasync iops=100"],
    },
    Profile {
        name: "flaky",
        summary: "rare EIO on reads, writes and fsync (1 in 1000 requests)",
        source: "a failing disk or a flaky network block device: latent sector errors surface \
                 as EIO on a small fraction of requests (Bairavasundaram et al., SIGMETRICS '07)",
        rules: &["read,write,fsync,fdatasync error=EIO p=0.001"],
    },
    Profile {
        name: "full-disk",
        summary: "ENOSPC on writes once 64 MiB have been written through the mount",
        source: "a quota: the mount accepts 64 MiB of writes, then every write, fallocate and \
                 copy_file_range fails with ENOSPC, as a full filesystem does",
        rules: &["write,fallocate,copy_file_range error=ENOSPC after_bytes=64MiB"],
    },
    Profile {
        name: "short-io",
        summary: "reads and writes move small random byte counts (1..4096)",
        source: "what read(2)/write(2) are allowed to do by POSIX and what network filesystems, \
                 FUSE filesystems and pipes do in practice; exposes callers that assume a \
                 full transfer",
        rules: &["read,write short=1..4096"],
    },
    Profile {
        name: "hdd",
        summary: "a 7200 rpm disk: seek-like latency on every data request, slow fsync",
        source: "7200 rpm: a full rotation is 8.3 ms (average half rotation 4.2 ms) and \
                 seeks take 0.5-9 ms, so a random request lands between 1 and 17 ms; fsync \
                 adds a cache flush (~15 ms)",
        rules: &[
            "read,write delay=1ms..17ms",
            "fsync,fdatasync,fsyncdir delay=normal(15ms,5ms)",
        ],
    },
];

/// Looks a profile up by name.
pub fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses_and_round_trips() {
        for profile in PROFILES {
            for rule in profile.parsed_rules() {
                assert_eq!(
                    parse_rule(&rule.to_string()).unwrap(),
                    rule,
                    "{}",
                    profile.name
                );
            }
        }
    }
}
