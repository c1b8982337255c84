//! A count with its noun, for the sentences every crate prints ("1 trial",
//! "2 trials", "1 retry", "3 retries"): the nouns tack counts are regular.

use std::fmt;

/// `n` followed by `noun`, in the plural unless `n` is one.
pub fn count<N>(n: N, noun: &str) -> String
where
    N: fmt::Display + PartialEq + From<u8>,
{
    if n == N::from(1) {
        return format!("{n} {noun}");
    }
    // A consonant and `y` (retry, entry) make `ies`; the rest take an `s`.
    let mut chars = noun.chars().rev();
    match (chars.next(), chars.next()) {
        (Some('y'), Some(before)) if !"aeiou".contains(before) => {
            format!("{n} {}ies", &noun[..noun.len() - 1])
        }
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1usize, "trial"), "1 trial");
        assert_eq!(count(0usize, "trial"), "0 trials");
        assert_eq!(count(2u64, "shard run"), "2 shard runs");
        assert_eq!(count(3u32, "retry"), "3 retries");
        assert_eq!(count(1u32, "retry"), "1 retry");
        assert_eq!(count(2u32, "day"), "2 days");
    }
}
