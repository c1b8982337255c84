//! "Did you mean": the known names closest to one that is not known, for
//! the messages that meet a typo (a query's column, a task file's key).

/// The names closest to `unknown` (a typo, or one word of a longer name),
/// best first, at most three, each once.
pub fn nearest<'a>(unknown: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let unknown = unknown.to_ascii_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .into_iter()
        .map(|name| (strsim::jaro_winkler(&unknown, name), name))
        .filter(|(score, name)| *score >= 0.85 || (unknown.len() >= 4 && name.contains(&unknown)))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut near: Vec<String> = Vec::new();
    for (_, name) in scored {
        if near.len() < 3 && !near.iter().any(|n| n == name) {
            near.push(name.to_string());
        }
    }
    near
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_none() {
        let names = ["memory_mb", "storage_mb", "cpus", "timeout_sec"];
        assert_eq!(nearest("memroy_mb", names), vec!["memory_mb"]);
        assert_eq!(nearest("timeout", names), vec!["timeout_sec"]);
        assert!(nearest("colour", names).is_empty());
    }
}
