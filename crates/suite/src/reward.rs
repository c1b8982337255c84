//! The rewards a check leaves in its reward directory, the Harbor way:
//! `reward.txt` holding one number, or `reward.json` holding an object of
//! named numbers (`{"correctness": 1, "performance": 0}`).

use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reward {
    /// Neither file: the check's exit code decides.
    Absent,
    /// Each reward by name (`reward` for reward.txt), sorted by name.
    Values(Vec<(String, f64)>),
    /// A file that is there but says no number: the check fails, saying why.
    Unreadable(String),
}

impl Reward {
    pub(crate) fn describe(values: &[(String, f64)]) -> String {
        values
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

pub(crate) fn read_reward(dir: &Path) -> Reward {
    match read_untrusted(&dir.join("reward.json")) {
        Ok(Some(body)) => return from_json(&body),
        Ok(None) => {}
        Err(why) => return Reward::Unreadable(format!("reward.json {why}")),
    }
    match read_untrusted(&dir.join("reward.txt")) {
        Ok(Some(body)) => match body.trim().parse::<f64>() {
            Ok(value) if value.is_finite() => Reward::Values(vec![("reward".to_string(), value)]),
            _ => Reward::Unreadable(format!(
                "reward.txt holds `{}`, not a number",
                body.trim().chars().take(80).collect::<String>()
            )),
        },
        Ok(None) => Reward::Absent,
        Err(why) => Reward::Unreadable(format!("reward.txt {why}")),
    }
}

/// A reward file is written by the check, which runs the agent's code: a
/// link in its place is not followed, and only so much is read.
fn read_untrusted(path: &Path) -> Result<Option<String>, String> {
    tack_sandbox::read_left_file(path, 64 * 1024)
}

fn from_json(body: &str) -> Reward {
    let value: serde_json::Value = match serde_json::from_str(body) {
        Ok(value) => value,
        Err(e) => return Reward::Unreadable(format!("reward.json is not JSON: {e}")),
    };
    match value {
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(v) => Reward::Values(vec![("reward".to_string(), v)]),
            None => Reward::Unreadable("reward.json holds a number out of range".to_string()),
        },
        serde_json::Value::Object(map) if !map.is_empty() => {
            let mut values = Vec::with_capacity(map.len());
            for (name, value) in map {
                let number = match &value {
                    serde_json::Value::Number(n) => n.as_f64(),
                    serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
                    _ => None,
                };
                match number {
                    Some(v) => values.push((name, v)),
                    None => {
                        return Reward::Unreadable(format!(
                            "reward.json: `{name}` is {value}, not a number"
                        ));
                    }
                }
            }
            Reward::Values(values)
        }
        other => Reward::Unreadable(format!(
            "reward.json holds {other}; expected an object of named numbers"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(files: &[(&str, &str)]) -> Reward {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in files {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        read_reward(dir.path())
    }

    #[test]
    fn reads_text_and_json_rewards_and_says_what_is_wrong() {
        assert_eq!(read(&[]), Reward::Absent);
        assert_eq!(
            read(&[("reward.txt", "1\n")]),
            Reward::Values(vec![("reward".into(), 1.0)])
        );
        assert_eq!(
            read(&[("reward.json", r#"{"correctness": 1, "performance": 0.5}"#)]),
            Reward::Values(vec![
                ("correctness".into(), 1.0),
                ("performance".into(), 0.5)
            ])
        );
        let Reward::Unreadable(why) = read(&[("reward.txt", "yes")]) else {
            panic!()
        };
        assert!(why.contains("`yes`"), "{why}");
        let Reward::Unreadable(why) = read(&[("reward.json", r#"{"a": "x"}"#)]) else {
            panic!()
        };
        assert!(why.contains("`a`"), "{why}");
        assert!(matches!(
            read(&[("reward.json", "[1]")]),
            Reward::Unreadable(_)
        ));
    }

    /// A check could leave a link to a host file in its reward directory;
    /// tack reads the directory on the host, so the link is not followed.
    #[test]
    fn a_reward_that_is_a_link_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "1").unwrap();
        let rewards = dir.path().join("rewards");
        std::fs::create_dir(&rewards).unwrap();
        std::os::unix::fs::symlink(&secret, rewards.join("reward.txt")).unwrap();
        let Reward::Unreadable(why) = read_reward(&rewards) else {
            panic!("a linked reward was read")
        };
        assert!(why.contains("reward.txt is a link"), "{why}");
    }
}
