//! Where the pinned model files live and how to find them.
//!
//! `scripts/fetch-model.sh` downloads the pinned packages, joins them, verifies the sha256 and
//! stores the file in [`model_dir`]. This module only looks there; it never downloads anything.

use std::path::{Path, PathBuf};

use crate::error::LocalError;

/// The environment variable that overrides the model cache folder.
pub const MODEL_DIR_ENV: &str = "CAIRN_MODEL_DIR";

/// A model that `scripts/fetch-model.sh` knows how to fetch and verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownModel {
    /// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the embedded default.
    Default,
    /// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: fast but picks wrong tools; only an option.
    Small,
    /// SmolLM2-135M-Instruct, Q4_1: the test fixture (loads fast, answers badly).
    Fixture,
}

impl KnownModel {
    /// All known models.
    pub const ALL: [KnownModel; 3] = [KnownModel::Default, KnownModel::Small, KnownModel::Fixture];

    /// The name the fetch script takes (`default`, `small`, `fixture`).
    pub fn name(self) -> &'static str {
        match self {
            KnownModel::Default => "default",
            KnownModel::Small => "small",
            KnownModel::Fixture => "fixture",
        }
    }

    /// The cached file's name.
    pub fn file_name(self) -> &'static str {
        match self {
            KnownModel::Default => "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            KnownModel::Small => "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            KnownModel::Fixture => "SmolLM2-135M-Instruct.Q4_1.gguf",
        }
    }

    /// The verified file's size in bytes.
    pub fn size(self) -> u64 {
        match self {
            KnownModel::Default => 1_117_320_768,
            KnownModel::Small => 491_400_064,
            KnownModel::Fixture => 98_362_432,
        }
    }

    /// The verified file's sha256 (hex).
    pub fn sha256(self) -> &'static str {
        match self {
            KnownModel::Default => {
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
            }
            KnownModel::Small => "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            KnownModel::Fixture => {
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
            }
        }
    }

    /// The model for a fetch-script name.
    pub fn from_name(name: &str) -> Option<KnownModel> {
        KnownModel::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Where the fetch script stores it (whether or not it is there).
    pub fn path(self) -> PathBuf {
        model_dir().join(self.file_name())
    }

    /// The cached file if it is there with the expected size (the fetch script verified its
    /// sha256 before storing it; the size check catches truncated copies cheaply).
    pub fn find(self) -> Option<PathBuf> {
        let p = self.path();
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() && m.len() == self.size() => Some(p),
            _ => None,
        }
    }

    /// The cached file, or an error that says which command fetches it.
    pub fn require(self) -> Result<PathBuf, LocalError> {
        let path = self.path();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.len() == self.size() => Ok(path),
            Ok(m) if m.is_file() => Err(LocalError::ModelMissing {
                path,
                hint: format!(
                    "The file has {} bytes, expected {}; run `scripts/fetch-model.sh {}` to fetch and verify it again.",
                    m.len(),
                    self.size(),
                    self.name()
                ),
            }),
            _ => Err(LocalError::ModelMissing {
                path,
                hint: format!(
                    "Run `scripts/fetch-model.sh {}` to fetch and verify it, or point cairn at any GGUF file.",
                    self.name()
                ),
            }),
        }
    }
}

/// The model cache folder: `$CAIRN_MODEL_DIR`, else `$HOME/.cache/cairn/models` (the same rule as
/// `scripts/fetch-model.sh`).
pub fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(MODEL_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("cairn").join("models")
}

/// The cached default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), or an error telling the user to
/// run `scripts/fetch-model.sh`.
pub fn default_model_path() -> Result<PathBuf, LocalError> {
    KnownModel::Default.require()
}

/// Resolves what a user passed as `--model`: a known name (`default`, `small`, `fixture`) or a path
/// to any GGUF file.
pub fn resolve_model(spec: &str) -> Result<PathBuf, LocalError> {
    if let Some(known) = KnownModel::from_name(spec) {
        return known.require();
    }
    let p = Path::new(spec);
    if p.is_file() {
        Ok(p.to_path_buf())
    } else {
        Err(LocalError::ModelMissing {
            path: p.to_path_buf(),
            hint: "Give the path of a GGUF file, or one of `default`, `small`, `fixture` (fetched by scripts/fetch-model.sh).".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in KnownModel::ALL {
            assert_eq!(KnownModel::from_name(m.name()), Some(m));
            assert!(m.file_name().ends_with(".gguf"));
            assert_eq!(m.sha256().len(), 64);
        }
        assert_eq!(KnownModel::from_name("huge"), None);
    }

    #[test]
    fn missing_file_says_what_to_run() {
        let e = resolve_model("/nonexistent/x.gguf").unwrap_err();
        assert!(e.to_string().contains("GGUF"), "{e}");
    }
}
