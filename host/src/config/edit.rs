//! Adding and removing servers in a config file, keeping everything else in it.

use std::path::Path;

use serde_json::{Map, Value};

use super::{ConfigError, check_name, read_file};

/// Adds `name` to `file`'s `mcpServers`, creating the file if needed; refused when the
/// name is already there.
pub fn add_server(file: &Path, name: &str, entry: Value) -> Result<(), ConfigError> {
    let err = |message: String| ConfigError {
        file: file.to_owned(),
        server: Some(name.to_owned()),
        field: None,
        message,
    };
    check_name(name).map_err(err)?;
    let mut doc = read_file(file)?.unwrap_or_else(|| Value::Object(Map::new()));
    let Some(root) = doc.as_object_mut() else {
        return Err(err("the file is not a JSON object".into()));
    };
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        return Err(err("\"mcpServers\" is not an object".into()));
    };
    // Never over another: its entry would be lost, and `edgar mcp add` undoes a bad add
    // by removing the name.
    if servers.contains_key(name) {
        return Err(err(format!(
            "a server of that name is already there; `edgar mcp remove {name}` first, or choose another name"
        )));
    }
    servers.insert(name.to_owned(), entry);
    write(file, &doc).map_err(|e| err(format!("cannot write: {e}")))
}

/// Whether `file` has a server `name` (a file that cannot be read has none).
pub fn has_server(file: &Path, name: &str) -> bool {
    read_file(file)
        .ok()
        .flatten()
        .is_some_and(|doc| doc["mcpServers"].get(name).is_some())
}

/// Removes `name` from `file`; returns whether it was there.
pub fn remove_server(file: &Path, name: &str) -> Result<bool, ConfigError> {
    let err = |message: String| ConfigError {
        file: file.to_owned(),
        server: Some(name.to_owned()),
        field: None,
        message,
    };
    let Some(mut doc) = read_file(file)? else {
        return Ok(false);
    };
    let removed = doc
        .get_mut("mcpServers")
        .and_then(Value::as_object_mut)
        .is_some_and(|s| s.remove(name).is_some());
    if removed {
        write(file, &doc).map_err(|e| err(format!("cannot write: {e}")))?;
    }
    Ok(removed)
}

fn write(file: &Path, doc: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
    text.push(b'\n');
    use std::os::unix::fs::PermissionsExt;
    // A new file is private (it may carry headers and env); an existing one keeps the
    // mode its owner gave it.
    let mode = std::fs::metadata(file)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777);
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::paths::create_private_dir(dir)?;
    }
    crate::paths::write_atomic(file, &text)?;
    if let Some(mode) = mode {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn add_and_remove_keep_other_content() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = d.path().join("sub/mcp.json");
        add_server(&f, "a", json!({"command": "x"})).unwrap_or_else(|e| panic!("{e}"));
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap_or_default())
            .unwrap_or_default();
        doc["other"] = json!(1);
        std::fs::write(&f, doc.to_string()).unwrap_or_else(|e| panic!("{e}"));
        add_server(&f, "b", json!({"url": "https://h"})).unwrap_or_else(|e| panic!("{e}"));
        assert!(has_server(&f, "a") && !has_server(&f, "c"));
        assert_eq!(remove_server(&f, "a").ok(), Some(true));
        assert!(!has_server(&f, "a"));
        assert_eq!(remove_server(&f, "a").ok(), Some(false));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(
            doc,
            json!({"mcpServers": {"b": {"url": "https://h"}}, "other": 1})
        );
        assert!(add_server(&f, "bad name", json!({})).is_err());
        // An existing entry is never replaced.
        let e = add_server(&f, "b", json!({"command": "y"}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("already there"), "{e}");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(doc["mcpServers"]["b"], json!({"url": "https://h"}));
    }
}
