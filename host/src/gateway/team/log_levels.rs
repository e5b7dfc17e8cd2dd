//! Each team user's own log level. `logging/setLevel` at a team gateway is never passed
//! upstream, where one user's level would be every user's; it filters the log messages
//! that user's own calls bring back instead. Kept per user in this replica's memory, not
//! in the shared state: calls another replica runs bring every level (more, never less).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::mcp::protocol::{LOG_LEVELS, log_severity};

/// The least severe level each user asked to hear, by `sub`.
#[derive(Default)]
pub struct LogLevels(Mutex<HashMap<String, u8>>);

impl LogLevels {
    /// Sets `user`'s level; an unknown level is refused, naming the ones there are.
    pub fn set(&self, user: &str, level: &str) -> Result<(), String> {
        let Some(s) = log_severity(level) else {
            return Err(format!(
                "{} is not a log level (one of {})",
                crate::text::shown(level),
                LOG_LEVELS.join(", ")
            ));
        };
        self.levels().insert(user.to_owned(), s);
        Ok(())
    }

    /// The least severe level `user` hears; `None` when they set none (they hear all).
    pub fn least(&self, user: &str) -> Option<u8> {
        self.levels().get(user).copied()
    }

    fn levels(&self) -> std::sync::MutexGuard<'_, HashMap<String, u8>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_has_their_own_level_and_a_bad_one_is_refused() {
        let levels = LogLevels::default();
        assert_eq!(levels.least("ada"), None);
        assert_eq!(levels.set("ada", "warning"), Ok(()));
        assert_eq!(levels.set("bob", "debug"), Ok(()));
        assert_eq!(levels.least("ada"), Some(3));
        assert_eq!(levels.least("bob"), Some(0));
        let e = levels.set("ada", "loud").err().unwrap_or_default();
        assert!(e.contains("'loud' is not a log level"), "{e}");
        assert_eq!(
            levels.least("ada"),
            Some(3),
            "a refused level changes nothing"
        );
        assert_eq!(log_severity("emergency"), Some(7));
        assert_eq!(log_severity("WARNING"), None);
    }
}
