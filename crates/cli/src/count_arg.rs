//! Counts given on the command line (`--jobs`, `--reps`, the limits). One
//! below what the flag can mean is refused, naming the least it takes,
//! rather than quietly raised (`-j 0` ran one at a time) or taken at its
//! word (`--max-steps 0` stopped the agent before its first call).

/// clap's parser for a whole number of at least `MIN`, as a `T`.
pub fn at_least<const MIN: u64, T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    let value: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number"))?;
    if value < MIN {
        return Err(format!("must be at least {MIN}"));
    }
    T::try_from(value).map_err(|_| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_below_the_least_or_not_a_count_is_refused() {
        assert_eq!(at_least::<1, usize>("4"), Ok(4));
        assert_eq!(
            at_least::<1, usize>("0"),
            Err("must be at least 1".to_string())
        );
        assert_eq!(at_least::<100, usize>("100"), Ok(100));
        assert!(at_least::<1, u32>("-1").is_err());
        assert!(at_least::<1, u32>("1e3").is_err());
        assert_eq!(
            at_least::<1, u32>("4294967296"),
            Err("`4294967296` is too large".to_string())
        );
    }
}
