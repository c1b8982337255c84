//! A request's query string, and the URLs the pages link to: every value
//! percent-encoded here, so nothing a trace holds can change what a link
//! is (a task named `javascript:…` is a value of `task=`, never a URL).

use url::form_urlencoded;

/// A query string's pairs, in order; a name may repeat (`outcome=a&outcome=b`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    pub(crate) fn parse(query: Option<&str>) -> Params {
        Params(
            query
                .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                .unwrap_or_default(),
        )
    }

    /// The first non-empty value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, value)| key == name && !value.is_empty())
            .map(|(_, value)| value.as_str())
    }

    /// Every non-empty value of `name`, in order.
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(key, value)| key == name && !value.is_empty())
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// These pairs without `name`'s.
    pub(crate) fn without(&self, name: &str) -> Params {
        Params(
            self.0
                .iter()
                .filter(|(key, _)| key != name)
                .cloned()
                .collect(),
        )
    }

    /// These pairs with `name` set to `value` alone.
    pub(crate) fn with(&self, name: &str, value: &str) -> Params {
        let mut params = self.without(name);
        params.0.push((name.to_string(), value.to_string()));
        params
    }

    /// `path` with these pairs (those with a value) as its query.
    pub(crate) fn url(&self, path: &str) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (key, value) in self.0.iter().filter(|(_, value)| !value.is_empty()) {
            query.append_pair(key, value);
        }
        let query = query.finish();
        if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        }
    }
}

/// `path?name=value&…`, each value encoded.
pub(crate) fn link(path: &str, pairs: &[(&str, &str)]) -> String {
    Params(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    )
    .url(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_encoded() {
        let url = link(
            "/trials",
            &[("task", "a&b=<c> \"d\""), ("q", "javascript:x")],
        );
        assert_eq!(url, "/trials?task=a%26b%3D%3Cc%3E+%22d%22&q=javascript%3Ax");
        let params = Params::parse(url.split_once('?').map(|(_, q)| q));
        assert_eq!(params.get("task"), Some("a&b=<c> \"d\""));
        assert_eq!(params.get("q"), Some("javascript:x"));
    }

    #[test]
    fn repeated_and_empty_values() {
        let params = Params::parse(Some("outcome=a&outcome=&outcome=b&page=2"));
        assert_eq!(params.all("outcome"), ["a", "b"]);
        assert_eq!(params.get("missing"), None);
        assert_eq!(
            params.with("page", "3").url("/t"),
            "/t?outcome=a&outcome=b&page=3"
        );
        assert_eq!(params.without("outcome").url("/t"), "/t?page=2");
    }
}
