//! Opaque access tokens (not JWTs) asked about at the identity provider's RFC 7662
//! introspection endpoint, with the gateway's own client credentials. The answer is
//! believed only when it says `active`, names this gateway in `aud` and the issuer in
//! `iss` (when it gives one), and has not expired.

use serde_json::Value;

use crate::auth::mcp::token::{self, Client};

/// Why an opaque token is not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// The answer says it is not a token for this gateway now.
    Invalid(String),
    /// The endpoint could not be asked (retry later).
    Unavailable(String),
}

/// The introspection endpoint and the gateway's client there.
pub struct Introspection {
    endpoint: String,
    client: Client,
}

impl Introspection {
    /// `secret` authenticates by HTTP Basic; without one the client id goes in the form.
    pub fn new(endpoint: String, client_id: String, secret: Option<String>) -> Introspection {
        let method = if secret.is_some() {
            "client_secret_basic"
        } else {
            "none"
        };
        Introspection {
            endpoint,
            client: Client {
                id: client_id,
                secret,
                method: method.into(),
                issuer: None,
            },
        }
    }

    /// The token's claims as the identity provider states them, checked for this
    /// gateway; `leeway` seconds of clock skew on `exp`.
    pub async fn claims(
        &self,
        token: &str,
        issuer: &str,
        audience: &str,
        leeway: u64,
    ) -> Result<Value, Rejected> {
        let http =
            crate::auth::oauth::http_client().map_err(|e| Rejected::Unavailable(e.to_string()))?;
        let form = vec![
            ("token", token.to_owned()),
            ("token_type_hint", "access_token".to_owned()),
        ];
        let answer = token::post_form(
            http,
            &self.endpoint,
            &self.client,
            form,
            "the introspection endpoint",
        )
        .await
        .map_err(|e| Rejected::Unavailable(format!("introspection failed: {}", e.into_error())))?;
        check(answer, issuer, audience, leeway, crate::clock::now())
    }
}

fn check(
    answer: Value,
    issuer: &str,
    audience: &str,
    leeway: u64,
    now: u64,
) -> Result<Value, Rejected> {
    let invalid = |why: &str| Err(Rejected::Invalid(why.into()));
    if answer.get("active") != Some(&Value::Bool(true)) {
        return invalid("the identity provider says the token is not active");
    }
    if let Some(iss) = answer.get("iss")
        && iss.as_str() != Some(issuer)
    {
        return invalid("the token is from another issuer (iss)");
    }
    let for_us = match answer.get("aud") {
        Some(Value::String(a)) => a == audience,
        Some(Value::Array(a)) => a.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return invalid("the token is not for this gateway (aud)");
    }
    match answer.get("exp").and_then(Value::as_u64) {
        Some(exp) if exp + leeway < now => return invalid("the token has expired"),
        Some(_) => {}
        None => return invalid("the introspection answer has no exp"),
    }
    if answer.get("sub").and_then(Value::as_str).is_none() {
        return invalid("the introspection answer has no sub");
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_an_active_answer_for_this_gateway_in_time_is_believed() {
        let good = json!({"active": true, "sub": "ada", "iss": "https://idp", "aud": ["x", "https://gw/mcp"], "exp": 1000});
        assert!(check(good.clone(), "https://idp", "https://gw/mcp", 60, 900).is_ok());
        assert!(
            check(good.clone(), "https://idp", "https://gw/mcp", 60, 1050).is_ok(),
            "leeway"
        );
        for (change, value, says) in [
            ("active", json!(false), "not active"),
            ("active", json!("true"), "not active"),
            ("iss", json!("https://evil"), "iss"),
            ("aud", json!("https://other/mcp"), "aud"),
            ("aud", Value::Null, "aud"),
            ("exp", json!(10), "expired"),
            ("exp", Value::Null, "exp"),
            ("sub", json!(7), "sub"),
        ] {
            let mut a = good.clone();
            a[change] = value;
            match check(a, "https://idp", "https://gw/mcp", 60, 900) {
                Err(Rejected::Invalid(why)) => assert!(why.contains(says), "{change}: {why}"),
                other => panic!("{change}: {other:?}"),
            }
        }
    }
}
