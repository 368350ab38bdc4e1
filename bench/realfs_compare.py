#!/usr/bin/env python3
"""bench/realfs_models.sh's judge: compares a model-side `slowfs explore
--json` run with a real-filesystem one (`explore --fs FS --json`).

    realfs_compare.py model MODEL.json
        the model column: groups, then how many can happen on xfs /
        ext4-ordered / btrfs
    realfs_compare.py cell MODEL.json REAL.json FS RSS_KIB NAME GROUPS.md
        a real filesystem's cell, and one line per group the kernel showed
        appended to GROUPS.md, saying whether the model predicted it, as
        `explore --fs --compare-with MODEL.json` judged it in REAL.json: a
        model group with the same checker message labelled possible on FS
        (predicted), the same message but labelled never on FS (MODEL SAYS
        NEVER), the same message labelled unknown on FS (only an
        approximate rule of the model ruled it out: not a verdict against
        the model), no such group in a model run that checked every state
        (MODEL GAP), or no such group in the model's run (the model's own
        timeline and budget did not show it: to look into, not a verdict
        on the model)
"""
import json
import sys

# The persistence model that stands for each real filesystem.
MODEL_OF = {"ext4": "ext4-ordered", "xfs": "xfs", "btrfs": "btrfs"}
VARIANT_NAMES = {"Strict": "strict", "Xfs": "xfs", "Ext4Ordered": "ext4-ordered", "Btrfs": "btrfs"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def model_column(model):
    if model is None:
        return "? (the model run failed)"
    groups = model.get("groups", [])
    on = lambda name, key="models": sum(1 for g in groups if name in g.get(key, []))
    column = f"{len(groups)}: {on('xfs')} / {on('ext4-ordered')} / {on('btrfs')}"
    if any(g.get("unknown") for g in groups):
        column += (f"; unknown on {on('xfs', 'unknown')} / {on('ext4-ordered', 'unknown')} / "
                   f"{on('btrfs', 'unknown')}")
    return column


def cell(model, real, fs, rss_kib, name, groups_file):
    if real is None:
        return "? (the --fs run failed)"
    # The report spells the model as its Rust variant (`Ext4Ordered`); the
    # groups' labels use its name (`ext4-ordered`).
    model_name = (real.get("compared_with") or {}).get("model", MODEL_OF[fs])
    model_name = VARIANT_NAMES.get(model_name, model_name)
    model_can = any(model_name in g.get("models", []) for g in (model or {}).get("groups", []))
    violations = real.get("violations", 0)
    never, gap, unseen, unknown = [], [], [], []
    said = {
        "predicted": f"predicted (the model run's group: can happen on {model_name})",
        "said_never": f"MODEL SAYS NEVER on {model_name}",
        "unknown": f"unknown to the model (the model run's group: unknown on {model_name}, "
                   "ruled out only by an approximate rule)",
        "gap": "MODEL GAP (the model run checked every state and never gave this message)",
        "not_in_model_run": "not in the model's run (its timeline did not show this message)",
    }
    with open(groups_file, "a") as out:
        for g in real.get("groups", []):
            message = g["message"]
            prediction = g.get("model", {}).get("prediction", "not_in_model_run")
            {"said_never": never, "gap": gap, "not_in_model_run": unseen,
             "unknown": unknown}.get(prediction, []).append(message)
            points = g.get("points", "")
            out.write(f"- {name}, real {fs}: \"{message}\" ({g['count']} violations, crash points "
                      f"{points}): {said[prediction]}\n")
    if never:
        verdict = "MODEL SAYS NEVER"
    elif gap:
        verdict = "MODEL GAP"
    elif unseen:
        verdict = f"kernel shows {len(unseen)} group(s) the model's run did not"
    elif unknown:
        verdict = f"kernel shows {len(unknown)} group(s) the model labelled unknown"
    elif violations > 0:
        verdict = "agree"
    elif model_can:
        verdict = "model can, not seen"
    else:
        verdict = "agree"
    states = real.get("states", 0)
    seconds = real.get("seconds") or 0
    rate = f"{states / seconds:.0f}/s" if seconds else "?/s"
    hy = real.get("coverage", {}).get("high_yield_states", [0, 0])
    return (f"{verdict}: {violations} violations in {states} states ({rate}, high-yield "
            f"{hy[0]} of {hy[1]}, {int(rss_kib) // 1024} MiB)")


def main():
    if sys.argv[1] == "model":
        print(model_column(load(sys.argv[2])))
    elif sys.argv[1] == "cell":
        _, _, model, real, fs, rss, name, groups_file = sys.argv
        print(cell(load(model), load(real), fs, rss, name, groups_file))
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}: model or cell")


if __name__ == "__main__":
    main()
