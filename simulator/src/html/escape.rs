//! Escaping for the report page: every string that comes from a scenario (names, labels,
//! descriptions, reasons) passes through here before it reaches the HTML.

use serde::Serialize;

/// `s` as HTML text or as a quoted attribute value (either quote): `&`, `<`, `>`, `"` and
/// `'` become character references, so the text can neither close an element or an
/// attribute nor open a new one.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as JSON that is safe inside a `<script>` element: `<`, `>` and `&` are written as
/// `\u` escapes (JSON syntax has them only inside strings), so no `</script>` or `<!--` can
/// appear, whatever the strings hold.
pub fn script_json<T: Serialize>(value: &T) -> String {
    // Serializing plain data (strings, numbers, maps with string keys) cannot fail.
    let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cannot_break_out_of_an_element_or_attribute() {
        assert_eq!(
            text(r#"<script>alert("x&y")</script> it's"#),
            "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt; it&#39;s"
        );
        assert_eq!(text("us-east-1a"), "us-east-1a");
    }

    #[test]
    fn script_json_has_no_markup_and_reads_back() {
        let value = serde_json::json!({"name": "</script><!-- a & b >"});
        let json = script_json(&value);
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back, value);
    }
}
