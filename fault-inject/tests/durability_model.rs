//! The durability model against a brute-force reference, on small random logs.

use std::collections::BTreeMap;

mod common;

use proptest::prelude::*;
use slowfs_faults::durability::{Keep, Log, LogOp, Node, NodeKind, Tree};

const ROOT: u64 = 1;
const SUB: u64 = 2;
const NAMES: [&str; 3] = ["a", "b", "c"];

fn initial() -> Tree {
    let mut tree = Tree::empty(ROOT);
    tree.apply(&LogOp::Create {
        dir: ROOT,
        name: "d".into(),
        node: SUB,
        kind: NodeKind::Dir,
    });
    tree.apply(&LogOp::Create {
        dir: ROOT,
        name: "a".into(),
        node: 10,
        kind: NodeKind::File,
    });
    tree.apply(&LogOp::Write {
        node: 10,
        offset: 0,
        data: b"old".to_vec(),
    });
    tree
}

fn op() -> impl Strategy<Value = LogOp> {
    let dir = prop::sample::select(vec![ROOT, SUB]);
    let name = prop::sample::select(NAMES.to_vec()).prop_map(String::from);
    let node = 10u64..14;
    prop_oneof![
        3 => (node.clone(), 0u64..8, prop::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(node, offset, data)| LogOp::Write { node, offset, data }),
        1 => (node.clone(), 0u64..8).prop_map(|(node, len)| LogOp::SetLen { node, len }),
        2 => (dir.clone(), name.clone(), 11u64..14)
            .prop_map(|(dir, name, node)| LogOp::Create { dir, name, node, kind: NodeKind::File }),
        1 => (dir.clone(), name.clone(), node.clone()).prop_map(|(dir, name, node)| LogOp::Link { dir, name, node }),
        1 => (dir.clone(), name.clone()).prop_map(|(dir, name)| LogOp::Remove { dir, name }),
        2 => (dir.clone(), name.clone(), dir.clone(), name.clone(), any::<bool>()).prop_map(
            |(from_dir, from_name, to_dir, to_name, exchange)| LogOp::Rename {
                from_dir, from_name, to_dir, to_name, node: 0, exchanged: exchange.then_some(0)
            }
        ),
        2 => (node, any::<bool>()).prop_map(|(node, datasync)| LogOp::Fsync { node, datasync }),
        2 => dir.prop_map(|dir| LogOp::FsyncDir { dir }),
        1 => Just(LogOp::Sync),
    ]
}

/// By definition: each directory's entries as of its last fsync (or sync), each
/// file's bytes as of its last fsync (or sync), new nodes empty.
fn reference(log: &Log, k: usize) -> Tree {
    let ops = &log.ops()[..k];
    let last = |pred: &dyn Fn(&LogOp) -> bool| {
        ops.iter()
            .rposition(|o| pred(o) || matches!(o, LogOp::Sync))
    };
    let everything = log.volatile_state(k);
    let mut ids: Vec<u64> = everything
        .nodes
        .keys()
        .chain(log.initial().nodes.keys())
        .copied()
        .collect();
    ids.sort();
    ids.dedup();
    let mut tree = Tree {
        nodes: Default::default(),
        root: ROOT,
    };
    for id in ids {
        let is_dir = matches!(
            everything.nodes.get(&id).or(log.initial().nodes.get(&id)),
            Some(Node::Dir(_))
        );
        let synced = if is_dir {
            last(&|o| matches!(o, LogOp::FsyncDir { dir } if *dir == id))
        } else {
            last(&|o| matches!(o, LogOp::Fsync { node, .. } if *node == id))
        };
        let node = match synced {
            Some(t) => log.volatile_state(t + 1).nodes.get(&id).cloned(),
            None => log.initial().nodes.get(&id).cloned(),
        };
        let node = node.unwrap_or(if is_dir {
            Node::Dir(BTreeMap::new())
        } else {
            Node::File(Vec::new())
        });
        tree.nodes.insert(id, node);
    }
    tree
}

/// A log of the ops that would succeed on a real filesystem, with rename's nodes
/// filled in from the state at that point (failed calls are never logged).
fn build(ops: Vec<LogOp>) -> Log {
    let mut log = Log::new(initial());
    let mut now = initial();
    let entry = |t: &Tree, dir: u64, name: &str| match t.nodes.get(&dir) {
        Some(Node::Dir(e)) => e.get(name).copied(),
        _ => None,
    };
    for op in ops {
        let op = match op {
            LogOp::Create {
                dir,
                ref name,
                node,
                ..
            } => {
                if entry(&now, dir, name).is_some() || now.nodes.contains_key(&node) {
                    continue;
                }
                op
            }
            LogOp::Link {
                dir,
                ref name,
                node,
            } => {
                if entry(&now, dir, name).is_some()
                    || !matches!(now.nodes.get(&node), Some(Node::File(_)))
                {
                    continue;
                }
                op
            }
            LogOp::Remove { dir, ref name } => {
                if entry(&now, dir, name).is_none() {
                    continue;
                }
                op
            }
            LogOp::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
                exchanged,
                ..
            } => {
                let Some(node) = entry(&now, from_dir, &from_name) else {
                    continue;
                };
                let other = entry(&now, to_dir, &to_name);
                let exchanged = match (exchanged, other) {
                    (Some(_), Some(o)) => Some(o),
                    (Some(_), None) => continue,
                    (None, _) => None,
                };
                LogOp::Rename {
                    from_dir,
                    from_name,
                    to_dir,
                    to_name,
                    node,
                    exchanged,
                }
            }
            LogOp::Write { node, .. } | LogOp::SetLen { node, .. } | LogOp::Fsync { node, .. } => {
                if !matches!(now.nodes.get(&node), Some(Node::File(_))) {
                    continue;
                }
                op
            }
            other => other,
        };
        now.apply(&op);
        log.push(op);
    }
    log
}

fn reachable(tree: &Tree) -> Vec<(String, Node)> {
    tree.walk()
        .into_iter()
        .map(|(p, n)| (p, n.clone()))
        .collect()
}

proptest! {
    #![proptest_config(common::seeded(256))]
    #[test]
    fn durable_state_matches_the_reference(ops in prop::collection::vec(op(), 0..12)) {
        let log = build(ops);
        for k in 0..=log.ops().len() {
            prop_assert_eq!(reachable(&log.durable_state(k)), reachable(&reference(&log, k)), "k = {}", k);
        }
    }

    #[test]
    fn keeping_every_pending_op_is_the_no_crash_state(ops in prop::collection::vec(op(), 0..12)) {
        let log = build(ops);
        let k = log.ops().len();
        let all: BTreeMap<usize, Keep> = log.pending(k).into_iter().map(|i| (i, Keep::Whole)).collect();
        prop_assert_eq!(reachable(&log.state_with(k, &all)), reachable(&log.volatile_state(k)));
    }
}

#[test]
fn a_rename_needs_both_parents_synced() {
    let mut log = Log::new(initial());
    log.push(LogOp::Fsync {
        node: 10,
        datasync: false,
    });
    log.push(LogOp::Rename {
        from_dir: ROOT,
        from_name: "a".into(),
        to_dir: SUB,
        to_name: "a".into(),
        node: 10,
        exchanged: None,
    });
    log.push(LogOp::FsyncDir { dir: SUB });
    assert_eq!(
        log.pending(3),
        vec![1],
        "only one parent synced: still pending"
    );
    log.push(LogOp::FsyncDir { dir: ROOT });
    assert!(log.pending(4).is_empty());
    assert!(log.durable_state(4).lookup("a").is_none());
    assert_eq!(
        log.durable_state(4).lookup("d/a").unwrap().data().unwrap(),
        b"old"
    );
}

#[test]
fn torn_writes_split_at_sector_boundaries() {
    let mut log = Log::new(initial());
    log.push(LogOp::Write {
        node: 10,
        offset: 1000,
        data: vec![7; 10_000],
    });
    assert_eq!(log.tears(0, 4096), vec![3096, 7192]);
}
