//! A fraction on the command line, as a number or a percentage: gate's
//! `--max-drop` and budgets, compare's `--effect`.

/// A value that is not a fraction; clap names the flag.
#[derive(Debug, thiserror::Error)]
pub enum FractionError {
    #[error("`{text}` is not a number or a percentage (e.g. 10% or 0.1)")]
    NotANumber {
        text: String,
        source: std::num::ParseFloatError,
    },
    #[error("`{0}` must be zero or more")]
    OutOfRange(String),
    /// `10` is almost always meant as 10%, and read as a fraction it would
    /// let cost grow elevenfold (or tolerate any drop).
    #[error(
        "`{text}` as a fraction is {percent}%; write {text}% for {text} percent \
         (or {percent}% if that is meant)"
    )]
    Ambiguous { text: String, percent: f64 },
}

/// `0.1` or `10%`; zero or more. A bare number above 1 is refused: `10`
/// is almost always meant as 10%.
pub fn parse_fraction(text: &str) -> Result<f64, FractionError> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent, 100.0),
        None => (text, 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|source| FractionError::NotANumber {
            text: text.to_string(),
            source,
        })?;
    let value = value / scale;
    if !(value.is_finite() && value >= 0.0) {
        return Err(FractionError::OutOfRange(text.to_string()));
    }
    if scale == 1.0 && value > 1.0 {
        return Err(FractionError::Ambiguous {
            text: text.to_string(),
            percent: value * 100.0,
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::parse_fraction;

    #[test]
    fn a_budget_is_a_fraction_or_a_percentage_and_a_bare_ten_is_refused() {
        assert_eq!(parse_fraction("0.1").ok(), Some(0.1));
        assert_eq!(parse_fraction("10%").ok(), Some(0.1));
        assert_eq!(parse_fraction("250%").ok(), Some(2.5));
        assert_eq!(parse_fraction("1").ok(), Some(1.0));
        let refused = parse_fraction("10").err().map(|e| e.to_string());
        assert_eq!(
            refused.as_deref(),
            Some(
                "`10` as a fraction is 1000%; write 10% for 10 percent (or 1000% if that is meant)"
            )
        );
        assert!(parse_fraction("-5%").is_err());
        assert!(parse_fraction("ten").is_err());
    }
}
