//! Names that become one component of a path (a run id, a trial id): read
//! from files tack did not necessarily write (a run copied from elsewhere,
//! a merged shard), so checked before any path is made of them.

/// Whether `name` is safe as a single file name: not empty, not `.` or
/// `..`, no `/` or `\`, no control characters. (`a..b` and `.x` name a
/// file of the directory they are joined to, nothing above it.)
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::is_plain_name;

    #[test]
    fn a_plain_name_is_one_visible_component() {
        assert!(is_plain_name("20261207-121519-demo-1e66"));
        assert!(is_plain_name("sim-full--leap-year--0"));
        assert!(is_plain_name("nightly-0..3"));
        assert!(is_plain_name(".merged"));
        for bad in ["", ".", "a/b", "..", "../x", "a\\b", "x\ny", "/abs"] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
    }
}
