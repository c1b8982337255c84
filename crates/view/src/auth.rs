//! The access token: made from the kernel's randomness, carried once in the
//! printed URL, then in a cookie the browser sends to this origin only.

use std::io::Read;

use crate::ViewError;

/// The cookie that carries the token after the first visit, its name
/// followed by `_` and the viewer's port.
pub(crate) const COOKIE: &str = "tack_view_token";

/// A fresh token: 128 random bits as 32 hex digits.
pub fn access_token() -> Result<String, ViewError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|source| ViewError::Token { source })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `given` is `token`, comparing every byte whatever differs first
/// (the time to answer says nothing about how much of a guess was right).
pub(crate) fn same_token(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// The token in a `Cookie` header's value, if it has the cookie `cookie`.
pub(crate) fn token_in_cookies<'a>(header: &'a str, cookie: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == cookie)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex() {
        let a = access_token().unwrap();
        let b = access_token().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn only_the_same_token_passes() {
        assert!(same_token("abcd", "abcd"));
        assert!(!same_token("abce", "abcd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("", "abcd"));
    }

    #[test]
    fn the_token_is_found_among_cookies() {
        let header = format!("other=1; {COOKIE}=f00d; x=y");
        assert_eq!(token_in_cookies(&header, COOKIE), Some("f00d"));
        assert_eq!(token_in_cookies("other=1", COOKIE), None);
    }
}
