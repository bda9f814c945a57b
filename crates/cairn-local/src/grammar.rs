//! GBNF grammars generated from tools' JSON schemas.
//!
//! [`tool_call_grammar`] builds a grammar whose only sentences are exactly one call of one of the
//! given tools, in Qwen's format:
//!
//! ```text
//! <tool_call>
//! {"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}
//! </tool_call>
//! ```
//!
//! JSON is laid out as Python's `json.dumps` does (`", "` and `": "`), the layout the model saw in
//! its system prompt. Supported schema keywords: `type` (object, string, number, integer, boolean,
//! null, array, and lists of types), `properties` + `required` (required properties in declared
//! order, then the optional ones, each optional, in declared order), `items`, `enum`, `const`,
//! `anyOf`/`oneOf`, and local `$ref`s (`#/$defs/…`, `#/definitions/…`). Anything else (or an
//! object without `properties`) accepts any JSON value of the right kind.

use std::collections::BTreeSet;

use cairn_core::ToolSpec;
use serde_json::Value;

use crate::prompt::to_json;

const MAX_DEPTH: usize = 12;

/// The primitive rules, in the order they are written.
const PRIMITIVES: &[(&str, &str)] = &[
    (
        "value",
        r#"object | array | string | number | "true" | "false" | "null""#,
    ),
    (
        "object",
        r#""{" ( string ": " value ( ", " string ": " value )* )? "}""#,
    ),
    ("array", r#""[" ( value ( ", " value )* )? "]""#),
    ("string", r#""\"" char* "\"""#),
    (
        "char",
        r#"[^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )"#,
    ),
    (
        "number",
        r#""-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?"#,
    ),
    ("integer", r#""-"? ( "0" | [1-9] [0-9]{0,15} )"#),
    ("boolean", r#""true" | "false""#),
    ("null", r#""null""#),
];

fn primitive_deps(name: &str) -> &'static [&'static str] {
    match name {
        "value" => &["object", "array", "string", "number"],
        "object" => &["string", "value"],
        "array" => &["value"],
        "string" => &["char"],
        _ => &[],
    }
}

/// A GBNF grammar for exactly one call of one of `tools`, wrapped in `<tool_call>` tags. `None`
/// when `tools` is empty. The root rule is `root`.
pub fn tool_call_grammar(tools: &[ToolSpec]) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let mut g = Gen::default();
    let mut alternatives = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let name = g.fresh_name(&format!("tool-{i}"));
        alternatives.push(name.clone());
        let args_name = format!("{name}-args");
        let args = g.object_or_any(&tool.parameters, &tool.parameters, &args_name, 0);
        let head = format!(
            r#"{{"name": {}, "arguments": "#,
            to_json(&Value::String(tool.name.clone()))
        );
        g.rules.push((
            name,
            merge_literals(format!("{} {} \"}}\"", lit(&head), args)),
        ));
    }
    let mut out = String::new();
    out.push_str("root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n");
    out.push_str(&format!("call ::= {}\n", alternatives.join(" | ")));
    for (name, body) in &g.rules {
        out.push_str(&format!("{name} ::= {body}\n"));
    }
    // Close the set of used primitives over their dependencies, then write them in fixed order.
    let mut used = g.used.clone();
    loop {
        let before = used.len();
        for p in used.clone() {
            for d in primitive_deps(p) {
                used.insert(d);
            }
        }
        if used.len() == before {
            break;
        }
    }
    for (name, body) in PRIMITIVES {
        if used.contains(name) {
            out.push_str(&format!("{name} ::= {body}\n"));
        }
    }
    Some(out)
}

/// A GBNF string literal for `s`.
pub fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[derive(Default)]
struct Gen {
    rules: Vec<(String, String)>,
    names: BTreeSet<String>,
    used: BTreeSet<&'static str>,
}

impl Gen {
    fn fresh_name(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        while base.contains("--") {
            base = base.replace("--", "-");
        }
        let base = base.trim_matches('-').to_ascii_lowercase();
        let base = if base.is_empty() {
            "r".to_owned()
        } else {
            base
        };
        let reserved =
            |n: &str| n == "root" || n == "call" || PRIMITIVES.iter().any(|(p, _)| *p == n);
        let mut name = base.clone();
        let mut k = 1;
        while self.names.contains(&name) || reserved(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn prim(&mut self, name: &'static str) -> String {
        self.used.insert(name);
        name.to_owned()
    }

    /// The arguments object of a tool: always an object, even when the schema says little.
    fn object_or_any(&mut self, schema: &Value, root: &Value, hint: &str, depth: usize) -> String {
        let resolved = resolve(schema, root);
        match resolved {
            Value::Object(m) if m.get("properties").is_some_and(Value::is_object) => {
                self.schema(resolved, root, hint, depth)
            }
            _ => self.prim("object"),
        }
    }

    /// An expression for `schema`; named rules for objects and arrays.
    fn schema(&mut self, schema: &Value, root: &Value, hint: &str, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return self.prim("value");
        }
        let schema = resolve(schema, root);
        let Value::Object(m) = schema else {
            // `true`, `{}` or something unknown: any value.
            return self.prim("value");
        };
        if let Some(c) = m.get("const") {
            return lit(&to_json(c));
        }
        if let Some(Value::Array(values)) = m.get("enum") {
            if values.is_empty() {
                return self.prim("value");
            }
            let alts: Vec<String> = values.iter().map(|v| lit(&to_json(v))).collect();
            return group(alts);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = m.get(key) {
                if options.is_empty() {
                    continue;
                }
                let alts: Vec<String> = options
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.schema(s, root, &format!("{hint}-{i}"), depth + 1))
                    .collect();
                return group(dedup(alts));
            }
        }
        match m.get("type") {
            Some(Value::String(t)) => self.typed(t, m, root, hint, depth),
            Some(Value::Array(types)) => {
                let alts: Vec<String> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, m, root, hint, depth))
                    .collect();
                if alts.is_empty() {
                    self.prim("value")
                } else {
                    group(dedup(alts))
                }
            }
            _ if m.get("properties").is_some_and(Value::is_object) => {
                self.typed("object", m, root, hint, depth)
            }
            _ if m.get("items").is_some() => self.typed("array", m, root, hint, depth),
            _ => self.prim("value"),
        }
    }

    fn typed(
        &mut self,
        t: &str,
        m: &serde_json::Map<String, Value>,
        root: &Value,
        hint: &str,
        depth: usize,
    ) -> String {
        match t {
            "string" => self.prim("string"),
            "number" => self.prim("number"),
            "integer" => self.prim("integer"),
            "boolean" => self.prim("boolean"),
            "null" => self.prim("null"),
            "array" => {
                let Some(items) = m.get("items") else {
                    return self.prim("array");
                };
                let name = self.fresh_name(hint);
                let item = self.schema(items, root, &format!("{name}-item"), depth + 1);
                let body = format!(r#""[" ( {item} ( ", " {item} )* )? "]""#);
                self.rules.push((name.clone(), body));
                name
            }
            "object" => {
                let Some(Value::Object(props)) = m.get("properties") else {
                    return self.prim("object");
                };
                if props.is_empty() {
                    return lit("{}");
                }
                let required: BTreeSet<&str> = m
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let name = self.fresh_name(hint);
                let mut req = Vec::new();
                let mut opt = Vec::new();
                for (key, sub) in props {
                    let value = self.schema(sub, root, &format!("{name}-{key}"), depth + 1);
                    let kv = format!(
                        "{} {}",
                        lit(&format!("{}: ", to_json(&Value::String(key.clone())))),
                        value
                    );
                    if required.contains(key.as_str()) {
                        req.push(kv);
                    } else {
                        opt.push(kv);
                    }
                }
                let body = object_body(&req, &opt);
                self.rules.push((name.clone(), body));
                name
            }
            _ => self.prim("value"),
        }
    }
}

/// `"{" required… optional… "}"` with `", "` between members.
fn object_body(req: &[String], opt: &[String]) -> String {
    let mut parts: Vec<String> = vec![lit("{")];
    for (i, kv) in req.iter().enumerate() {
        if i > 0 {
            parts.push(lit(", "));
        }
        parts.push(kv.clone());
    }
    if req.is_empty() {
        if !opt.is_empty() {
            // The first member present has no leading comma: pick which optional comes first.
            let alts: Vec<String> = (0..opt.len())
                .map(|i| {
                    let mut seq = vec![opt[i].clone()];
                    for later in &opt[i + 1..] {
                        seq.push(format!("( {} {} )?", lit(", "), later));
                    }
                    seq.join(" ")
                })
                .collect();
            parts.push(format!("( {} )?", alts.join(" | ")));
        }
    } else {
        for kv in opt {
            parts.push(format!("( {} {} )?", lit(", "), kv));
        }
    }
    parts.push(lit("}"));
    merge_literals(parts.join(" "))
}

/// Joins adjacent literals (`"{" "\"a\": "` → `"{\"a\": "`) for readability.
fn merge_literals(s: String) -> String {
    // Only merges literal tokens separated by one space at the top level of a sequence.
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            let end = literal_end(bytes, i);
            out.push_str(&s[i..end]);
            i = end;
            // `" "` followed by another literal: drop the closing quote, the space and the
            // opening quote.
            while i + 1 < bytes.len() && bytes[i] == b' ' && bytes[i + 1] == b'"' {
                out.pop();
                let next_end = literal_end(bytes, i + 1);
                out.push_str(&s[i + 2..next_end]);
                i = next_end;
            }
        } else {
            let ch_len = s[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&s[i..i + ch_len]);
            i += ch_len;
        }
    }
    out
}

/// The index just past the literal starting at `start` (a `"`).
fn literal_end(bytes: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

fn group(alts: Vec<String>) -> String {
    if alts.len() == 1 {
        alts.into_iter().next().unwrap_or_default()
    } else {
        format!("( {} )", alts.join(" | "))
    }
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|s| seen.insert(s.clone())).collect()
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`, or any `#/a/b` path) against `root`.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut cur = schema;
    for _ in 0..MAX_DEPTH {
        let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
            return cur;
        };
        let Some(path) = r.strip_prefix('#') else {
            return &Value::Bool(true);
        };
        match root.pointer(path) {
            Some(next) => cur = next,
            None => return &Value::Bool(true),
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_grammar_for_a_small_schema() {
        let tools = [
            ToolSpec::new(
                "write_file",
                "Write a file.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "mode": {"enum": ["w", "a"]},
                    "tries": {"type": "integer"}
                }, "required": ["path", "content"]}),
            ),
            ToolSpec::new("ls", "List.", json!({"type": "object", "properties": {}})),
        ];
        let g = tool_call_grammar(&tools).unwrap_or_default();
        let want = r#"root ::= "<tool_call>\n" call "\n</tool_call>"
call ::= tool-0 | tool-1
tool-0-args ::= "{\"path\": " string ", \"content\": " string ( ", \"mode\": " ( "\"w\"" | "\"a\"" ) )? ( ", \"tries\": " integer )? "}"
tool-0 ::= "{\"name\": \"write_file\", \"arguments\": " tool-0-args "}"
tool-1 ::= "{\"name\": \"ls\", \"arguments\": {}}"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
"#;
        assert_eq!(g, want);
    }

    #[test]
    fn optional_only_objects_nested_arrays_and_refs() {
        let params = json!({
            "type": "object",
            "properties": {
                "todos": {"type": "array", "items": {"$ref": "#/$defs/Todo"}},
                "note": {"type": ["string", "null"]}
            },
            "$defs": {"Todo": {"type": "object", "properties": {
                "content": {"type": "string"}, "done": {"type": "boolean"}
            }, "required": ["content", "done"]}}
        });
        let g = tool_call_grammar(&[ToolSpec::new("write_todos", "", params)]).unwrap_or_default();
        assert!(
            g.contains(r#"tool-0-args ::= "{" ( "\"todos\": " tool-0-args-todos ( ", \"note\": " ( string | null ) )? | "\"note\": " ( string | null ) )? "}""#),
            "{g}"
        );
        assert!(
            g.contains(r#"tool-0-args-todos ::= "[" ( tool-0-args-todos-item ( ", " tool-0-args-todos-item )* )? "]""#),
            "{g}"
        );
        assert!(
            g.contains(
                r#"tool-0-args-todos-item ::= "{\"content\": " string ", \"done\": " boolean "}""#
            ),
            "{g}"
        );
    }

    #[test]
    fn unknown_schemas_fall_back_to_any_value() {
        let g = tool_call_grammar(&[ToolSpec::new(
            "run",
            "",
            json!({"type": "object", "properties": {"x": {"format": "weird"}, "y": {"type": "object"}}, "required": ["x", "y"]}),
        )])
        .unwrap_or_default();
        assert!(
            g.contains(r#""{\"x\": " value ", \"y\": " object "}""#),
            "{g}"
        );
        for p in [
            "value ::=",
            "object ::=",
            "array ::=",
            "string ::=",
            "number ::=",
        ] {
            assert!(g.contains(p), "{p} missing in {g}");
        }
        assert!(tool_call_grammar(&[]).is_none());
    }

    #[test]
    fn literals_escape() {
        assert_eq!(lit("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(merge_literals(r#""a" "b" x "c""#.into()), r#""ab" x "c""#);
    }
}
