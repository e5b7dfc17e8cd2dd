//! Client sessions without server state: the `Mcp-Session-Id` handed out at
//! `initialize` is what the client declared it can answer (elicitation, sampling),
//! sealed and bound to the caller, so the gateway keeps nothing per session, any
//! replica holding the same key opens it (the team's state key), and a client presenting
//! one that does not open (forged, another user's, from before a restart with a fresh
//! key) is told to initialize again (404), as the transport says.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::gateway::questions::Answers;
use crate::seal::Sealer;

/// What a session id says: its version, then one letter per capability.
const VERSION: u8 = 1;

/// Longest session id opened: ours are about 40 characters.
const MAX_ID_LEN: usize = 256;

/// Seals and opens session ids with one key.
#[derive(Debug)]
pub struct Sessions(Sealer);

impl Sessions {
    pub fn new(sealer: Sealer) -> Sessions {
        Sessions(sealer)
    }

    /// A session id for `who` (a team user's `sub`, empty for the local user) whose client
    /// takes `answers`; `None` only if the OS random source fails.
    pub fn issue(&self, who: &str, answers: Answers) -> Option<String> {
        let mut plain = vec![VERSION];
        for (declared, letter) in [
            (answers.elicitation, b'e'),
            (answers.url, b'u'),
            (answers.sampling, b's'),
            (answers.roots, b'r'),
        ] {
            if declared {
                plain.push(letter);
            }
        }
        let sealed = self.0.seal(&["mcp-session", who], &plain)?;
        Some(URL_SAFE_NO_PAD.encode(sealed))
    }

    /// What session `id` says, if it is one of ours for `who`.
    pub fn open(&self, who: &str, id: &str) -> Option<Answers> {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        let sealed = URL_SAFE_NO_PAD.decode(id).ok()?;
        let plain = self.0.open(&["mcp-session", who], &sealed)?;
        let (&version, letters) = plain.split_first()?;
        if version != VERSION {
            return None;
        }
        Some(Answers {
            elicitation: letters.contains(&b'e'),
            url: letters.contains(&b'u'),
            sampling: letters.contains(&b's'),
            roots: letters.contains(&b'r'),
            // A session of the handshake era has no task surface: edgar follows tasks.
            tasks: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_opens_for_its_caller_only_and_says_what_was_declared() {
        let sessions = Sessions::new(Sealer::new(&[3; 32]));
        let all = Answers {
            elicitation: true,
            url: false,
            sampling: true,
            roots: true,
            tasks: false,
        };
        let id = sessions.issue("ada", all).unwrap_or_default();
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert_eq!(sessions.open("ada", &id), Some(all));
        assert_eq!(sessions.open("bob", &id), None, "another user's");
        assert_eq!(sessions.open("", &id), None);
        let none = sessions.issue("", Answers::default()).unwrap_or_default();
        assert_eq!(sessions.open("", &none), Some(Answers::default()));
        let other = Sessions::new(Sealer::new(&[4; 32]));
        assert_eq!(other.open("ada", &id), None, "another key: a restart");
        for bad in ["", "x", "!!!!", &"A".repeat(400), &id[1..]] {
            assert_eq!(sessions.open("ada", bad), None, "{bad}");
        }
    }
}
