//! Taking an input object apart field by field, so that nothing is dropped silently: every
//! converter takes the fields it knows out of a [`Fields`], and whatever is left at the end
//! is reported as not converted.

use crate::report::{Reporter, join};
use serde_json::{Map, Value};

/// The fields of one JSON object of the input, at `path`, not yet converted.
pub(crate) struct Fields {
    map: Map<String, Value>,
    path: String,
}

impl Fields {
    /// The object `value` at `path`; anything but an object (or null, read as empty) is an
    /// error on `path`, and yields no fields.
    pub(crate) fn of(value: Value, path: &str, report: &mut Reporter<'_>) -> Self {
        let map = match value {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                report.error(
                    path,
                    format!("expected an object, found {}", kind_of(&other)),
                );
                Map::new()
            }
        };
        Self {
            map,
            path: path.to_owned(),
        }
    }

    /// The path of this object.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The path of the field `key`.
    pub(crate) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Takes the field `key` out (null counts as absent).
    pub(crate) fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    /// Takes the field `key` out as an object's fields (absent is empty).
    pub(crate) fn take_fields(&mut self, key: &str, report: &mut Reporter<'_>) -> Fields {
        let path = self.path_of(key);
        Fields::of(self.take(key).unwrap_or(Value::Null), &path, report)
    }

    /// Takes the field `key` out as a string; another type is an error and yields `None`.
    pub(crate) fn take_str(&mut self, key: &str, report: &mut Reporter<'_>) -> Option<String> {
        match self.take(key)? {
            Value::String(s) => Some(s),
            other => {
                report.error(
                    &self.path_of(key),
                    format!("expected a string, found {}", kind_of(&other)),
                );
                None
            }
        }
    }

    /// Takes the field `key` out as a list; another type is an error and yields `None`.
    pub(crate) fn take_list(&mut self, key: &str, report: &mut Reporter<'_>) -> Option<Vec<Value>> {
        match self.take(key)? {
            Value::Array(items) => Some(items),
            other => {
                report.error(
                    &self.path_of(key),
                    format!("expected a list, found {}", kind_of(&other)),
                );
                None
            }
        }
    }

    /// Takes the field `key` out as a map of strings (a label or tag map); another type, or
    /// a value that is not a string, is an error and is left out.
    pub(crate) fn take_string_map(
        &mut self,
        key: &str,
        report: &mut Reporter<'_>,
    ) -> Option<Map<String, Value>> {
        let path = self.path_of(key);
        let value = self.take(key)?;
        string_map(value, &path, report)
    }

    /// Reports every field left as lossy: `what` (for example "a v1alpha5 Provisioner spec")
    /// has no such field, or this converter does not know it, so it is not converted.
    pub(crate) fn finish(self, what: &str, report: &mut Reporter<'_>) {
        for (key, value) in self.map {
            if value.is_null() {
                continue;
            }
            report.lossy(
                &join(&self.path, &key),
                format!("not a field of {what} this tool knows; not converted"),
            );
        }
    }
}

/// `value` as a map whose values are all strings; entries with other values are errors and
/// left out, and anything but an object is an error.
pub(crate) fn string_map(
    value: Value,
    path: &str,
    report: &mut Reporter<'_>,
) -> Option<Map<String, Value>> {
    let Value::Object(map) = value else {
        report.error(
            path,
            format!("expected a map of strings, found {}", kind_of(&value)),
        );
        return None;
    };
    let mut out = Map::new();
    for (k, v) in map {
        if v.is_string() {
            out.insert(k, v);
        } else {
            report.error(
                &join(path, &k),
                format!("expected a string, found {}", kind_of(&v)),
            );
        }
    }
    Some(out)
}

/// A word for a JSON value's type, for messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Sets `key` in `map` when `value` is present.
pub(crate) fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Severity;
    use serde_json::json;

    #[test]
    fn fields_left_over_are_reported_as_lossy() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        let mut f = Fields::of(
            json!({"a": "x", "b": 1, "c": null, "d": {"e": "y"}}),
            "spec",
            &mut r,
        );
        assert_eq!(f.take_str("a", &mut r).as_deref(), Some("x"));
        assert_eq!(f.take_str("b", &mut r), None);
        assert!(f.take("c").is_none());
        f.finish("a test spec", &mut r);
        let got: Vec<_> = issues
            .iter()
            .map(|i| (i.severity, i.field.as_str()))
            .collect();
        assert_eq!(
            got,
            [(Severity::Error, "spec.b"), (Severity::Lossy, "spec.d")]
        );
    }

    #[test]
    fn string_maps_keep_only_strings() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        let map = string_map(json!({"a": "1", "b": 2}), "spec.tags", &mut r).unwrap();
        assert_eq!(Value::Object(map), json!({"a": "1"}));
        assert!(string_map(json!([1]), "spec.tags", &mut r).is_none());
        assert_eq!(issues[0].field, "spec.tags.b");
    }
}
