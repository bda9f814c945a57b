//! Skills: folders of instructions the agent loads on demand (SPEC R5.4).
//!
//! A skill source is a backend directory holding one folder per skill, each with a `SKILL.md`
//! that starts with YAML frontmatter:
//!
//! ```text
//! ---
//! name: release-notes
//! description: Write release notes from the git log.
//! ---
//! (instructions…)
//! ```
//!
//! At the start of a thread only the frontmatter is read (cached in session state under
//! [`SKILLS_STATE_KEY`]); the prompt lists each skill's name, description and path, and the agent
//! reads a `SKILL.md` in full with `read_file` only when it judges the skill relevant
//! (progressive disclosure). Later sources win when two define the same name. A skill without a
//! name or description is skipped with a warning; a name that differs from its folder only warns.

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendRuntime};
use crate::error::BackendError;
use crate::prompt::SKILLS_GUIDANCE;

/// Session-state key of the cached skill list.
pub const SKILLS_STATE_KEY: &str = "cairn.skills";

const MAX_DESCRIPTION: usize = 1024;
const MAX_COMPATIBILITY: usize = 500;

/// What the frontmatter of one skill says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMeta {
    /// The skill's name.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The path of its `SKILL.md`.
    pub path: String,
    /// Its licence, if stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// What it needs to work (≤ 500 characters), if stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Free-form string metadata.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Tools the skill expects, if stated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
}

/// The skills found, and what could not be loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillCatalog {
    /// Loaded skills, sorted by name.
    pub skills: Vec<SkillMeta>,
    /// Problems worth telling the model (a source that could not be listed, a bad frontmatter).
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    metadata: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    #[serde(rename = "allowed-tools", alias = "allowed_tools")]
    allowed_tools: Option<serde_json::Value>,
}

/// Splits `---\n<yaml>\n---` off the start of `text`.
pub fn split_frontmatter(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..offset]);
        }
        offset += line.len();
    }
    None
}

fn parse_skill(
    dir_name: &str,
    path: &str,
    text: &str,
) -> Result<(SkillMeta, Option<String>), String> {
    let yaml = split_frontmatter(text).ok_or_else(|| format!("{path}: no `---` frontmatter"))?;
    let fm: Frontmatter =
        yaml_serde::from_str(yaml).map_err(|e| format!("{path}: bad frontmatter: {e}"))?;
    let name = fm
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| format!("{path}: frontmatter has no name"))?;
    let mut description = fm
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| format!("{path}: frontmatter has no description"))?;
    if description.chars().count() > MAX_DESCRIPTION {
        description = description.chars().take(MAX_DESCRIPTION).collect();
    }
    let allowed_tools = match fm.allowed_tools {
        Some(serde_json::Value::String(s)) => s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(serde_json::Value::Array(a)) => a
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let warning = (name != dir_name)
        .then(|| format!("{path}: skill name `{name}` differs from its folder `{dir_name}`"));
    Ok((
        SkillMeta {
            name,
            description: description.trim().to_owned(),
            path: path.to_owned(),
            license: fm.license,
            compatibility: fm
                .compatibility
                .map(|c| c.chars().take(MAX_COMPATIBILITY).collect()),
            metadata: fm
                .metadata
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect(),
            allowed_tools,
        },
        warning,
    ))
}

/// Reads the frontmatter of every skill under `sources` (backend directories).
pub async fn load_skills(
    backend: &dyn Backend,
    rt: &BackendRuntime,
    sources: &[String],
) -> SkillCatalog {
    let mut catalog = SkillCatalog::default();
    let mut by_name: std::collections::BTreeMap<String, SkillMeta> = Default::default();
    for source in sources {
        let entries = match backend.ls(rt, source).await {
            Ok(e) => e,
            Err(BackendError::NotFound(_)) => continue,
            Err(e) => {
                catalog
                    .warnings
                    .push(format!("{source}: could not list skills: {e}"));
                continue;
            }
        };
        for entry in entries.into_iter().filter(|e| e.is_dir) {
            let dir = entry.path.trim_end_matches('/');
            let dir_name = dir.rsplit('/').next().unwrap_or(dir);
            let path = format!("{dir}/SKILL.md");
            let text = match backend.read_text(rt, &path).await {
                Ok(t) => t,
                Err(BackendError::NotFound(_)) => continue,
                Err(e) => {
                    catalog.warnings.push(format!("{path}: {e}"));
                    continue;
                }
            };
            match parse_skill(dir_name, &path, &text) {
                Ok((meta, warning)) => {
                    catalog.warnings.extend(warning);
                    by_name.insert(meta.name.clone(), meta);
                }
                Err(w) => catalog.warnings.push(w),
            }
        }
    }
    catalog.skills = by_name.into_values().collect();
    catalog.warnings.truncate(20);
    catalog
}

/// The skills section of the system prompt.
pub fn render_skills(sources: &[String], catalog: &SkillCatalog) -> String {
    let mut s = String::from("## Skills\n");
    let places: Vec<String> = sources.iter().map(|p| format!("`{p}`")).collect();
    s.push_str(&format!("Skill folders: {}", places.join(", ")));
    if sources.len() > 1 {
        s.push_str(" (later folders win on a name clash)");
    }
    s.push('\n');
    if catalog.skills.is_empty() {
        s.push_str("(No skills yet.)\n");
    }
    for k in &catalog.skills {
        s.push_str(&format!("- {}: {} (`{}`)", k.name, k.description, k.path));
        let mut notes = Vec::new();
        if let Some(l) = &k.license {
            notes.push(format!("license: {l}"));
        }
        if let Some(c) = &k.compatibility {
            notes.push(format!("needs: {c}"));
        }
        if !notes.is_empty() {
            s.push_str(&format!(" [{}]", notes.join("; ")));
        }
        if !k.allowed_tools.is_empty() {
            s.push_str(&format!(" [tools: {}]", k.allowed_tools.join(", ")));
        }
        s.push('\n');
    }
    if !catalog.warnings.is_empty() {
        s.push_str("Not loaded:\n");
        for w in &catalog.warnings {
            let w: String = w.chars().take(300).collect();
            s.push_str(&format!("- {w}\n"));
        }
    }
    s.push_str(SKILLS_GUIDANCE);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_parsing() {
        let text = "---\nname: notes\ndescription: Write notes.\nallowed-tools: read_file, grep\n---\nBody";
        let (m, w) = parse_skill("notes", "/skills/notes/SKILL.md", text).unwrap();
        assert_eq!(m.name, "notes");
        assert_eq!(m.allowed_tools, ["read_file", "grep"]);
        assert!(w.is_none());
        let (_, w) = parse_skill("other", "/p", text).unwrap();
        assert!(w.unwrap().contains("differs from its folder"));
        assert!(parse_skill("x", "/p", "no frontmatter").is_err());
        assert!(
            parse_skill("x", "/p", "---\nname: x\n---\n")
                .unwrap_err()
                .contains("no description")
        );
    }
}
