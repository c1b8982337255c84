/// Variables passed through from tack's own environment. Everything else —
/// API keys above all — is dropped before a command starts.
pub const ALLOWED_ENV_VARS: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER"];

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The base environment of every command.
pub fn scrubbed_environment() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = ALLOWED_ENV_VARS
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
        .collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".to_string(), DEFAULT_PATH.to_string()));
    }
    // Keep workspaces free of bytecode caches the agent did not write.
    env.push(("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()));
    env
}
