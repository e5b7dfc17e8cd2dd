//! Sign-in: OAuth 2.1 + PKCE on a loopback port ([`oauth`]), where secrets live
//! ([`store`]), and provider keys ([`keys`]). No client secret is compiled in, and no
//! secret ever appears in output, logs, errors or `Debug`.

pub mod assertion;
pub mod audit_key;
pub mod bearer;
pub mod keys;
pub mod mcp;
pub mod oauth;
pub mod store;
pub mod vault;

use std::fmt;

/// A secret value: shown as `***` by `Debug`, with no `Display`, so it cannot slip into
/// a message by accident. Read it with [`Secret::expose`] where it is really used.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The first and last characters around `…`, for `edgar account`; short secrets
    /// show nothing.
    pub fn masked(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        // Four characters at each end only when that is at most a quarter of the key.
        if chars.len() < 32 {
            return "****".into();
        }
        let head: String = chars[..4].iter().collect();
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("{head}…{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The sign-in layer's error. Never carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No secret store can be used; the reason says why, honestly.
    #[error("no credential store: {0}")]
    NoStore(String),
    #[error("the credential store failed: {0}")]
    Store(String),
    #[error("the sign-in redirect was refused: {0}")]
    Redirect(String),
    #[error("{0}")]
    Loopback(String),
    #[error("no key for provider '{provider}': {tried}")]
    NoKey { provider: String, tried: String },
    #[error("api_key_command for '{provider}' failed: {reason}")]
    KeyCommand { provider: String, reason: String },
    #[error("{0}")]
    Config(String),
    /// Finding where and how to sign in to an MCP server failed.
    #[error("{0}")]
    Discovery(String),
    /// The authorization server refused a token request.
    #[error("the authorization server refused: {0}")]
    Token(String),
    /// The stored sign-in is gone or no longer accepted.
    #[error("{0}")]
    NeedsLogin(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let s = Secret::new("sk-ant-api03-very-secret-value-xyz-1234");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.masked(), "sk-a…1234");
        // Short keys show nothing: eight characters of sixteen would be half the key.
        for short in [
            "short",
            "0123456789abcdef",
            "0123456789abcdef0123456789abcde",
        ] {
            assert_eq!(Secret::new(short).masked(), "****", "{short}");
        }
    }
}
