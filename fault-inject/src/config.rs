//! The three sources of rules — profiles, a TOML file, `--set` strings — merged into one spec.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::parse::{parse_rule, RuleError};
use crate::profile::{profile, PROFILES};
use crate::rule::Rule;

/// Everything a mount needs to know about faults: an optional seed and the rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSpec {
    /// The run seed, when one was fixed.
    pub seed: Option<u64>,
    /// Rules, in the order given (profile rules first).
    pub rules: Vec<Rule>,
}

/// A config, a profile name or a rule that could not be used.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Io {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    Toml {
        /// The file.
        path: String,
        /// The TOML parser's message (with line and column).
        message: String,
    },
    /// No built-in profile has this name.
    UnknownProfile(String),
    /// A rule did not parse.
    Rule {
        /// Where the rule came from (`--set #2`, `slow.toml [[rule]] #1`).
        origin: String,
        /// The parse error.
        error: RuleError,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io { path, error } => write!(f, "cannot read config {path}: {error}"),
            ConfigError::Toml { path, message } => {
                write!(f, "{path} is not a valid config: {message}")
            }
            ConfigError::UnknownProfile(name) => {
                let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
                write!(
                    f,
                    "unknown profile '{name}' (built-in profiles: {}; `slowfs profiles` describes them)",
                    names.join(", ")
                )
            }
            ConfigError::Rule { origin, error } => write!(f, "{origin}: {error}"),
        }
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    seed: Option<u64>,
    profile: Option<String>,
    #[serde(default)]
    rules: Vec<String>,
    #[serde(default)]
    rule: Vec<toml::Table>,
}

impl FaultSpec {
    /// Adds a built-in profile's rules.
    pub fn add_profile(&mut self, name: &str) -> Result<(), ConfigError> {
        let profile = profile(name).ok_or_else(|| ConfigError::UnknownProfile(name.into()))?;
        self.rules.extend(profile.parsed_rules());
        Ok(())
    }

    /// Adds one rule string; `origin` says where it came from, for errors.
    pub fn add_rule(&mut self, origin: &str, text: &str) -> Result<(), ConfigError> {
        let rule = parse_rule(text).map_err(|error| ConfigError::Rule {
            origin: origin.to_string(),
            error,
        })?;
        self.rules.push(rule);
        Ok(())
    }

    /// Adds a TOML config file's seed, profile and rules.
    pub fn add_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
            path: shown.clone(),
            error,
        })?;
        self.add_toml(&shown, &text)
    }

    /// Adds a config from TOML text. See the crate docs for the format.
    pub fn add_toml(&mut self, name: &str, text: &str) -> Result<(), ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Toml {
            path: name.to_string(),
            message: e.to_string(),
        })?;
        if file.seed.is_some() {
            self.seed = file.seed;
        }
        if let Some(profile) = &file.profile {
            self.add_profile(profile)?;
        }
        for (i, text) in file.rules.iter().enumerate() {
            self.add_rule(&format!("{name}: rules[{i}]"), text)?;
        }
        for (i, table) in file.rule.iter().enumerate() {
            let origin = format!("{name}: [[rule]] #{}", i + 1);
            let text = table_to_rule_text(table).map_err(|message| ConfigError::Toml {
                path: origin.clone(),
                message,
            })?;
            self.add_rule(&origin, &text)?;
        }
        Ok(())
    }
}

/// Turns a `[[rule]]` table into the equivalent rule string, so one parser serves both.
fn table_to_rule_text(table: &toml::Table) -> Result<String, String> {
    let ops = match table.get("ops") {
        Some(toml::Value::String(ops)) => ops.clone(),
        Some(toml::Value::Array(ops)) => ops
            .iter()
            .map(|op| op.as_str().map(str::to_string).ok_or("ops must be strings"))
            .collect::<Result<Vec<_>, _>>()?
            .join(","),
        Some(_) => return Err("ops must be a string (\"read,write\") or a list of strings".into()),
        None => {
            return Err("missing 'ops' (e.g. ops = [\"read\", \"write\"] or ops = \"*\")".into())
        }
    };
    if ops.trim().is_empty() {
        return Err(
            "'ops' is empty: name at least one operation (ops = [\"read\"]) or all (ops = \"*\")"
                .into(),
        );
    }
    let mut words = vec![ops];
    for (key, value) in table.iter().filter(|(key, _)| *key != "ops") {
        match value {
            toml::Value::Boolean(true) => words.push(key.clone()),
            toml::Value::Boolean(false) => {}
            // A glob is one word, spaces and all.
            toml::Value::String(s) if key == "path" && !s.contains('"') => {
                words.push(format!("{key}=\"{s}\""))
            }
            toml::Value::String(s) => words.push(format!("{key}={s}")),
            toml::Value::Integer(i) => words.push(format!("{key}={i}")),
            toml::Value::Float(f) => words.push(format!("{key}={f}")),
            other => return Err(format!("'{key}' has an unsupported value {other}")),
        }
    }
    Ok(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_rules_equal_their_strings() {
        let mut from_toml = FaultSpec::default();
        from_toml
            .add_toml(
                "t.toml",
                r#"
                seed = 9
                rules = ["fsync delay=250ms"]
                [[rule]]
                ops = ["read", "write"]
                path = "**/*.tmp"
                delay = "5ms..20ms"
                p = 0.5
                [[rule]]
                ops = "read"
                hang = true
                [[rule]]
                ops = "write"
                path = "my file ü"
                error = "EIO"
                "#,
            )
            .unwrap();
        let mut from_strings = FaultSpec::default();
        for text in [
            "fsync delay=250ms",
            "read,write path=**/*.tmp delay=5ms..20ms p=0.5",
            "read hang",
            r"write path=my\ file\ ü error=EIO",
        ] {
            from_strings.add_rule("--set", text).unwrap();
        }
        assert_eq!(from_toml.seed, Some(9));
        assert_eq!(from_toml.rules, from_strings.rules);
    }

    #[test]
    fn errors_name_the_origin() {
        let mut spec = FaultSpec::default();
        let err = spec
            .add_toml("t.toml", "[[rule]]\nops = \"read\"\ndelay = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.toml: [[rule]] #1: in rule"), "{err}");
        let err = spec.add_toml("t.toml", "sed = 1").unwrap_err().to_string();
        assert!(err.contains("unknown field"), "{err}");
        let err = spec.add_profile("nsf").unwrap_err().to_string();
        assert!(err.contains("nfs"), "{err}");
    }
}
