//! Carrying out a command against a mount's state: rules, stats, hangs,
//! crashes.

use slowfs_faults::parse_rule;

use crate::fs::Controls;

use super::protocol::{Command, Response};

/// Carries out one command against a mount.
pub fn execute(mount: &Controls, command: Command) -> Response {
    match command {
        Command::Stats => {
            let report = mount.stats();
            Response::ok(
                report.render(),
                serde_json::to_value(&report).expect("stats serialize"),
            )
        }
        Command::Set { rule } => match parse_rule(&rule) {
            Ok(rule)
                if rule.action.needs_crash_model() && !mount.has_crash_model() =>
            {
                Response::fail(format!(
                    "`{}` rules work on what is durable: they need a mount started with a crash model (--crash-model strict){}",
                    rule.action.keyword(),
                    if mount.is_nfs_client() {
                        ", which --cache nfs cannot have (the crash model must see every write when it is made; the NFS client gathers them)"
                    } else {
                        ""
                    }
                ))
            }
            Ok(rule) => {
                let text = rule.to_string();
                let id = mount.add_rule(rule);
                Response::ok(
                    format!("added rule #{id}: {text}"),
                    serde_json::json!({ "id": id }),
                )
            }
            Err(e) => Response::fail(e.to_string()),
        },
        Command::Clear { id } => {
            let removed = mount.plan().clear(id);
            // The rules' matchers and index were spread over the worker
            // threads' malloc arenas: hand the freed pages back, so that a
            // clear returns the memory the rules took.
            // SAFETY: malloc_trim only releases free memory.
            #[cfg(target_env = "gnu")]
            unsafe {
                libc::malloc_trim(0);
            }
            match (id, removed) {
                (Some(id), 0) => {
                    Response::fail(format!("no rule #{id} (see `slowfs ctl MOUNTPOINT rules`)"))
                }
                _ => Response::ok(
                    format!("removed {removed} rule(s)"),
                    serde_json::json!({ "removed": removed }),
                ),
            }
        }
        Command::Rules => {
            let rules = mount.plan().report();
            let exempt = mount.passthrough_handles();
            let mut text = if rules.is_empty() {
                "no rules".to_string()
            } else {
                rules
                    .iter()
                    .map(|r| format!("#{} {} (fired {}/{})", r.id, r.text, r.fired, r.matched))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            if exempt > 0 {
                text.push_str(&format!(
                    "\n{exempt} file handle(s) open in kernel passthrough: data rules apply to them only once reopened"
                ));
            }
            let data: Vec<_> = rules
                .iter()
                .map(|r| serde_json::json!({"id": r.id, "rule": r.text, "matched": r.matched, "fired": r.fired}))
                .collect();
            Response::ok(text, serde_json::Value::Array(data))
        }
        Command::Crash => {
            if mount.crash() {
                Response::ok("crashed: the tree is now its durable state; handles opened before fail with EIO", serde_json::Value::Null)
            } else {
                Response::fail("this mount has no crash model (start it with --crash-model strict)")
            }
        }
        Command::Durable => match mount.durability() {
            Some(report) => {
                let mut text = format!(
                    "{} operation(s) since the mount or last crash; {} not durable; {} path(s) a crash now would change",
                    report.ops,
                    report.pending.len(),
                    report.at_risk.len()
                );
                for op in &report.pending {
                    text.push_str(&format!("\n  pending: {op}"));
                }
                for path in &report.at_risk {
                    text.push_str(&format!("\n  at risk: {path}"));
                }
                Response::ok(text, serde_json::to_value(&report).expect("serializes"))
            }
            None => {
                Response::fail("this mount has no crash model (start it with --crash-model strict)")
            }
        },
        Command::Info | Command::Shutdown => {
            Response::fail("this command needs the mount's control server")
        }
        Command::Release => {
            let released = mount.release();
            Response::ok(
                format!("released {released} hung request(s)"),
                serde_json::json!({ "released": released }),
            )
        }
    }
}
