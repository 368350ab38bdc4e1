//! A persistence model checked against a real filesystem: each violation
//! group a real filesystem showed (`explore --fs`) is looked up, by its
//! checker message, among the groups a model run of the same workload found
//! (`explore` on the recording mount), and judged: did the model say it can
//! happen there?

use serde::{Deserialize, Serialize};

use super::models::FsModel;
use super::report::{is_checker_timeout, Group};

/// What the model run says about one group the real filesystem showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prediction {
    /// The model run has a group with this message that the model allows.
    Predicted,
    /// The model run has this message but says the model never leaves such
    /// a state: the model is wrong (the worst disagreement).
    SaidNever,
    /// The model run has this message and labelled it unknown on the model:
    /// only an approximate rule ruled its states out
    /// ([`super::labels`]), so the model never claimed "never". Not a
    /// verdict against the model; the kernel's evidence that the rule does
    /// not hold here.
    Unknown,
    /// The model run has no group with this message, and it did not check
    /// every state: its budget may not have reached such a state. Not a
    /// verdict on the model.
    NotInModelRun,
    /// The model run checked every state of every crash point and has no
    /// group with this message: the model cannot produce the state (a gap
    /// in the model, as wrong as [`Prediction::SaidNever`]).
    Gap,
    /// The checker was killed for time on these states: what it would have
    /// said, so which group they belong to, is unknown (a loaded machine or
    /// a slow checker). Not a verdict on the model.
    TimedOut,
}

/// What a model run covered, and the settings that decided its states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRunScope {
    /// Every state of every crash point was checked.
    pub exhaustive: bool,
    /// Distinct states it checked.
    pub states: usize,
    /// The size its writes tore at, if they could.
    pub torn_sector: Option<u64>,
    /// Whether its writes could persist as their size alone.
    #[serde(default)]
    pub size_only: bool,
}

impl Prediction {
    /// Whether the judgement says the model is wrong.
    pub fn model_is_wrong(self) -> bool {
        matches!(self, Prediction::SaidNever | Prediction::Gap)
    }

    /// How the report says it, for `model`, of a model run with `scope`.
    pub fn describe(self, model: FsModel, scope: &ModelRunScope) -> String {
        match self {
            Prediction::Predicted => format!("predicted by the {model} model"),
            Prediction::SaidNever => format!(
                "MODEL SAYS NEVER: the model run has this message but says the {model} model \
                 never leaves it (the model is wrong here)"
            ),
            Prediction::Unknown => format!(
                "unknown to the model: the model run has this message and labelled it unknown \
                 on {model} (only an approximate rule of the model ruled it out, so it did not \
                 say never): the kernel shows that rule does not hold here; not counted against \
                 the model"
            ),
            Prediction::NotInModelRun => format!(
                "not in the model run (it checked {} states but not every state of every crash \
                 point, so its budget may not have reached such a state: not a verdict on the \
                 model; give it a larger --max-states){}",
                scope.states,
                settings_note(scope)
            ),
            Prediction::Gap => format!(
                "MODEL GAP: the model run checked every state of every crash point and none \
                 gave this message: the {model} model cannot produce it (the model is missing \
                 a behaviour of the kernel){}",
                settings_note(scope)
            ),
            Prediction::TimedOut => "no answer: the checker timed out on these states, so \
                 what they hold is unknown and the model run cannot be asked about them; not a \
                 verdict on the model (on a loaded machine, run again or raise --timeout)"
                .to_string(),
        }
    }
}

/// The model run's judgement of each of `real`'s groups, in their order, and
/// the index of the model run's group with the same message.
pub fn predictions(
    real: &[Group],
    model_run: &[Group],
    model: FsModel,
    scope: &ModelRunScope,
) -> Vec<(Prediction, Option<usize>)> {
    real.iter()
        .map(
            |g| match model_run.iter().position(|m| m.message == g.message) {
                _ if is_checker_timeout(&g.message) => (Prediction::TimedOut, None),
                None if scope.exhaustive => (Prediction::Gap, None),
                None => (Prediction::NotInModelRun, None),
                Some(i) if allows(&model_run[i], model) => (Prediction::Predicted, Some(i)),
                Some(i) if unknown(&model_run[i], model) => (Prediction::Unknown, Some(i)),
                Some(i) => (Prediction::SaidNever, Some(i)),
            },
        )
        .collect()
}

/// What the model run's settings left out, if anything.
fn settings_note(scope: &ModelRunScope) -> String {
    match (scope.torn_sector, scope.size_only) {
        (Some(_), true) => String::new(),
        (None, _) => "; the model run's writes did not tear (--whole-writes): torn writes were \
                      not among its states"
            .to_string(),
        (Some(_), false) => "; the model run's writes could not persist as their size alone \
                             (--whole-writes or an older slowfs): such states were not among \
                             its states"
            .to_string(),
    }
}

/// The model run's groups the model allows that `real` did not show (one
/// timeline each: "not seen", not "never").
pub fn not_shown<'a>(real: &[Group], model_run: &'a [Group], model: FsModel) -> Vec<&'a Group> {
    model_run
        .iter()
        .filter(|m| allows(m, model) && !real.iter().any(|g| g.message == m.message))
        .collect()
}

/// Whether the model run labelled `group` possible under `model`.
pub fn allows(group: &Group, model: FsModel) -> bool {
    group.models.iter().any(|m| m == model.name())
}

/// Whether the model run labelled `group` unknown on `model`.
pub fn unknown(group: &Group, model: FsModel) -> bool {
    group.unknown.iter().any(|m| m == model.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(message: &str, models: &[&str]) -> Group {
        Group {
            message: message.into(),
            count: 1,
            points: "1".into(),
            patterns: Vec::new(),
            examples: Vec::new(),
            models: models.iter().map(|m| m.to_string()).collect(),
            unknown: Vec::new(),
        }
    }

    #[test]
    fn each_real_group_is_predicted_said_never_or_unknown_to_the_model_run() {
        let model_run = [
            group("config is ''", &["strict", "xfs", "btrfs"]),
            group("row # missing", &["strict", "xfs", "ext4-ordered", "btrfs"]),
            group("object empty", &["strict"]),
        ];
        let real = [
            group("config is ''", &[]),
            group("row # missing", &[]),
            group("malformed", &[]),
        ];
        let partial = ModelRunScope::default();
        let on_ext4 = predictions(&real, &model_run, FsModel::Ext4Ordered, &partial);
        assert_eq!(
            on_ext4,
            [
                (Prediction::SaidNever, Some(0)),
                (Prediction::Predicted, Some(1)),
                (Prediction::NotInModelRun, None),
            ]
        );
        assert_eq!(
            predictions(&real[..1], &model_run, FsModel::Xfs, &partial),
            [(Prediction::Predicted, Some(0))]
        );
        // A model run that checked every state and never said it: a gap.
        let exhaustive = ModelRunScope {
            exhaustive: true,
            ..partial
        };
        assert_eq!(
            predictions(&real[2..], &model_run, FsModel::Ext4Ordered, &exhaustive),
            [(Prediction::Gap, None)]
        );
        // Unknown on ext4-ordered: said neither can nor never.
        let mut unsure = model_run[0].clone();
        unsure.unknown = vec!["ext4-ordered".into()];
        assert_eq!(
            predictions(&real[..1], &[unsure], FsModel::Ext4Ordered, &exhaustive),
            [(Prediction::Unknown, Some(0))]
        );
        assert!(!Prediction::Unknown.model_is_wrong());
        // A checker killed for time: no answer, whatever the model run has.
        let timed_out = group("checker timed out after # (restarted)", &[]);
        let mut said_never = timed_out.clone();
        said_never.models = vec!["strict".into()];
        for model_run in [&[][..], &[said_never][..]] {
            assert_eq!(
                predictions(
                    std::slice::from_ref(&timed_out),
                    model_run,
                    FsModel::Ext4Ordered,
                    &exhaustive
                ),
                [(Prediction::TimedOut, None)]
            );
        }
        assert!(!Prediction::TimedOut.model_is_wrong());
        let unseen: Vec<&str> = not_shown(&real, &model_run, FsModel::Strict)
            .iter()
            .map(|g| g.message.as_str())
            .collect();
        assert_eq!(unseen, ["object empty"]);
    }
}
