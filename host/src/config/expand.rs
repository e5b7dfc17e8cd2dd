//! `${VAR}` and `${VAR:-default}` expansion, as Claude Code does in `.mcp.json`.

/// Expands every `${NAME}` and `${NAME:-default}` in `s` using `lookup`. A variable that
/// is unset (or empty, for the `:-` form) with no default is an error naming it.
pub fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed ${{ in {s:?}"));
        };
        let body = &after[..end];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return Err(format!("bad variable name {name:?} in {s:?}"));
        }
        match (
            lookup(name).filter(|v| default.is_none() || !v.is_empty()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(format!("environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands() {
        let cases = [
            ("plain", "plain"),
            ("${HOME}/x", "/home/u/x"),
            ("a${HOME}b${HOME}", "a/home/ub/home/u"),
            ("${MISSING:-fallback}", "fallback"),
            ("${EMPTY:-fallback}", "fallback"),
            ("${EMPTY}", ""),
            ("${HOME:-x}", "/home/u"),
            ("$HOME stays", "$HOME stays"),
            ("cost: $5", "cost: $5"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, &env).as_deref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(
            expand("${NOPE}", &env),
            Err("environment variable NOPE is not set".into())
        );
        assert!(expand("${HOME", &env).is_err_and(|e| e.contains("unclosed")));
        assert!(expand("${A B}", &env).is_err_and(|e| e.contains("bad variable name")));
    }
}
