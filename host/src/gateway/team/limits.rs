//! Rate limits (GCRA, the `governor` crate): calls per minute with a burst, for each
//! user and for each tool (across users, which protects the server behind it). A
//! refused call says how long to wait.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};

use super::config::{Rate, RateLimits};

type Keyed =
    RateLimiter<String, governor::state::keyed::DefaultKeyedStateStore<String>, DefaultClock>;

/// Checks made between two sweeps of keys that have been idle long enough to be full.
const SWEEP_EVERY: u32 = 4096;

/// The gateway's limits; a limit the file leaves out is not applied.
pub struct Limits {
    per_user: Option<Keyed>,
    per_tool: Option<Keyed>,
    clock: DefaultClock,
    checks: AtomicU32,
}

/// Which limit refused a call, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub which: &'static str,
    pub retry_after: Duration,
}

impl Limits {
    pub fn new(config: &RateLimits) -> Limits {
        Limits {
            per_user: config.per_user.map(limiter),
            per_tool: config.per_tool.map(limiter),
            clock: DefaultClock::default(),
            checks: AtomicU32::new(0),
        }
    }

    /// Takes one call for `user` on `tool`, or says which limit is reached. The user's
    /// limit is taken first: a call it refuses does not count against the tool, and one
    /// the tool's limit refuses still counts against the user.
    pub fn take(&self, user: &str, tool: &str) -> Result<(), Limited> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            for l in [&self.per_user, &self.per_tool].into_iter().flatten() {
                l.retain_recent();
            }
        }
        for (limiter, key, which) in [
            (&self.per_user, user, "your calls per minute"),
            (&self.per_tool, tool, "this tool's calls per minute"),
        ] {
            if let Some(l) = limiter
                && let Err(not_until) = l.check_key(&key.to_owned())
            {
                return Err(Limited {
                    which,
                    retry_after: not_until.wait_time_from(self.clock.now()),
                });
            }
        }
        Ok(())
    }
}

fn limiter(rate: Rate) -> Keyed {
    let per_minute = NonZeroU32::new(rate.per_minute).unwrap_or(NonZeroU32::MIN);
    let burst = rate.burst.and_then(NonZeroU32::new).unwrap_or(per_minute);
    RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_and_each_tool_has_its_own_budget() {
        let limits = Limits::new(&RateLimits {
            per_user: Some(Rate {
                per_minute: 60,
                burst: Some(2),
            }),
            per_tool: Some(Rate {
                per_minute: 60,
                burst: Some(3),
            }),
        });
        assert!(limits.take("ada", "gh__a").is_ok());
        assert!(limits.take("ada", "gh__a").is_ok());
        let refused = limits.take("ada", "gh__a").err();
        let refused = refused.unwrap_or_else(|| panic!("a third call in a burst of two"));
        assert_eq!(refused.which, "your calls per minute");
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        // Another user has a budget of their own, but the tool's is shared.
        assert!(limits.take("bob", "gh__a").is_ok());
        let refused = limits.take("bob", "gh__a").err().map(|l| l.which);
        assert_eq!(refused, Some("this tool's calls per minute"));
        // That refusal still spent bob's own budget: hammering a busy tool costs the
        // caller.
        let refused = limits.take("bob", "gh__b").err().map(|l| l.which);
        assert_eq!(refused, Some("your calls per minute"));
        assert!(limits.take("cy", "gh__b").is_ok());
    }

    #[test]
    fn no_limits_configured_refuses_nothing() {
        let limits = Limits::new(&RateLimits::default());
        for _ in 0..10_000 {
            assert!(limits.take("ada", "t").is_ok());
        }
    }
}
